"""The soak's lease-renew stall, and the check that no replica writes while it cannot prove it leads.

In the simulator (:class:`WriteLog`, installed by ``hack.soak.simproc``): a request hook that holds
every request for a Lease unanswered while a stall is on (``stall``), and writes one line per write
the scheduler replicas make (every request but a GET, sent with a token other than the driver's) to a
file: its arrival time on the machine's monotonic clock, method and path; Lease writes are marked.
The driver reads the file (:func:`read_log`) and judges each stall (:func:`judge_stall`).

The rule judged: the leader's renew deadline counts from when it sent its last successful renewal,
which is before the simulator saw that renewal's PUT arrive (``R``). From ``R`` + the renew deadline
+ ``STOP_SLACK`` until the next Lease write the simulator sees, no replica can prove it leads, and
no binding, eviction, delete or status write may arrive. ``STOP_SLACK`` is half of what lies between
the renew deadline and the lease duration: a request passed its gate before the deadline and the
simulator read it later; after ``R`` + the lease duration another replica could lead.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

#: what the simulator may see of writes gated just before the deadline (half of lease - deadline)
STOP_SLACK = 0.5


class WriteLog:
    """The simulator's side: the Lease stall and the log of the replicas' writes."""

    def __init__(self, path: str | Path, admin_token: str) -> None:
        self.path = Path(path)
        self.admin_header = f"Bearer {admin_token}"
        self.stall_until = 0.0
        self._file: IO[str] = open(self.path, "a", buffering=1 << 16)

    def stall(self, seconds: float) -> None:
        now = time.monotonic()
        self.stall_until = now + seconds
        self._write({"t": now, "stall": seconds})

    async def hook(self, request: Any) -> None:
        """Awaited before every resource request (``ApiServer.request_hooks``)."""
        lease = "/leases" in request.path
        if lease:
            while (wait := self.stall_until - time.monotonic()) > 0:
                await asyncio.sleep(wait)
        if request.method == "GET" or request.headers.get("Authorization") == self.admin_header:
            return
        self._write({"t": time.monotonic(), "m": request.method, "p": request.path, "lease": lease})

    def _write(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(record) + "\n")

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_log(path: str | Path) -> list[dict[str, Any]]:
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # the last line, half written
    return out


@dataclass
class StallVerdict:
    renewed: float | None  # R: the last Lease write before the stall (monotonic)
    resumed: float | None  # the first Lease write after it
    stopped_after: float | None  # the last write in the stall, seconds after R (None: none)
    offending: list[dict[str, Any]]  # writes that arrived when no replica could prove it leads

    def describe(self, renew_deadline: float) -> str:
        if self.renewed is None:
            return "no Lease write before the stall"
        stop = "no write" if self.stopped_after is None else f"last write {self.stopped_after:.2f}s"
        resumed = (
            "no Lease written since"
            if self.resumed is None
            else f"lease written again {self.resumed - self.renewed:.1f}s"
        )
        return f"{stop} and {resumed} after the last renewal (renew deadline {renew_deadline:g}s)"


def judge_stall(
    records: list[dict[str, Any]], start: float, renew_deadline: float, until: float
) -> StallVerdict:
    """The writes around the stall that began at ``start`` (the simulator's record of it), up to
    ``until``: those that arrived after the deadline of the last renewal, before the Lease was written
    again, offend."""
    before = [r["t"] for r in records if r.get("lease") and r["t"] < start]
    renewed = max(before) if before else None
    after = [r["t"] for r in records if r.get("lease") and r["t"] >= start]
    resumed = min(after) if after else None
    if renewed is None:
        return StallVerdict(None, resumed, None, [])
    end = resumed if resumed is not None else until
    writes = [r for r in records if "m" in r and not r.get("lease") and renewed <= r["t"] < end]
    stopped_after = max((r["t"] - renewed for r in writes), default=None)
    limit = renewed + renew_deadline + STOP_SLACK
    offending = [r for r in writes if r["t"] > limit]
    return StallVerdict(renewed, resumed, stopped_after, offending)
