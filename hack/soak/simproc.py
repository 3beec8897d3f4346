"""The simulated cluster as a child process with a control channel: one JSON command per stdin line.

    {"op": "faults", "error_429_rate": 0.3, ...}   set fault knobs (hack.sim.faults.Faults fields)
    {"op": "clear"}                                 clear every fault
    {"op": "compact"}                               forget the watch history (clients resuming get 410)
    {"op": "drop_watches", "abort": false}          close every open watch
    {"op": "grant_token", "token": "..."}           a further bearer token that authenticates as the admin
    {"op": "revoke_token", "token": "..."}          that token answered 401 from now on
    {"op": "lease_stall", "seconds": 4}             Lease requests held unanswered that long

With ``write_log`` (a path) in the configuration, the replicas' writes are logged there
(hack/soak/leadership.py).

`caldera-sim serve` only takes faults at start; the soak needs storms that begin and end.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import signal
import sys
from typing import Any

from caldera.hack.sim import SimCluster
from caldera.hack.soak.leadership import WriteLog

log = logging.getLogger("caldera.soak.sim")


def apply(sim: SimCluster, command: dict[str, Any], writes: WriteLog | None = None) -> None:
    op = command.pop("op", "")
    if op == "faults":
        sim.set_faults(**command)
    elif op == "clear":
        sim.faults.clear()
    elif op == "compact":
        sim.compact()
    elif op == "drop_watches":
        sim.drop_watches(abort=bool(command.get("abort", False)))
    elif op == "grant_token":
        sim.server.authz.grant_admin(str(command["token"]))
    elif op == "revoke_token":
        sim.server.authz.revoke(str(command["token"]))
    elif op == "lease_stall" and writes is not None:
        writes.stall(float(command["seconds"]))
    else:
        log.warning("unknown command %r", op)


async def main(config: dict[str, Any]) -> None:
    write_log = config.pop("write_log", None)
    sim = SimCluster(**config)
    writes = WriteLog(write_log, sim.token) if write_log else None
    if writes is not None:
        sim.server.request_hooks.append(writes.hook)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def control() -> None:
        while True:
            line = await reader.readline()
            if not line:  # the driver went away: do not outlive it
                stop.set()
                return
            try:
                apply(sim, json.loads(line), writes)
            except Exception:
                log.exception("bad command %r", line)

    async def collect() -> None:
        while True:
            await asyncio.sleep(60)
            gc.collect()

    async def flush() -> None:
        while writes is not None:
            await asyncio.sleep(0.5)
            writes.flush()

    async with sim:
        print(f"caldera-sim: serving {sim.url}", flush=True)
        tasks = [asyncio.create_task(f()) for f in (control, collect, flush)]
        await stop.wait()
        for t in tasks:
            t.cancel()
        if writes is not None:
            writes.close()


if __name__ == "__main__":
    gc.set_threshold(10_000, 10, 1_000_000_000)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cfg = json.loads(sys.argv[1])
    try:
        import uvloop

        uvloop.run(main(cfg))
    except ImportError:
        asyncio.run(main(cfg))
