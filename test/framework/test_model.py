import pytest

from caldera.framework.model import JobInfo, TaskInfo, TaskStatus, task_status_of
from caldera.framework.objects import Node, ObjectError, Pod, PodGroup, Queue, convert, decode
from caldera.framework.resource import ResourceError
from caldera.hack.scenario import pod, pod_dict, podgroup


def test_decode_ignores_unknown_fields_and_reads_what_we_use():
    raw = b"""{"metadata": {"name": "p", "namespace": "ns", "uid": "u1", "managedFields": [1, 2]},
              "spec": {"schedulerName": "caldera", "containers": [{"name": "c", "image": "x",
                       "resources": {"requests": {"cpu": "250m"}, "limits": {"nvidia.com/gpu": 1}}}]},
              "status": {"phase": "Pending", "podIP": "10.0.0.1"}}"""
    p = decode(Pod, raw)
    assert p.metadata.uid == "u1"
    task = TaskInfo.from_pod(p)
    assert task.resreq.cpu == 250
    assert task.resreq.scalars == {"nvidia.com/gpu": 1000}  # a limit-only extended resource counts
    assert task.resreq.pods == 1


@pytest.mark.parametrize(
    ("kind", "raw"),
    [
        (Pod, b'{"metadata": {"name": "p"}, "spec": {"containers": "none"}}'),
        (Node, b'{"metadata": {"name": "n"}, "spec": {"taints": [{"key": 5}]}}'),
        (PodGroup, b'{"metadata": {"name": "g"}, "spec": {"minMember": "three"}}'),
        (Queue, b'{"metadata": {"name": "q"}, "spec": {"weight": []}}'),
        (Pod, b"not json"),
    ],
)
def test_malformed_objects_raise_object_error_naming_them(kind, raw):
    with pytest.raises(ObjectError) as info:
        decode(kind, raw)
    assert kind.__name__ in str(info.value)


def test_convert_names_the_object():
    with pytest.raises(ObjectError) as info:
        convert(Pod, {"metadata": {"name": "broken", "namespace": "ns"}, "spec": {"priority": "high"}})
    assert "ns/broken" in str(info.value)


def test_requests_default_to_limits_and_init_containers_take_the_max():
    d = pod_dict("p", cpu=None, memory=None, limits={"cpu": "2", "memory": "1Gi"})
    d["spec"]["containers"][0]["resources"].pop("requests")
    d["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "3"}}}]
    task = TaskInfo.from_pod(convert(Pod, d))
    assert task.resreq.cpu == 2000
    assert task.resreq.memory == 2**30
    assert task.init_resreq.cpu == 3000


def test_bad_request_quantity_is_a_resource_error():
    with pytest.raises(ResourceError):
        TaskInfo.from_pod(pod("p", cpu="one"))


def test_best_effort_pod():
    assert TaskInfo.from_pod(pod("p", cpu=None, memory=None)).best_effort


@pytest.mark.parametrize(
    ("phase", "node", "deleting", "status"),
    [
        ("Pending", "", False, TaskStatus.PENDING),
        ("Pending", "n1", False, TaskStatus.BOUND),
        ("Pending", "n1", True, TaskStatus.RELEASING),
        ("Running", "n1", False, TaskStatus.RUNNING),
        ("Running", "n1", True, TaskStatus.RELEASING),
        ("Succeeded", "n1", False, TaskStatus.SUCCEEDED),
        ("Failed", "n1", False, TaskStatus.FAILED),
        ("Unknown", "n1", False, TaskStatus.UNKNOWN),
    ],
)
def test_task_status_from_pod(phase, node, deleting, status):
    d = pod_dict("p", node_name=node, phase=phase)
    if deleting:
        d["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert task_status_of(convert(Pod, d)) == status


def test_gang_arithmetic_with_roles():
    job = JobInfo.from_podgroup(podgroup("j", min_member=3, min_task_member={"ps": 1, "worker": 2}))
    tasks = [TaskInfo.from_pod(pod(f"w{i}", role="worker"), job="default/j") for i in range(3)]
    ps = TaskInfo.from_pod(pod("ps", role="ps"), job="default/j")
    for t in [*tasks, ps]:
        job.add_task(t)
    assert job.valid_task_num() == 4 and job.check_task_min_available()
    for t in tasks:
        job.update_task_status(t, TaskStatus.ALLOCATED)
    assert job.ready_task_num() == 3
    assert not job.is_ready()  # three workers, but the ps role has none
    job.update_task_status(ps, TaskStatus.PIPELINED)
    assert job.is_pipelined() and not job.is_ready()
    job.update_task_status(ps, TaskStatus.RUNNING)
    assert job.is_ready()
    assert job.allocated.cpu == 4000
    job.remove_task(ps)
    assert job.allocated.cpu == 3000
    assert not job.check_task_min_available()


def test_a_pod_whose_claims_are_named_in_its_status_keeps_its_requests_and_gets_its_own_template() -> None:
    """The resourceclaim controller names a template's claim in the pod's status: the requests of the
    earlier version are reused, the template is the new pod's (the DRA predicate reads the claim)."""
    import msgspec

    from caldera.framework.model import pod_requests, template_key
    from caldera.hack.scenario import claim_pod_spec

    before = pod("p", group="g", spec_extra=claim_pod_spec(template="one-gpu"))
    raw = msgspec.to_builtins(before)
    raw["status"]["resourceClaimStatuses"] = [{"name": "tmpl", "resourceClaimName": "p-tmpl-abcde"}]
    after = decode(Pod, msgspec.json.encode(raw))
    earlier = TaskInfo.from_pod(before, job="default/g")
    task = TaskInfo.from_pod(after, job="default/g", previous=earlier)
    assert task.resreq is earlier.resreq and task.init_resreq is earlier.init_resreq
    assert task.template == template_key(after, pod_requests(after)[1]) != earlier.template
