from caldera.scheduler.cli import build_parser, options_from


def test_flags_reach_the_options():
    opts = options_from(
        build_parser().parse_args(
            ["--no-ui", "--schedule-period", "200ms", "--scheduler-name", "a", "--scheduler-name", "b"]
        )
    )
    assert opts.ui is False
    assert opts.schedule_period == 0.2
    assert opts.scheduler_names == ["a", "b"]
    defaults = options_from(build_parser().parse_args([]))
    assert defaults.ui is True
    assert defaults.scheduler_names == ["caldera"]
    assert defaults.listen_address == "127.0.0.1:8080"
    assert defaults.default_queue == "default"
