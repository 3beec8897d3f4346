"""The `caldera-scheduler` console script."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time
from typing import Any

from caldera.config.duration import parse_duration

#: a flag value that cannot work (argparse's own code for bad usage)
EXIT_USAGE = 2


def package_version() -> str:
    # here, not at the top: importlib.metadata (with email, zipfile, ...) is ~15 ms of start-up
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("caldera")
    except PackageNotFoundError:
        return "0.0.0+unknown"


def duration(text: str) -> float:
    """A flag's duration: ``1s``, ``200ms``, ``1.5m``, ``1h30m`` (Go's syntax, as Volcano's flags), or plain
    seconds; positive."""
    try:
        value = parse_duration(text, bare_seconds=True)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use e.g. 1s, 200ms)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"duration must be positive: {text!r}")
    return value


EPILOG = """\
commands:
  caldera-scheduler explain NAMESPACE/NAME        why a job (PodGroup) is pending
  caldera-scheduler explain pod NAMESPACE/NAME    why a pod is pending
      (both ask a running scheduler: --server URL, default http://127.0.0.1:8080;
       see `caldera-scheduler explain --help`)

exit codes: 0 stopped on SIGTERM/SIGINT; 1 lost the leader Lease (or failed); 2 bad flag or unusable
scheduler conf; 3 cannot start (kubeconfig unusable, or the listen address cannot be used)
"""


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every flag shows its default (``on``/``off`` for switches); help that names its default
    itself, or has none to name, is left as written."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            "default" in text
            or action.default is argparse.SUPPRESS
            or not action.option_strings
            or action.dest == "version"
        ):
            return text
        default = action.default
        if isinstance(default, bool):
            shown = "on" if default else "off"
        elif default is None or default == "":
            return text
        else:
            shown = "%(default)s"
        return f"{text} (default: {shown})"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="caldera-scheduler",
        description="Volcano-compatible batch scheduler for Kubernetes",
        epilog=EPILOG,
        formatter_class=_HelpFormatter,
    )
    p.add_argument("--version", action="store_true", help="print the version and exit")
    p.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="kubeconfig file (default: the in-cluster service account, else $KUBECONFIG or ~/.kube/config)",
    )
    p.add_argument(
        "--scheduler-name",
        action="append",
        dest="scheduler_names",
        metavar="NAME",
        help="schedule pods whose spec.schedulerName is NAME (repeatable; default: caldera)",
    )
    p.add_argument(
        "--scheduler-conf",
        metavar="PATH|configmap:NS/NAME[:KEY]",
        help="the scheduler conf in Volcano's format: a file (reloaded when it changes) or a ConfigMap "
        "(watched) (default: Volcano's default conf, built in)",
    )
    p.add_argument("--schedule-period", type=duration, default="1s", metavar="DURATION", help="cycle period")
    p.add_argument(
        "--cycle-budget",
        type=duration,
        default="1s",
        metavar="DURATION",
        help="time a cycle's decision may take before allocate stops taking further jobs; the jobs"
        " not reached are taken, in order, by the next cycle before any job is taken again (a large"
        " backlog is placed over several short cycles)",
    )
    p.add_argument(
        "--listen-address",
        default="127.0.0.1:8080",
        metavar="HOST:PORT",
        help="HTTP address for /metrics, /healthz, /readyz, /debug and /ui",
    )
    p.add_argument(
        "--ui",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="serve the read-only web view at /ui on the listen address",
    )
    p.add_argument("--leader-elect", action="store_true", help="run only while holding the leader Lease")
    p.add_argument(
        "--leader-elect-lease-duration",
        type=duration,
        default="15s",
        metavar="DURATION",
        help="how long a leader's Lease lasts without renewal",
    )
    p.add_argument(
        "--leader-elect-renew-deadline",
        type=duration,
        default="10s",
        metavar="DURATION",
        help="the leader gives up when it cannot renew within this",
    )
    p.add_argument(
        "--leader-elect-retry-period",
        type=duration,
        default="2s",
        metavar="DURATION",
        help="how often to try to acquire or renew the Lease",
    )
    p.add_argument(
        "--leader-elect-resource-namespace",
        default="",
        metavar="NAMESPACE",
        help="namespace of the Lease (default: $POD_NAMESPACE, else kube-system)",
    )
    p.add_argument(
        "--leader-elect-resource-name", default="caldera", metavar="NAME", help="name of the Lease"
    )
    p.add_argument(
        "--default-queue", default="default", metavar="QUEUE", help="queue of PodGroups that name none"
    )
    p.add_argument(
        "--enable-controllers",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the PodGroup and Queue controllers for plain workloads",
    )
    p.add_argument(
        "--bind-workers",
        type=int,
        default=64,
        metavar="N",
        help="bind requests in flight at once",
    )
    p.add_argument(
        "--volume-bind-timeout",
        type=duration,
        default=600.0,
        metavar="DURATION",
        help="how long a gang waits for its WaitForFirstConsumer volumes before the attempt is undone "
        "(kube-scheduler's VolumeBinding bindTimeoutSeconds, 600s)",
    )
    p.add_argument(
        "--per-pod-events", action="store_true", help="also record Scheduled/FailedScheduling per pod"
    )
    p.add_argument(
        "--shutdown-timeout",
        type=duration,
        default="30s",
        metavar="DURATION",
        help="on SIGTERM, how long in-flight binds may take to finish",
    )
    p.add_argument("--log-format", choices=("text", "json"), default="text", help="log line format")
    p.add_argument(
        "--log-level",
        default="info",
        type=str.lower,
        choices=("debug", "info", "warning", "error"),
        help="log level",
    )
    return p


def usage_error(args: argparse.Namespace) -> str | None:
    """A flag value that parses but cannot work, as one line saying what to do; None when all is well."""
    from caldera.config.address import parse_listen_address

    try:
        parse_listen_address(args.listen_address)
    except ValueError as exc:
        return f"--listen-address {exc}"
    if args.kubeconfig and not os.path.isfile(args.kubeconfig):
        what = "is a directory" if os.path.isdir(args.kubeconfig) else "does not exist"
        return (
            f"--kubeconfig {args.kubeconfig}: the file {what}; pass the path of a kubeconfig file, or leave "
            "--kubeconfig out to use the in-cluster service account or $KUBECONFIG"
        )
    if args.bind_workers < 1:
        return f"--bind-workers {args.bind_workers}: must be at least 1"
    return None


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out)


def setup_logging(fmt: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper(), logging.INFO))


def options_from(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from caldera.scheduler.app import Options

    return Options(
        kubeconfig=args.kubeconfig,
        scheduler_names=args.scheduler_names or ["caldera"],
        scheduler_conf=args.scheduler_conf,
        schedule_period=args.schedule_period,
        cycle_budget=args.cycle_budget,
        listen_address=args.listen_address,
        leader_elect=args.leader_elect,
        lease_namespace=args.leader_elect_resource_namespace,
        lease_name=args.leader_elect_resource_name,
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period,
        default_queue=args.default_queue,
        bind_workers=args.bind_workers,
        volume_bind_timeout=args.volume_bind_timeout,
        per_pod_events=args.per_pod_events,
        shutdown_timeout=args.shutdown_timeout,
        enable_controllers=args.enable_controllers,
        ui=args.ui,
    )


async def _serve(args: argparse.Namespace) -> int:
    from caldera.scheduler.app import SchedulerApp
    from caldera.scheduler.memory import CollectorPolicy

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    app = SchedulerApp(options_from(args), collector=CollectorPolicy())
    return await app.run(stop)


#: seconds a thread waiting for the GIL waits at most before the running thread is asked to give
#: it up (``sys.setswitchinterval``; CPython's default is 0.005)
GIL_SWITCH_INTERVAL = 0.001


def main(argv: list[str] | None = None) -> int:
    # numpy's OpenBLAS starts a thread per core at import, and they spin a while waiting for work:
    # ~0.1 s of CPU at start on 2 cores. The scheduler calls no BLAS routine (its arrays are summed
    # and compared element-wise): one thread, unless the environment says otherwise. Set before
    # numpy's first import (caldera.scheduler.http's).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # A cycle decides in a worker thread while the event loop binds, watches and writes
    # (scheduler/loop.py ``SchedulerLoop.cycle``). CPython makes a thread that wants the GIL wait
    # up to the switch interval for it (5 ms by default), so during a long cycle every turn of the
    # loop waited that long: the binds of the gangs the cycle had already committed went out in a
    # trickle while the API server sat idle. 1 ms lets them through sooner, at the same CPU
    # (`caldera-sim bench e2e --nodes 5000 --pods 10000 --shape backlog`, five runs each way
    # interleaved: the last bind 3 % sooner on average, 4.08 s -> 3.95 s, in 4 pairs of 5).
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "explain":
        from caldera.scheduler.explain_cli import main as explain_main

        return explain_main(argv[1:])
    args = build_parser().parse_args(argv)
    if args.version:
        print(f"caldera-scheduler {package_version()}")
        return 0
    problem = usage_error(args)
    if problem is not None:
        print(f"caldera-scheduler: {problem}", file=sys.stderr)
        return EXIT_USAGE
    setup_logging(args.log_format, args.log_level)
    from caldera.scheduler.memory import set_thresholds

    set_thresholds()  # before the scheduler's imports (in _serve)
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:  # pragma: no cover - non-Linux
        runner = asyncio.run
    try:
        return int(runner(_serve(args)))
    except KeyboardInterrupt:
        return 0
    except Exception as exc:
        logging.getLogger("caldera.scheduler").exception("caldera-scheduler failed: %s", exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
