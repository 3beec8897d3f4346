"""``caldera-scheduler explain [job] NAMESPACE/NAME`` and ``caldera-scheduler explain pod NAMESPACE/NAME``
(``--server URL``, ``--json``): why a job or a pod is pending, from the running scheduler's
``/debug/jobs/NAMESPACE/NAME`` and ``/debug/pods/NAMESPACE/NAME``."""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from typing import Any

DEFAULT_SERVER = "http://127.0.0.1:8080"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="caldera-scheduler explain",
        description="Explain why a job (PodGroup) or a pod is pending, asking a running caldera-scheduler",
        usage="%(prog)s [job|pod] NAMESPACE/NAME [--server URL] [--json]",
    )
    p.add_argument(
        "target",
        nargs="+",
        metavar="[job|pod] NAMESPACE/NAME",
        help="a PodGroup (`job` may be left out) or a pod; the namespace is default when left out",
    )
    p.add_argument(
        "--server",
        default=DEFAULT_SERVER,
        help=f"the scheduler's HTTP address, its --listen-address (default: {DEFAULT_SERVER})",
    )
    p.add_argument("--json", action="store_true", help="print the explanation document as JSON")
    return p


def parse_target(words: list[str]) -> tuple[str, str, str]:
    """``[job|pod] [NAMESPACE/]NAME`` into (kind, namespace, name); ValueError says what is wrong."""
    if len(words) == 1:
        kind, ref = "job", words[0]
    elif len(words) == 2 and words[0] in ("job", "pod"):
        kind, ref = words
    else:
        raise ValueError(f"expected [job|pod] NAMESPACE/NAME, not {' '.join(words)!r}")
    namespace, _, name = ref.rpartition("/")
    if not name or "/" in namespace:
        raise ValueError(f"expected NAMESPACE/NAME, not {ref!r}")
    return kind, namespace or "default", name


def fetch(
    server: str, namespace: str, name: str, timeout: float = 10.0, kind: str = "job"
) -> tuple[int, dict[str, Any]]:
    collection = "pods" if kind == "pod" else "jobs"
    url = f"{server.rstrip('/')}/debug/{collection}/{namespace}/{name}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read())
        except ValueError:
            return exc.code, {"error": str(exc)}


def _quantity(name: str, value: float) -> str:
    if name == "memory":
        for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value >= size:
                return f"{value / size:.3g}{suffix}"
        return f"{value:g}"
    return f"{value:g}"


def render(doc: dict[str, Any]) -> str:
    """The explanation as readable lines."""
    lines = [
        f"Job {doc.get('namespace')}/{doc.get('name')} (queue {doc.get('queue')}, phase {doc.get('phase')})"
    ]
    reason = doc.get("reason") or ""
    lines.append(f"  Reason:     {reason or 'none: the job is not pending for a reason the scheduler knows'}")
    if doc.get("problem") == "PodGroupNotFound":
        # No PodGroup: no gang, queue or roles to show, only the pods that wait for it.
        lines[0] = f"PodGroup {doc.get('namespace')}/{doc.get('name')} (does not exist)"
        lines.append(f"  Pods:       {', '.join(doc.get('pods') or [])}")
        lines.append(f"  To fix:     {doc.get('suggestion')}")
        lines.append(f"  (as of scheduling cycle {doc.get('cycle')})")
        return "\n".join(lines)
    for pod in doc.get("unreadable_pods") or []:
        lines.append(f"  Unreadable: pod {pod.get('name')}: {pod.get('reason')}")
    gang = doc.get("gang") or {}
    if gang:
        roles = ", ".join(f"{r}: {n}" for r, n in sorted((gang.get("min_task_member") or {}).items()))
        lines.append(
            f"  Gang:       minMember {gang.get('min_member')}, {gang.get('ready')} ready, "
            f"{gang.get('pipelined')} pipelined, {gang.get('pending')} pending, {gang.get('valid')} valid"
            + (f" (per role: {roles})" if roles else "")
        )
    for g in doc.get("gated") or []:
        gates = ", ".join(g.get("gates") or [])
        lines.append(f"  Gated:      pod {g.get('pod')} waits for scheduling gates {gates}")
    for v in doc.get("victims_refused") or []:
        lines.append(
            f"  Victim:     {v.get('action')} could not take pod {v.get('victim')}: refused by {v.get('plugin')}"
        )
    qs = doc.get("queue_state") or {}
    if qs:
        held = "held: " + qs["message"] if qs.get("held") else "not holding the job"
        lines.append(f"  Queue:      {qs.get('name')} ({qs.get('state') or 'unknown'}), {held}")
    for role in doc.get("roles") or []:
        req = ", ".join(f"{_quantity(k, v)} {k}" for k, v in (role.get("request") or {}).items() if v)
        lines.append(
            f"  Role {role.get('role') or '(default)'}: {role.get('pending')} pending, each asking {req or 'nothing'}; "
            f"{role.get('feasible')}/{role.get('nodes')} nodes fit"
        )
        for pred, n in (role.get("predicates") or {}).items():
            lines.append(f"    {n:>6} node(s): {pred}")
    devices = doc.get("devices")
    if devices:
        lines.append(f"  Devices:    {devices.get('summary')}")
    topo = doc.get("topology")
    if topo:
        tiers = ", ".join(f"{t['tier']} ({t['label']})" for t in topo.get("tiers_tried") or [])
        lines.append(
            f"  Topology:   {topo.get('mode')} up to tier {topo.get('highest_tier')}; tiers tried: {tiers}"
        )
        for g in topo.get("groups") or []:
            lines.append(f"    {g.get('tier_label', g.get('tier'))} {g.get('name')}: {g.get('shortfall')}")
        more = int(topo.get("groups_tried", 0)) - len(topo.get("groups") or [])
        if more > 0:
            lines.append(f"    ... and {more} more groups")
    sub_groups = doc.get("sub_groups")
    if sub_groups:
        for p in sub_groups.get("policies") or []:
            lines.append(
                f"  SubGroups:  policy {p.get('policy')}: {p.get('whole')} whole of the "
                f"{p.get('min_sub_groups')} needed"
            )
        for g in sub_groups.get("groups") or []:
            state = "whole" if g.get("whole") else f"{g.get('ready')}/{g.get('size')} ready"
            where = f" in {g['hypernode']}" if g.get("hypernode") else ""
            if not where and g.get("fit_in"):
                where = f", fits in {g['fit_in']}"
            why = f": {g['reason']}" if g.get("reason") else ""
            lines.append(f"    {g.get('name')}: {state}{where}{why}")
    if doc.get("suggestion"):
        label = "To fix:" if doc.get("problem") else "To fit:"
        lines.append(f"  {label:<11} {doc['suggestion']}")
    lines.append(f"  (as of scheduling cycle {doc.get('cycle')})")
    return "\n".join(lines)


def render_pod(doc: dict[str, Any]) -> str:
    """A pod's explanation as readable lines."""
    lines = [f"Pod {doc.get('namespace')}/{doc.get('name')} ({doc.get('status') or 'unknown'})"]
    if doc.get("node"):
        lines.append(f"  Node:       {doc['node']}")
    job = doc.get("job") or ""
    lines.append(f"  Job:        {job or 'none'}")
    reason = doc.get("reason") or ""
    lines.append(f"  Reason:     {reason or 'none: the pod is not pending for a reason the scheduler knows'}")
    if doc.get("job_reason") and doc.get("job_reason") != reason:
        lines.append(f"  Job reason: {doc['job_reason']}")
    if doc.get("suggestion"):
        lines.append(
            f"  To fix:     {doc['suggestion']}"
            if doc.get("problem")
            else f"  To fit:     {doc['suggestion']}"
        )
    if (doc.get("devices") or {}).get("summary"):
        lines.append(f"  Devices:    {doc['devices']['summary']}")
    if job and doc.get("explain_job"):
        lines.append(f"  More:       caldera-scheduler explain {job}")
    lines.append(f"  (as of scheduling cycle {doc.get('cycle')})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        kind, namespace, name = parse_target(args.target)
    except ValueError as exc:
        print(f"caldera-scheduler explain: {exc}", file=sys.stderr)
        return 2
    try:
        status, doc = fetch(args.server, namespace, name, kind=kind)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        print(
            f"cannot reach the scheduler at {args.server}: {reason}; is caldera-scheduler running there? "
            "(pass its --listen-address as --server URL)",
            file=sys.stderr,
        )
        return 2
    if status != 200:
        print(doc.get("error") or f"HTTP {status}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True))
    elif kind == "pod":
        print(render_pod(doc))
    else:
        print(render(doc))
    return 0
