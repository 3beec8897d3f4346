"""`caldera-sim bench core --only pending`: the full-cluster cycle figure alone, measured as the
scheduler runs (its collector settings), with the collector left as it was afterwards."""

import gc

from caldera.hack.bench import cycle_latency


def test_the_pending_figure_runs_alone_and_restores_the_collector(capsys, tmp_path):
    threshold = gc.get_threshold()
    profile = tmp_path / "cycles.prof"
    cycle_latency(nodes=20, pending=200, repeats=3, profile=str(profile), arrivals=1)
    line = capsys.readouterr().out
    assert line.startswith(
        "200 pending pods (and 10 more arriving before each measured cycle) on 20 full nodes"
    )
    assert "over 3 cycles p50" in line and "p99" in line and "allocate" in line
    assert profile.stat().st_size > 0
    assert gc.get_threshold() == threshold
    assert gc.get_freeze_count() == 0
