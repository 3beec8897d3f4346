"""Leader election over a coordination.k8s.io/v1 Lease, in client-go's manner.

A candidate takes the lease when it does not exist, is released, or has not been renewed for a lease
duration *as observed by this process's own monotonic clock* (so clock skew between replicas does not
matter). The leader renews every retry period; if it cannot renew within the renew deadline, or finds
another holder, it has lost and says so at once. On a clean shutdown it releases the lease so a
standby takes over immediately.

The renew deadline counts from when the last successful renewal was *sent* (the server wrote its
renewTime after that, and others count their lease duration from when they saw it), and it is kept
on the elector, not in the renewing worker: a worker that crashes and is restarted does not start
the deadline again. :meth:`LeaderElector.holds` is what the cycles and the binder ask before each
cycle and each bind, the evictor before each eviction, the status updater before each status write
or Event, and the PodGroup and Queue controllers before each write: it turns false at the deadline by the clock alone, even while a renewal hangs
on an API that stopped answering, so this replica stops writing before the lease (renew deadline
< lease duration) could pass to another.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from caldera.cache.client import ApiClient, ApiError
from caldera.metrics import scheduler as m

log = logging.getLogger("caldera.leader")

#: the reason of the error a writer answers itself with when :meth:`LeaderElector.holds` says no
NOT_LEADER = "NotLeader"


def always() -> bool:
    """The write gate of a replica without leader election: it may always write."""
    return True


def not_leader() -> ApiError:
    """The error a write is answered with, without being sent, when the lease may no longer be held
    (code 0: no server answered it)."""
    return ApiError(0, NOT_LEADER, "not written: the leader lease may no longer be held")


class LeaseSpec(msgspec.Struct, rename="camel", omit_defaults=True, frozen=True):
    holder_identity: str | None = None
    lease_duration_seconds: int | None = None
    acquire_time: str | None = None
    renew_time: str | None = None
    lease_transitions: int | None = None


class LeaseMeta(msgspec.Struct, rename="camel", omit_defaults=True, frozen=True):
    name: str = ""
    namespace: str = ""
    resource_version: str = ""


class Lease(msgspec.Struct, rename="camel", omit_defaults=True, frozen=True):
    metadata: LeaseMeta = LeaseMeta()
    spec: LeaseSpec = LeaseSpec()
    api_version: str = "coordination.k8s.io/v1"
    kind: str = "Lease"


def micro_time() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int((t % 1) * 1e6):06d}Z"


def default_identity() -> str:
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


@dataclass
class ElectionConfig:
    namespace: str
    name: str = "caldera"
    identity: str = ""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


class LeaderElector:
    def __init__(
        self, client: ApiClient, config: ElectionConfig, clock: Callable[[], float] = time.monotonic
    ):
        self.client = client
        self.config = config
        self.identity = config.identity or default_identity()
        self.clock = clock
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{config.namespace}/leases/{config.name}"
        self.is_leader = False
        self.elected = asyncio.Event()
        self.lost = asyncio.Event()
        self._observed: tuple[str | None, str | None] | None = None
        self._observed_at = 0.0
        self._lease: Lease | None = None
        #: clock time at which the last successful acquire or renewal was sent (None: never)
        self.renewed_at: float | None = None

    def holds(self) -> bool:
        """Leader, and the renew deadline since the last successful renewal not passed: whether this
        replica may still schedule and bind."""
        return (
            self.is_leader
            and not self.lost.is_set()
            and self.renewed_at is not None
            and self.clock() - self.renewed_at < self.config.renew_deadline
        )

    async def _get(self) -> Lease | None:
        try:
            raw = await self.client.request("GET", self.path, timeout=self.config.retry_period * 2)
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise
        return msgspec.json.decode(raw, type=Lease)

    async def try_acquire_or_renew(self) -> bool:
        sent = self.clock()
        if await self._try_acquire_or_renew():
            self.renewed_at = sent
            return True
        return False

    async def _try_acquire_or_renew(self) -> bool:
        cfg = self.config
        now_str = micro_time()
        lease = await self._get()
        duration = max(1, round(cfg.lease_duration))
        if lease is None:
            body = Lease(
                metadata=LeaseMeta(name=cfg.name, namespace=cfg.namespace),
                spec=LeaseSpec(self.identity, duration, now_str, now_str, 0),
            )
            try:
                raw = await self.client.request(
                    "POST", f"/apis/coordination.k8s.io/v1/namespaces/{cfg.namespace}/leases", body=body
                )
            except ApiError as exc:
                if exc.code == 409:
                    return False
                raise
            self._lease = msgspec.json.decode(raw, type=Lease)
            self._observe(self._lease)
            return True
        self._observe(lease)
        holder = lease.spec.holder_identity or ""
        held_by_other = holder and holder != self.identity
        if held_by_other:
            observed_duration = lease.spec.lease_duration_seconds or duration
            if self.clock() < self._observed_at + observed_duration:
                return False
        spec = LeaseSpec(
            holder_identity=self.identity,
            lease_duration_seconds=duration,
            acquire_time=lease.spec.acquire_time if holder == self.identity else now_str,
            renew_time=now_str,
            lease_transitions=(lease.spec.lease_transitions or 0) + (0 if holder == self.identity else 1),
        )
        updated = Lease(metadata=lease.metadata, spec=spec)
        try:
            raw = await self.client.request("PUT", self.path, body=updated)
        except ApiError as exc:
            if exc.code == 409:
                return False
            raise
        self._lease = msgspec.json.decode(raw, type=Lease)
        self._observe(self._lease)
        return True

    def _observe(self, lease: Lease) -> None:
        record = (lease.spec.holder_identity, lease.spec.renew_time)
        if record != self._observed:
            self._observed = record
            self._observed_at = self.clock()

    def _jitter(self, period: float) -> float:
        return period * (1 + random.uniform(0, 0.2))

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Wait until elected (True) or ``stop`` is set (False)."""
        log.info(
            "waiting for the leader lease %s/%s as %s", self.config.namespace, self.config.name, self.identity
        )
        while not stop.is_set():
            try:
                if await self.try_acquire_or_renew():
                    self.is_leader = True
                    self.elected.set()
                    m.LEADER.set(1)
                    log.info("became the leader (%s)", self.identity)
                    return True
            except ApiError as exc:
                log.warning("leader election: %s", exc)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                log.warning("leader election: undecodable lease: %s", exc)
            try:
                async with asyncio.timeout(self._jitter(self.config.retry_period)):
                    await stop.wait()
            except TimeoutError:
                pass
        return False

    async def hold(self, stop: asyncio.Event) -> None:
        """Renew until ``stop`` is set (then release) or the lease is lost (then set ``lost``). Run
        again after a crash, it goes on from the last renewal (``renewed_at``), not from now."""
        if self.lost.is_set():
            return
        if self.renewed_at is None or self.clock() - self.renewed_at >= self.config.renew_deadline:
            self._lose(f"could not renew within {self.config.renew_deadline}s")
            return
        while not stop.is_set():
            try:
                async with asyncio.timeout(self.config.retry_period):
                    await stop.wait()
                break
            except TimeoutError:
                pass
            last_renew = self.renewed_at if self.renewed_at is not None else -float("inf")
            try:
                remaining = self.config.renew_deadline - (self.clock() - last_renew)
                async with asyncio.timeout(max(0.1, remaining)):
                    ok = await self.try_acquire_or_renew()
            except (ApiError, TimeoutError, msgspec.DecodeError, msgspec.ValidationError) as exc:
                log.warning("renewing the leader lease failed: %s", exc)
                ok = False
            if ok:
                continue
            if self._observed and self._observed[0] not in (None, "", self.identity):
                self._lose(f"the lease is now held by {self._observed[0]}")
                return
            if not self.holds():
                self._lose(f"could not renew within {self.config.renew_deadline}s")
                return
        await self.release()

    def _lose(self, why: str) -> None:
        self.is_leader = False
        m.LEADER.set(0)
        log.error("lost the leader lease: %s; scheduling stops now", why)
        self.lost.set()

    async def release(self) -> None:
        if not self.is_leader or self._lease is None:
            return
        self.is_leader = False
        m.LEADER.set(0)
        lease = self._lease
        spec = LeaseSpec(
            holder_identity="",
            lease_duration_seconds=1,
            acquire_time=lease.spec.acquire_time,
            renew_time=micro_time(),
            lease_transitions=lease.spec.lease_transitions,
        )
        try:
            await self.client.request(
                "PUT", self.path, body=Lease(metadata=lease.metadata, spec=spec), timeout=2.0
            )
            log.info("released the leader lease")
        except ApiError as exc:
            log.warning("could not release the leader lease: %s", exc)
