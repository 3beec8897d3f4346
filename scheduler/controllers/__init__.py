"""Controllers that let plain workloads (bare pods, Deployments, StatefulSets, Jobs) use Caldera
without a Volcano job controller: PodGroups for pods that name none, and Queue state.

``Controllers(client, ...).run(stop)`` waits until pods, PodGroups and queues have synced (a decision
on half the picture could delete a group a pod needs), then works through changed keys with a bounded
set of workers, one key at a time per key. In the scheduler the three kinds come from the cache's own
watches (``source=``: one watch and one decode per event for both); without a source the controllers
list and watch them themselves.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from collections.abc import Callable, Iterable
from typing import Any

from caldera.cache.client import ApiClient, ApiError, backoff_delay
from caldera.cache.informer import Informers
from caldera.cache.supervise import stop_workers, supervise
from caldera.cache.watch import Handler, Reflector
from caldera.scheduler.controllers.podgroup import PodGroupController
from caldera.scheduler.controllers.queue import QueueController
from caldera.scheduler.controllers.state import ControllerState, PgKey, Pod, PodGroup, Queue, WorkQueue
from caldera.scheduler.leader import always

log = logging.getLogger("caldera.controllers")

PODS_PATH = "/api/v1/pods"
PODGROUPS_PATH = "/apis/scheduling.volcano.sh/v1beta1/podgroups"
QUEUES_PATH = "/apis/scheduling.volcano.sh/v1beta1/queues"

__all__ = ["Controllers"]

#: A queue's status counts every PodGroup in it: recount at most this often while its groups churn,
#: so a burst of N PodGroups costs a few recounts, not N (each O(groups in the queue)).
QUEUE_RECOUNT_DELAY = 0.25


class Controllers:
    def _queue_changed(self, name: str) -> None:
        self.queue_queue.add_after(name, QUEUE_RECOUNT_DELAY)

    def __init__(
        self,
        client: ApiClient,
        *,
        scheduler_names: Iterable[str] = ("caldera",),
        default_queue: str = "default",
        workers: int = 4,
        resync_period: float = 60.0,
        watch_timeout: int = 300,
        queue_drain_finalizer: bool = True,
        update_podgroup_status: bool = True,
        source: Informers | None = None,
        may_write: Callable[[], bool] = always,
    ) -> None:
        self.client = client
        self.source = source
        self.scheduler_names = tuple(scheduler_names) or ("caldera",)
        self.workers = max(1, workers)
        self.resync_period = resync_period
        self.podgroup_queue: WorkQueue[PgKey] = WorkQueue()
        self.queue_queue: WorkQueue[str] = WorkQueue()
        self.state = ControllerState(
            self.scheduler_names,
            default_queue,
            self.podgroup_queue.add,
            self._queue_changed,
            reads_phase=update_podgroup_status,
        )
        self.podgroups = PodGroupController(
            client, self.state, update_status=update_podgroup_status, may_write=may_write
        )
        self.queues = QueueController(
            client, self.state, drain_finalizer=queue_drain_finalizer, may_write=may_write
        )
        params: dict[str, str] = {}
        if len(self.scheduler_names) == 1:
            # Only our pods: the watch costs the API server (and us) nothing for everyone else's.
            params["fieldSelector"] = f"spec.schedulerName={self.scheduler_names[0]}"
        self._feeds: dict[str, Handler[Any]] = {
            "pods": self.state.pods_handler,
            "podgroups": self.state.podgroups_handler,
            "queues": self.state.queues_handler,
        }
        self.reflectors: dict[str, Reflector[Any]] = {}
        if source is None:
            self.reflectors = self._own_reflectors(client, params, watch_timeout)
        self._failures: dict[object, int] = {}
        self.errors = 0

    def _own_reflectors(
        self, client: ApiClient, params: dict[str, str], watch_timeout: int
    ) -> dict[str, Reflector[Any]]:
        return {
            "pods": Reflector(
                client,
                PODS_PATH,
                Pod,
                self.state.pods_handler,
                name="controller-pods",
                params=params,
                watch_timeout=watch_timeout,
            ),
            "podgroups": Reflector(
                client,
                PODGROUPS_PATH,
                PodGroup,
                self.state.podgroups_handler,
                name="controller-podgroups",
                watch_timeout=watch_timeout,
            ),
            "queues": Reflector(
                client,
                QUEUES_PATH,
                Queue,
                self.state.queues_handler,
                name="controller-queues",
                watch_timeout=watch_timeout,
            ),
        }

    @property
    def synced(self) -> bool:
        if self.source is not None:
            return self.source.synced(list(self._feeds))
        return all(r.synced.is_set() for r in self.reflectors.values())

    @property
    def idle(self) -> bool:
        """Nothing queued or in progress (timers for later looks may still be pending)."""
        return self.podgroup_queue.idle and self.queue_queue.idle

    async def run(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set; every task started here is cancelled and awaited on the way out."""
        tasks: list[asyncio.Task[None]] = [
            supervise(f"controllers-watch-{name}", functools.partial(r.run, stop))
            for name, r in self.reflectors.items()
        ]
        if self.source is not None:
            for kind, handler in self._feeds.items():
                self.source.subscribe(kind, handler)
        try:
            while not self.synced:
                if stop.is_set():
                    return
                await asyncio.sleep(0.02)
            log.info(
                "controllers synced: %d pods, %d PodGroups, %d queues",
                len(self.state.pods),
                len(self.state.podgroups),
                len(self.state.queues),
            )
            self.queue_queue.add(self.state.default_queue)
            for key in self.state.all_podgroup_keys():
                self.podgroup_queue.add(key)
            for name in self.state.all_queue_keys():
                self.queue_queue.add(name)
            for i in range(self.workers):
                tasks.append(
                    supervise(
                        f"podgroup-controller-{i}",
                        functools.partial(self._worker, self.podgroup_queue, self.podgroups.reconcile),
                    )
                )
            tasks.append(
                supervise(
                    "queue-controller",
                    functools.partial(self._worker, self.queue_queue, self.queues.reconcile),
                )
            )
            tasks.append(supervise("controllers-resync", functools.partial(self._resync, stop)))
            await stop.wait()
        finally:
            if self.source is not None:
                for kind, handler in self._feeds.items():
                    self.source.unsubscribe(kind, handler)
            self.podgroup_queue.close()
            self.queue_queue.close()
            await stop_workers(tasks)

    async def _resync(self, stop: asyncio.Event) -> None:
        """Now and then look at everything again, in case a change slipped by (a failed request whose
        retry budget ran out, say)."""
        while not stop.is_set():
            await asyncio.sleep(self.resync_period * random.uniform(0.9, 1.1))
            for key in self.state.all_podgroup_keys():
                self.podgroup_queue.add(key)
            for name in self.state.all_queue_keys():
                self.queue_queue.add(name)

    async def _worker(self, queue: WorkQueue[Any], reconcile: Any) -> None:
        while True:
            key = await queue.get()
            try:
                delay = await reconcile(key)
                self._failures.pop(key, None)
                if delay is not None:
                    queue.add_after(key, delay)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.errors += 1
                attempt = self._failures.get(key, 0)
                self._failures[key] = attempt + 1
                if isinstance(exc, ApiError):
                    log.info("reconciling %s failed (%s); trying again", key, exc)
                    delay = exc.retry_after if exc.retry_after else backoff_delay(attempt, base=0.05, cap=5.0)
                else:
                    log.exception("reconciling %s crashed; trying again", key)
                    delay = backoff_delay(attempt, base=0.5, cap=30.0)
                # The retry re-derives everything from the state it finds then; nothing is replayed.
                queue.add_after(key, delay)
            finally:
                queue.done(key)
