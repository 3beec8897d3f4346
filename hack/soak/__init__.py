"""`caldera-sim soak`: the scheduler under realistic and hostile load, with invariants checked throughout
(the subcommand and its description: `cli`).

Rooms: `options` (what a run is asked to do), `cluster` (the simulated cluster, the scheduler conf and foreign
pods), `supervisor` (the scheduler replicas), `faults` (what is injected and when), `checker` (the
invariants), `scrape` (reading /metrics), `metric_checks` (the scheduler's metrics against the API),
`sampler` (time series and the memory judgement), `report` (summary, text, HTML and JSON), `driver` (the run
from start to end), `procs` and `simproc` (the child processes), `timeline` (clock and event log).
"""

from caldera.hack.soak.driver import Soak, run_soak
from caldera.hack.soak.faults import FAULT_KINDS, parse_faults
from caldera.hack.soak.options import Options
from caldera.hack.soak.report import Summary

__all__ = ["FAULT_KINDS", "Options", "Soak", "Summary", "parse_faults", "run_soak"]
