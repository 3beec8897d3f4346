"""What the status updater writes on a ``scheduling.k8s.io/v1alpha2`` PodGroup besides
``PodGroupScheduled``: the ``DisruptionTarget`` condition once the evictor has carried out an
eviction of one of its pods (never for a decision the API server then refused), set back to False
once the evicted pods are gone; and a Warning Event when the PodGroup lacks claims its Workload
template lists."""

from __future__ import annotations

from typing import Any

from caldera.cache.store import ClusterCache
from caldera.framework.model import native_job_key
from caldera.framework.objects import NativePodGroup, Workload, convert, decode
from caldera.framework.result import Eviction, SessionResult
from caldera.hack.scenario import load, native_member, native_podgroup_dict, node
from caldera.scheduler.evictor import Evictor
from caldera.scheduler.status import StatusUpdater

KEY = native_job_key("default", "batch")


def _batch(cache: ClusterCache, conditions: list[dict[str, Any]] | None = None) -> None:
    """The native gang ``batch`` (minCount 2) as the watch shows it, with these conditions."""
    manifest = native_podgroup_dict("batch", min_count=2, uid="pg-batch")
    manifest["status"] = {"conditions": conditions or []}
    cache.upsert_native_podgroup(convert(NativePodGroup, manifest))


def _running_batch() -> ClusterCache:
    cache = load(ClusterCache(), nodes=[node("n1", cpu="8")])
    _batch(cache)
    for i in range(3):
        cache.upsert_pod(
            native_member(f"batch-{i}", "batch", uid=f"batch-{i}", node_name="n1", phase="Running")
        )
    return cache


def _cycle(cache: ClusterCache, evictions: list[Eviction] = ()) -> SessionResult:  # type: ignore[assignment]
    return SessionResult(jobs=cache.snapshot().jobs, evictions=list(evictions))


def _targets(rec: Any) -> list[dict[str, Any]]:
    """Every DisruptionTarget condition written, in order."""
    return [
        c
        for body in rec.of("PATCH", "/podgroups/batch/status")
        for c in body["status"]["conditions"]
        if c["type"] == "DisruptionTarget"
    ]


def _preempt(cache: ClusterCache, name: str) -> Eviction:
    task = cache.task(name)
    assert task is not None
    return Eviction(task, "preempt")


async def test_a_cycles_decision_to_evict_marks_nothing_until_the_eviction_is_done(recorder) -> None:
    rec, client = recorder
    cache = _running_batch()
    status = StatusUpdater(client, cache)
    status.observe(_cycle(cache, [_preempt(cache, "batch-0")]))
    await status.flush()
    assert _targets(rec) == [], "a decision is not an eviction: the API server may still refuse it"
    status.evicted(_preempt(cache, "batch-0"))
    await status.flush()
    (cond,) = _targets(rec)
    assert (cond["status"], cond["reason"]) == ("True", "PreemptionByScheduler")
    assert "1 pod(s) by preempt" in cond["message"]


async def test_an_eviction_a_disruption_budget_refuses_never_marks_the_group(recorder) -> None:
    rec, client = recorder
    cache = _running_batch()
    status = StatusUpdater(client, cache)
    evictor = Evictor(client, budget_wait=0.2, on_evicted=status.evicted)
    rec.codes = {"/pods/batch-0/eviction": 429}
    evictor.start()
    evictor.evict([_preempt(cache, "batch-0")])
    await evictor.drain(5)
    await status.flush()
    assert evictor.done["batch-0"].startswith("blocked")
    assert _targets(rec) == []

    rec.codes = {}
    evictor.start()
    evictor.evict([_preempt(cache, "batch-1")])
    await evictor.drain(5)
    await status.flush()
    assert evictor.done["batch-1"] == "evicted"
    assert [c["status"] for c in _targets(rec)] == ["True"]


def _show_written(cache: ClusterCache, rec: Any) -> None:
    """The watch brings the PodGroup back with the conditions last written."""
    _batch(cache, rec.of("PATCH", "/podgroups/batch/status")[-1]["status"]["conditions"])


async def test_the_condition_goes_false_once_the_evicted_pods_are_gone(recorder) -> None:
    rec, client = recorder
    cache = _running_batch()
    status = StatusUpdater(client, cache)
    for name in ("batch-0", "batch-1"):
        status.evicted(_preempt(cache, name))
    await status.flush()
    written = _targets(rec)[-1]
    assert written["status"] == "True" and "2 pod(s) by preempt" in written["message"]
    _show_written(cache, rec)

    # one evicted pod is still terminating: the group is still being disrupted
    cache.delete_pod(cache.task("batch-0").pod)  # type: ignore[union-attr]
    status.observe(_cycle(cache))
    await status.flush()
    assert [c["status"] for c in _targets(rec)] == ["True"] * len(_targets(rec))
    _show_written(cache, rec)

    cache.delete_pod(cache.task("batch-1").pod)  # type: ignore[union-attr]
    status.observe(_cycle(cache))
    await status.flush()
    cleared = _targets(rec)[-1]
    assert (cleared["status"], cleared["reason"]) == ("False", "PreemptionByScheduler")
    assert "the evicted pods are gone" in cleared["message"]
    assert cleared["lastTransitionTime"]

    # shown False by the watch: nothing more to write, however many cycles run
    _show_written(cache, rec)
    writes = len(rec.requests)
    for _ in range(3):
        status.observe(_cycle(cache))
    await status.flush()
    assert len(rec.requests) == writes

    # a later eviction marks it True again
    status.evicted(_preempt(cache, "batch-2"))
    await status.flush()
    again = _targets(rec)[-1]
    assert again["status"] == "True" and "1 pod(s) by preempt" in again["message"]


async def test_a_podgroup_lacking_its_templates_claims_gets_a_warning_event(recorder) -> None:
    rec, client = recorder
    cache = load(ClusterCache(), nodes=[node("n1")])
    cache.upsert_workload(
        decode(
            Workload,
            b"""{"metadata": {"name": "job", "namespace": "default"}, "spec": {"podGroupTemplates": [
                {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 1}},
                 "resourceClaims": [{"name": "fabric", "resourceClaimName": "shared"}]}]}}""",
        )
    )
    manifest = native_podgroup_dict("train", template=("job", "workers"), uid="pg-train")
    cache.upsert_native_podgroup(convert(NativePodGroup, manifest))
    cache.upsert_pod(native_member("train-0", "train", uid="train-0"))
    status = StatusUpdater(client, cache)
    status.observe(SessionResult(jobs=cache.snapshot().jobs))
    await status.flush()
    (event,) = [e for e in rec.of("POST", "/events") if e["reason"] == "ResourceClaimsNotCopied"]
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == "train"
    assert "does not carry the resourceClaims fabric" in event["message"]


async def test_a_group_whose_pods_all_went_is_no_longer_a_disruption_target(recorder) -> None:
    # disruptionMode PodGroup: every pod evicted, none left in the job
    rec, client = recorder
    cache = _running_batch()
    status = StatusUpdater(client, cache)
    for i in range(3):
        status.evicted(_preempt(cache, f"batch-{i}"))
    await status.flush()
    _show_written(cache, rec)
    for i in range(3):
        cache.delete_pod(cache.task(f"batch-{i}").pod)  # type: ignore[union-attr]
    status.observe(_cycle(cache))
    await status.flush()
    cleared = _targets(rec)[-1]
    assert cleared["status"] == "False" and "3 pod(s) by preempt" in cleared["message"]
