"""What one scheduling cycle leaves for the next: the one mechanism of cross-cycle reuse.

A cycle's work mostly repeats the last one's: the same jobs wait, the same queues hold the same
sums. Whatever is kept from one cycle for the next goes through here, under two rules:

1. **Keyed by generation.** The cache stamps every job with a *generation* (``JobInfo.generation``)
   that moves whenever anything a decision may read of the job changes (its PodGroup, tasks, task
   statuses, priority), and the snapshot with the generation of the node specs
   (``Snapshot.node_specs``) and of everything else a job's try reads (``Snapshot.world``). A kept
   value names the generation it was computed from; it is used again only where the generation is
   the same (``job_generation``: an unchanged copy of the same job; never a copy a session has
   changed since, never a job deleted and created again under its name, which gets a new one).
2. **Offered only from a cycle that finished and was applied.** A session reads what the last
   cycle kept (``Session.carried``) and leaves its own (``Session.keep``), which the binary's loop
   takes (``CarryBook.commit``) only once it has applied that cycle's result to the cache. A failed
   cycle's values are dropped, and so is everything kept before it (``CarryBook.drop``): a user may
   then have changed a carried value in place half-way, so the next session starts afresh.

A value once kept belongs to the next session, which may change it in place (the sums are
corrected that way). Keys are objects of the user's own (its class), registered with
``carry_user`` so that the shared twin harness (``test/twins.py``) can check that every user gives
the same decisions with and without reuse; a key not registered is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from caldera.framework.model import JobInfo

V = TypeVar("V")

#: every key a value may be kept under, and what it holds (the twin harness walks these)
USERS: dict[object, str] = {}

JobGeneration = tuple[int, str]


def carry_user(key: object, what: str) -> None:
    """Register ``key`` (an object of the user's own) as a key of kept values."""
    USERS[key] = what


def job_generation(job: JobInfo) -> JobGeneration | None:
    """What a value computed from this job copy is valid for: the cache's generation of the job and
    the phase (a session may set the phase on a copy in place: the enqueue action's Inqueue). None
    for a copy that is no unchanged copy of a cached job (built by hand, or changed by its session),
    whose values are never kept."""
    generation = job.generation
    if not generation or job.version:
        return None
    return (generation, job.phase)


class CarryBook:
    """Owned by the binary's loop: what the last applied cycle kept, offered to the next session."""

    __slots__ = ("_committed", "enabled")

    def __init__(self, enabled: bool = True) -> None:
        self._committed: dict[object, Any] = {}
        #: False: nothing is ever offered (every cycle takes the full path; the twin harness)
        self.enabled = enabled

    def offer(self) -> Mapping[object, Any]:
        """What the next session may read (read-only: a session keeps its own through ``keep``)."""
        return MappingProxyType(self._committed)

    def commit(self, kept: dict[object, Any]) -> None:
        """The values a session kept, once its cycle's result has been applied."""
        self._committed = kept if self.enabled else {}

    def drop(self) -> None:
        """After a failed cycle: nothing is offered to the next one."""
        self._committed = {}

    def keys(self) -> list[object]:
        return list(self._committed)


class Kept:
    """A session's side of the mechanism: what it was offered and what it keeps."""

    __slots__ = ("kept", "offered")

    def __init__(self, offered: Mapping[object, Any] | None) -> None:
        self.offered: Mapping[object, Any] = offered if offered is not None else {}
        self.kept: dict[object, Any] = {}

    def carried(self, key: object) -> Any:
        """What the last applied cycle kept under ``key`` (None: nothing)."""
        return self.offered.get(key)

    def keep(self, key: object, value: Any) -> None:
        """Leave ``value`` for the next cycle under ``key`` (a registered key)."""
        if key not in USERS:
            raise KeyError(f"{key!r} is not a registered carry user (framework.carry.carry_user)")
        self.kept[key] = value


class JobCarry(Generic[V]):
    """Per-job values by generation: last cycle's value of a job whose copy has the same generation
    (``get``), and this cycle's values for the next (``put``). Values of jobs not asked for this
    cycle are not kept."""

    __slots__ = ("current", "previous")

    def __init__(self, kept: Kept, key: object) -> None:
        carried = kept.carried(key)
        self.previous: dict[str, tuple[JobGeneration, V]] = carried if isinstance(carried, dict) else {}
        self.current: dict[str, tuple[JobGeneration, V]] = {}
        kept.keep(key, self.current)

    def get(self, job: JobInfo, generation: JobGeneration | None) -> tuple[bool, V | None]:
        """(True, value) when last cycle kept a value for this generation of the job; the value is
        kept for the next cycle too."""
        if generation is None:
            return False, None
        old = self.previous.get(job.uid)
        if old is None or old[0] != generation:
            return False, None
        self.current[job.uid] = old
        return True, old[1]

    def put(self, job: JobInfo, generation: JobGeneration | None, value: V) -> None:
        if generation is not None:
            self.current[job.uid] = (generation, value)
