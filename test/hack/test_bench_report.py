"""`caldera-sim bench report`: a document whose every table names the command that printed it, with
the machine, the date and the commit it ran on (structure here, not figures)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from caldera.hack import bench_core, bench_report
from caldera.hack.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]


def _sections(text: str) -> dict[str, str]:
    """Each `### `command`` heading and the text under it, up to the next heading."""
    parts = re.split(r"^#{2,3} ", text, flags=re.M)
    out = {}
    for part in parts[1:]:
        heading, _, body = part.partition("\n")
        match = re.fullmatch(r"`(.+)`", heading.strip())
        if match:
            out[match.group(1)] = body
    return out


def _table_rows(body: str) -> list[list[str]]:
    rows = [line for line in body.splitlines() if line.startswith("|")]
    return [[c.strip() for c in row.strip("|").split("|")] for row in rows[2:]]  # past header and rule


def _table_header(body: str) -> list[str]:
    first = next(line for line in body.splitlines() if line.startswith("|"))
    return [c.strip() for c in first.strip("|").split("|")]


def _parses(command: str) -> str:
    """The benchmark a command names, parsed by the parser its program uses (it must parse)."""
    argv = shlex.split(command)
    if argv[0] == "caldera-sim":
        args = build_parser().parse_args(argv[1:])
        assert args.command == "bench"
        return f"bench {args.bench}"
    assert argv[:3] == ["python", "-m", "caldera.hack.bench_core"], command
    bench_core.parser().parse_args(argv[3:])
    return "bench_core"


def test_quick_report_has_every_table_with_its_command_and_the_machine(tmp_path: Path) -> None:
    out = tmp_path / "perf" / "performance.md"
    assert main(["bench", "report", "--quick", "--repeat", "1", "--out", str(out)]) == 0
    text = out.read_text()

    machine = re.search(r"^## Machine and run\n(.*?)^## ", text, flags=re.M | re.S)
    assert machine is not None
    facts = {row[0]: row[1] for row in _table_rows(machine.group(1))}
    for key in ("CPU (/proc/cpuinfo)", "memory", "Python", "started", "finished"):
        assert facts[key], key
    assert re.fullmatch(r"\d+", facts["CPUs available (nproc)"])
    assert re.match(r"`[0-9a-f]{40}`", facts["commit"])
    for key in ("load average at start", "load average at end"):
        assert re.fullmatch(r"\d+\.\d\d, \d+\.\d\d, \d+\.\d\d \(1, 5, 15 min\)", facts[key]), facts[key]
    assert "caldera-sim bench report --quick --repeat 1 --out" in text

    sections = _sections(text)
    kinds = {command: _parses(command) for command in sections}
    e2e = [c for c, kind in kinds.items() if kind == "bench e2e"]
    parsed = [build_parser().parse_args(shlex.split(c)[1:]) for c in e2e]
    assert len({(args.nodes, args.pods) for args in parsed}) == 3  # two sizes and the envelope
    assert all(args.repeat == 1 for args in parsed)
    assert sorted((args.topology, args.ceiling, args.shape) for args in parsed) == [
        (False, False, "both"),
        (False, False, "both"),
        (False, False, "both"),
        (False, False, "stream"),
        (False, True, "backlog"),
        (True, False, "both"),
    ]
    for command, args in zip(e2e, parsed, strict=True):
        header = _table_header(sections[command])
        rows = [dict(zip(header, row, strict=True)) for row in _table_rows(sections[command])]
        if args.ceiling:  # each backlog run, then the decision-free binder's on the same workload
            assert [row["shape"] for row in rows] == [
                "backlog",
                "backlog, binding ceiling",
                "backlog, binding ceiling, one core busy",
            ]
            assert re.fullmatch(r"\d+\.\d\d", rows[0]["pods/s as a fraction of the binding ceiling"])
            most = "the most that fraction could be: first pod bound, then caldera-sim's CPU to the last"
            assert re.fullmatch(r"\d+\.\d\d \(\d+\.\d\d s, \d+\.\d\d s\)", rows[0][most]), rows[0][most]
            own = "the most it could be: the scheduler's own CPU to its last bind, in one interpreter"
            assert re.fullmatch(r"\d+\.\d\d \(\d+\.\d\d s\)", rows[0][own]), rows[0][own]
            busy = "pods/s as a fraction of the binding ceiling with one core busy"
            assert re.fullmatch(r"\d+\.\d\d", rows[0][busy]), rows[0][busy]
        elif args.rate:  # the streaming-latency runs: pods created at a fixed rate
            assert [row["shape"] for row in rows] == ["stream"]
        else:
            assert [row["shape"] for row in rows] == ["backlog", "stream"]
            assert "pods/s as a fraction of the binding ceiling" not in header
        if args.topology:
            for row in rows:  # every gang inside one leaf: N of N
                checked = re.fullmatch(r"(\d+)/(\d+)", row["gangs inside one leaf"])
                assert checked is not None and checked.group(1) == checked.group(2), row
        else:
            assert "gangs inside one leaf" not in header
        for row in rows:
            assert re.fullmatch(r"\*\*\d+\.\d{3} ms\*\*", row["scheduler CPU per bound pod"]), row
            assert re.fullmatch(r"-?\d+\.\d KiB", row["simulator RSS per pod"]), row
            assert re.fullmatch(r"\d+(\.\d)? ms / \d+(\.\d)? ms", row["latency to bound p50 / p99"]), row
        for row in rows[:1] if args.ceiling else rows:  # the binder has no cycles
            assert re.fullmatch(r"\d+(\.\d)? ms / \d+(\.\d)? ms", row["cycle p99 / longest"]), row
    (core,) = [c for c, kind in kinds.items() if kind == "bench core" and "--topology" not in c]
    titles = [row[0] for row in _table_rows(sections[core])]
    assert any(t.startswith("steady state") for t in titles)
    assert any("pending pods on" in t for t in titles)
    # topology-aware gangs against the same gangs without: every shape, each run's pair and ratio
    (topology,) = [c for c, kind in kinds.items() if kind == "bench core" and "--topology" in c]
    rows = _table_rows(sections[topology])
    assert [row[0].split(":")[0].split(", ")[1] for row in rows] == [
        "hard tier 1",
        "hard tier 1",
        "hard tier 2",
        "soft tier 1",
    ]
    for _title, measured in rows:
        assert re.fullmatch(r"\d+\.\d{3} / \d+\.\d{3} ms = \d+\.\d\dx", measured), measured
    (micro,) = [c for c, kind in kinds.items() if kind == "bench_core"]
    assert [row[0] for row in _table_rows(sections[micro])][:2] == [
        "cache built",
        "snapshot, everything copied",
    ]
    for body in sections.values():
        assert "load average after it:" in body

    summary = re.search(r"^## Summary\n(.*?)^## ", text, flags=re.M | re.S)
    assert summary is not None
    for _figure, command, _measured in _table_rows(summary.group(1)):
        assert command.strip("`") in sections
    (latency,) = [(f, m) for f, _c, m in _table_rows(summary.group(1)) if "latency from a pod's create" in f]
    assert re.fullmatch(r"\d+ / \d+ ms; \d+\.\d{3} ms", latency[1]), latency
    # the envelope: per shape, each run's CPU per bound pod, longest cycle and scheduler RSS
    envelope = [
        (f, m) for f, _c, m in _table_rows(summary.group(1)) if f.startswith("end to end, the envelope")
    ]
    assert [f.split(", ")[2].split(":")[0] for f, _m in envelope] == ["backlog", "stream"]
    for _f, measured in envelope:
        assert re.fullmatch(r"\d+\.\d{3} ms; \d+ ms; \d+ MiB", measured), measured
    assert re.search(
        r"^Measured .* commit `[0-9a-f]{7}`.*load average .* at the end\.$", summary.group(1), re.M
    )


def test_readme_quotes_its_performance_summary_from_docs_performance() -> None:
    """The README's performance table and the line saying when it was measured are copied from the
    committed document, not written by hand."""
    readme = (ROOT / "README.md").read_text()
    section = re.search(r"^## Performance\n(.*?)^#{2,3} ", readme, flags=re.M | re.S)
    assert section is not None
    assert "(docs/performance.md)" in section.group(1)
    copied = [line for line in section.group(1).splitlines() if line.startswith(("|", "Measured "))]
    assert len(copied) >= 4  # a header, its rule, a row, the measured line
    document = set((ROOT / "docs" / "performance.md").read_text().splitlines())
    assert [line for line in copied if line not in document] == []


def test_only_runs_the_chosen_benchmarks(tmp_path: Path) -> None:
    out = tmp_path / "perf.md"
    assert main(["bench", "report", "--quick", "--only", "micro", "--out", str(out)]) == 0
    kinds = [_parses(command) for command in _sections(out.read_text())]
    assert kinds == ["bench_core"]


def _git(repo: Path, *argv: str) -> None:
    subprocess.run(["git", "-C", str(repo), *argv], check=True, capture_output=True)


def test_commit_is_marked_dirty_by_changed_tracked_files_but_not_by_the_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "code.py").write_text("x = 1\n")
    (repo / "docs" / "performance.md").write_text("old\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    monkeypatch.setattr(bench_report, "ROOT", repo)
    doc = repo / "docs" / "performance.md"

    clean = bench_report.commit(ignore=doc)
    assert clean.head is not None and "dirty" not in clean.full() + clean.short()
    doc.write_text("new figures\n")
    assert bench_report.commit(ignore=doc) == clean
    (repo / "code.py").write_text("x = 2\n")
    marked = bench_report.commit(ignore=doc)
    assert marked.changed == ("code.py",)
    assert "**dirty**" in marked.full() and "`code.py`" in marked.full() and "dirty" in marked.short()
