"""Copy-on-write snapshots keep sessions apart: the next session, running in the worker thread while
/debug reads the last one's result on the event loop, never writes an object that result holds."""

import threading

from caldera.cache.store import ClusterCache
from caldera.config.conf import DEFAULT_CONF, parse_conf
from caldera.framework.model import TaskStatus
from caldera.hack.scenario import gang, load, node, pod
from caldera.scheduler.debug import DebugApi, Observatory
from caldera.scheduler.loop import RecordingBinder, SchedulerLoop
from caldera.scheduler.registry import builtin_registry


def _loop(cache: ClusterCache) -> tuple[SchedulerLoop, RecordingBinder, DebugApi]:
    registry = builtin_registry()
    conf = parse_conf(DEFAULT_CONF, registry)
    binder = RecordingBinder()
    obs = Observatory()
    loop = SchedulerLoop(cache, lambda: conf, registry, binder, on_cycle=obs.on_cycle)
    return loop, binder, DebugApi(obs)


def _documents(api: DebugApi) -> tuple[object, ...]:
    jobs = api.jobs(state="all")
    for doc in jobs["jobs"]:
        doc.pop("age_seconds")  # wall-clock dependent
    return jobs, api.nodes(), api.queues(), api.job("default", "second")


def _session_objects(result) -> set[int]:
    out: set[int] = set()
    for job in result.jobs.values():
        out |= {id(job), id(job.by_status), id(job.allocated)} | {id(t) for t in job.tasks.values()}
    for n in result.report.node_list:
        out |= {id(n), id(n.idle), id(n.used)}
    return out


def test_the_next_session_never_changes_what_a_debug_reader_of_the_last_one_sees():
    # Two nodes of 4 cpu. "first" (2 x 2 cpu) fits; "second" (2 x 2 cpu) does not while a pod of
    # another scheduler fills n2.
    first_pg, first_pods = gang("first", 2, cpu="2")
    second_pg, second_pods = gang("second", 2, cpu="2")
    filler = pod("filler", cpu="4", scheduler="default-scheduler", node_name="n2", phase="Running")
    cache = load(
        ClusterCache(),
        nodes=[node("n1", cpu="4"), node("n2", cpu="4")],
        pods=[*first_pods, *second_pods, filler],
        podgroups=[first_pg, second_pg],
    )
    loop, binder, api = _loop(cache)
    published = loop.run_once()
    assert published is not None
    assert sorted(p.task.name for p in binder.placements) == ["first-0", "first-1"]
    before = _documents(api)
    second_before = before[0]["jobs"]
    assert {d["name"]: d["tasks"]["pending"] for d in second_before} == {"first": 0, "second": 2}

    # The filler leaves: the next session places "second", in a worker thread as in production,
    # while the published result stays what /debug reads.
    cache.delete_pod(filler)
    decided: list[object] = []
    worker = threading.Thread(target=lambda: decided.append(loop.decide()))
    worker.start()
    worker.join()
    result, error = decided[0]  # type: ignore[misc]
    assert error is None and result is not None
    assert sorted(p.task.name for p in result.placements) == ["second-0", "second-1"]
    assert all(p.task.status == TaskStatus.ALLOCATED for p in result.placements)
    # the reader of the last cycle sees exactly what it saw, and shares no object with the new session
    assert _documents(api) == before
    assert not _session_objects(published) & _session_objects(result)

    loop.hand_over(result, None, 0.0)
    after = api.jobs(state="all")["jobs"]
    assert {d["name"]: d["tasks"]["bound"] for d in after} == {"first": 2, "second": 2}


def test_a_discarded_or_failed_session_leaves_nothing_behind_for_later_sessions():
    # "big" never fits (3 x 3 cpu on two 4-cpu nodes): every session tries, allocates some tasks
    # in a statement, and discards them. Sessions later on start from the same clean state.
    big_pg, big_pods = gang("big", 3, cpu="3")
    cache = load(
        ClusterCache(), nodes=[node("n1", cpu="4"), node("n2", cpu="4")], pods=big_pods, podgroups=[big_pg]
    )
    loop, binder, _ = _loop(cache)
    for _ in range(4):
        result = loop.run_once()
        assert result is not None
        job = result.jobs["default/big"]
        assert job.count(TaskStatus.PENDING) == 3
        assert job.fit_errors or job.job_fit_error
        assert [n.idle.cpu for n in result.report.node_list] == [4000, 4000]
    assert binder.placements == []
    snap = cache.snapshot()
    assert snap.jobs["default/big"].fit_errors == {} and snap.jobs["default/big"].job_fit_error == ""
    assert [n.idle.cpu for n in snap.node_list] == [4000, 4000]
