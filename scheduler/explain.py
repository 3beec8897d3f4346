"""``caldera-scheduler explain NAMESPACE/NAME [--server URL] [--json]``: why a job is pending, from the
running scheduler's ``/debug/jobs/NAMESPACE/NAME``."""

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
        prog="caldera-scheduler explain", description="Explain why a job (PodGroup) is pending"
    )
    p.add_argument("job", metavar="NAMESPACE/NAME", help="the PodGroup (namespace default when left out)")
    p.add_argument(
        "--server", default=DEFAULT_SERVER, help=f"the scheduler's HTTP address ({DEFAULT_SERVER})"
    )
    p.add_argument("--json", action="store_true", help="print the explanation document as JSON")
    return p


def fetch(server: str, namespace: str, name: str, timeout: float = 10.0) -> tuple[int, dict[str, Any]]:
    url = f"{server.rstrip('/')}/debug/jobs/{namespace}/{name}"
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
    if doc.get("suggestion"):
        lines.append(f"  To fit:     {doc['suggestion']}")
    lines.append(f"  (as of scheduling cycle {doc.get('cycle')})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    namespace, _, name = args.job.rpartition("/")
    namespace = namespace or "default"
    try:
        status, doc = fetch(args.server, namespace, name)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        print(f"cannot reach the scheduler at {args.server}: {exc}", file=sys.stderr)
        return 2
    if status != 200:
        print(doc.get("error") or f"HTTP {status}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True))
    else:
        print(render(doc))
    return 0
