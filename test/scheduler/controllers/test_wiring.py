"""The binary's switch for the controllers: on by default, ``--no-enable-controllers`` turns them off."""

from caldera.scheduler.cli import build_parser, options_from


def test_controllers_are_on_by_default_and_can_be_turned_off() -> None:
    assert options_from(build_parser().parse_args([])).enable_controllers is True
    assert options_from(build_parser().parse_args(["--enable-controllers"])).enable_controllers is True
    assert options_from(build_parser().parse_args(["--no-enable-controllers"])).enable_controllers is False
