"""``caldera-sim bench core --dra`` at a tiny size: both arms place every pod, and it prints its figures."""

from caldera.hack.bench_dra import _per_pod, run_dra


def test_both_arms_place_every_pod_and_the_report_prints(capsys) -> None:  # type: ignore[no-untyped-def]
    assert _per_pod(4, 3, 2, True, 1)[1] == 6
    assert _per_pod(4, 3, 2, False, 1)[1] == 6
    run_dra(4, 3, 2, repeat=1)
    out = capsys.readouterr().out
    assert "with claims:    6 pods placed" in out and "with / without:" in out
