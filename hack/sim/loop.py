"""The shape every simulated controller shares: one background task started on the running loop and
cancelled and awaited on stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from .errors import ApiError

log = logging.getLogger("caldera.sim")


class BackgroundLoop:
    """A controller whose work is ``_run()``, run as one task named ``task_name``."""

    task_name = "sim-controller"

    def __init__(self) -> None:
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.task_name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        raise NotImplementedError

    @staticmethod
    def _guard(fn: Callable[[str, str], None], ns: str, name: str) -> None:
        """Reconcile one object: an API refusal is a debug line, any other failure is logged; neither stops
        the controller."""
        try:
            fn(ns, name)
        except ApiError as exc:
            log.debug("%s %s/%s: %s", fn.__name__, ns, name, exc.message)
        except Exception:
            log.exception("%s %s/%s failed", fn.__name__, ns, name)


class NamespaceDebounced(BackgroundLoop):
    """A controller that reconciles whole namespaces: ``mark(ns)`` asks for one, and ``sync(ns)`` runs
    once per marked namespace, ``interval`` seconds after the first mark (marks meanwhile coalesce)."""

    def __init__(self, interval: float) -> None:
        super().__init__()
        self.interval = interval
        self._dirty: set[str] = set()

    def mark(self, namespace: str) -> None:
        self._dirty.add(namespace)
        self._wake.set()

    def sync(self, namespace: str) -> None:
        raise NotImplementedError

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(self.interval)
            dirty, self._dirty = self._dirty, set()
            for ns in dirty:
                self.sync(ns)
