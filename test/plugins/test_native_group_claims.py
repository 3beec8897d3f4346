"""A ``scheduling.k8s.io/v1alpha2`` PodGroup's own ResourceClaims (KEP-5729): a pod entry equal to
one of the group's ``spec.resourceClaims`` uses the group's claim, allocated once in the gang's
statement for all its pods and reserved for the PodGroup; a gang whose group claim cannot be had
binds nothing and says why."""

from __future__ import annotations

from typing import Any

import msgspec

from caldera.cache.store import ClusterCache
from caldera.framework.dra.objects import ResourceClaim
from caldera.framework.model import native_job_key, uncopied_claims_message
from caldera.framework.objects import Pod, Workload, convert, decode
from caldera.hack.scenario import (
    device_class,
    load,
    native_member,
    native_podgroup,
    node,
    pod_dict,
    resource_claim,
    resource_slice,
    run_session,
)

GPU = "gpu.example.com"
SHARED = {"name": "fabric", "resourceClaimName": "shared"}


def _snapshot(nodes: list[Any], groups: list[Any], pods: list[Any], dra: list[Any]) -> Any:
    cache = load(ClusterCache(), nodes=nodes, dra=dra)
    for g in groups:
        cache.upsert_native_podgroup(g)
    for p in pods:
        cache.upsert_pod(p)
    return cache.snapshot()


def _member(name: str, group: str, *entries: dict[str, str], cpu: str = "1", **kw: Any) -> Any:
    return native_member(name, group, cpu=cpu, spec_extra={"resourceClaims": list(entries)}, uid=name, **kw)


def test_a_group_claim_is_allocated_once_and_shared_by_the_whole_gang() -> None:
    # one GPU in the cluster, three pods needing it through the group's claim: allocated once, all
    # three share it (three claims of their own could not all be had), on the node whose GPU it is
    group = native_podgroup("train", min_count=3, uid="pg-train", resource_claims=[SHARED])
    snap = _snapshot(
        [node("n1", cpu="8"), node("n2", cpu="8")],
        [group],
        [_member(f"train-{i}", "train", SHARED) for i in range(3)],
        [device_class(GPU), resource_slice("n2", GPU, ["gpu-0"]), resource_claim("shared", GPU)],
    )
    _, result = run_session(snap)
    assert {p.task.name: p.node for p in result.placements} == {f"train-{i}": "n2" for i in range(3)}
    claims = [ca for p in result.placements for ca in p.claims or ()]
    assert [ca.key for ca in claims] == ["default/shared"] * 3
    assert {r.device for ca in claims for r in ca.allocation.devices.results} == {"gpu-0"}
    # reserved for the PodGroup, not each pod
    assert {(ca.consumer.resource, ca.consumer.name, ca.consumer.uid) for ca in claims if ca.consumer} == {
        ("podgroups", "train", "pg-train")
    }
    assert all(ca.consumer is not None for ca in claims)


def test_a_gang_whose_group_claim_reaches_too_few_nodes_binds_nothing_and_says_why() -> None:
    # the GPU is on n2, which holds two of the gang's three pods; n1 has room but cannot reach the
    # device the first pod allocated: the gang is discarded whole and gives the device back
    group = native_podgroup("train", min_count=3, uid="pg-train", resource_claims=[SHARED])
    snap = _snapshot(
        [node("n1", cpu="8"), node("n2", cpu="2")],
        [group],
        [_member(f"train-{i}", "train", SHARED) for i in range(3)],
        [device_class(GPU), resource_slice("n2", GPU, ["gpu-0"]), resource_claim("shared", GPU)],
    )
    ssn, result = run_session(snap)
    assert result.placements == []
    job = ssn.jobs[native_job_key("default", "train")]
    reasons = " ".join([job.job_fit_error, *job.fit_errors.values()])
    assert "could not reach the devices allocated to ResourceClaim default/shared" in reasons
    assert ssn.task_claims == {}


def test_a_group_claim_no_device_satisfies_keeps_the_gang_pending_with_the_reason() -> None:
    group = native_podgroup("train", min_count=2, uid="pg-train", resource_claims=[SHARED])
    snap = _snapshot(
        [node("n1", cpu="8")],
        [group],
        [_member(f"train-{i}", "train", SHARED) for i in range(2)],
        [device_class(GPU), resource_slice("n1", GPU, ["gpu-0"]), resource_claim("shared", GPU, count=2)],
    )
    ssn, result = run_session(snap)
    assert result.placements == []
    job = ssn.jobs[native_job_key("default", "train")]
    assert "no free device of class gpu.example.com for claim default/shared" in job.job_fit_error


def test_a_pod_entry_that_differs_from_the_groups_is_the_pods_own() -> None:
    # same claim, another entry name: KEP-5729 reserves it for the pod, not the group
    group = native_podgroup("train", min_count=1, uid="pg-train", resource_claims=[SHARED])
    snap = _snapshot(
        [node("n1", cpu="8")],
        [group],
        [_member("train-0", "train", {"name": "mine", "resourceClaimName": "shared"})],
        [device_class(GPU), resource_slice("n1", GPU, ["gpu-0"]), resource_claim("shared", GPU)],
    )
    _, result = run_session(snap)
    (placement,) = result.placements
    (ca,) = placement.claims
    assert ca.consumer is None


TEMPLATED = {"name": "fabric", "resourceClaimTemplateName": "fabric-template"}
GENERATED = "train-fabric-x7k2p"


def _templated_world(owner_kind: str, owner_uid: str) -> Any:
    """A gang of two whose group claim is made from a template: the claim the resourceclaim
    controller generated (owned by ``owner_kind``/``owner_uid``), named in the pods' status."""
    group = native_podgroup("train", min_count=2, uid="pg-train", resource_claims=[TEMPLATED])
    generated = msgspec.json.encode(resource_claim(GENERATED, GPU))
    raw = msgspec.json.decode(generated)
    raw["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": owner_kind, "name": "train", "uid": owner_uid, "controller": True}
    ]
    pods = []
    for i in range(2):
        manifest = pod_dict(f"train-{i}", uid=f"train-{i}", spec_extra={"resourceClaims": [TEMPLATED]})
        manifest["spec"]["schedulingGroup"] = {"podGroupName": "train"}
        manifest["status"]["resourceClaimStatuses"] = [{"name": "fabric", "resourceClaimName": GENERATED}]
        pods.append(convert(Pod, manifest))
    return _snapshot(
        [node("n1", cpu="8")],
        [group],
        pods,
        [device_class(GPU), resource_slice("n1", GPU, ["gpu-0"]), convert(ResourceClaim, raw)],
    )


def test_a_claim_made_from_a_template_for_the_group_is_shared() -> None:
    _, result = run_session(_templated_world("PodGroup", "pg-train"))
    assert len(result.placements) == 2
    keys = {(ca.key, ca.consumer.name if ca.consumer else None) for p in result.placements for ca in p.claims}
    assert keys == {(f"default/{GENERATED}", "train")}


def test_a_template_claim_the_group_does_not_own_is_refused() -> None:
    ssn, result = run_session(_templated_world("Pod", "someone-else"))
    assert result.placements == []
    job = ssn.jobs[native_job_key("default", "train")]
    reasons = " ".join([job.job_fit_error, *job.fit_errors.values()])
    assert "was not created for PodGroup default/train" in reasons


def _workload_with_claims(*claims: dict[str, str]) -> Workload:
    """The Workload ``job`` whose template ``workers`` (a gang of 2) lists ``claims``."""
    manifest = {
        "metadata": {"name": "job", "namespace": "default"},
        "spec": {
            "podGroupTemplates": [
                {
                    "name": "workers",
                    "schedulingPolicy": {"gang": {"minCount": 2}},
                    "resourceClaims": list(claims),
                }
            ]
        },
    }
    return decode(Workload, msgspec.json.encode(manifest))


def _from_template(group: Any) -> tuple[Any, Any]:
    """A session over two pods of ``group`` using claim ``shared`` as the entry ``fabric``, the
    Workload ``job`` listing that entry in its template."""
    cache = load(
        ClusterCache(),
        nodes=[node("n1", cpu="8")],
        dra=[device_class(GPU), resource_slice("n1", GPU, ["gpu-0", "gpu-1"]), resource_claim("shared", GPU)],
    )
    cache.upsert_workload(_workload_with_claims(SHARED))
    cache.upsert_native_podgroup(group)
    for i in range(2):
        cache.upsert_pod(_member(f"train-{i}", "train", SHARED))
    return run_session(cache.snapshot())


def test_a_podgroup_carrying_its_templates_claims_shares_them() -> None:
    # the controller copied the template's claims into the PodGroup (KEP-5729, KEP-5832 copy/inline)
    group = native_podgroup("train", template=("job", "workers"), uid="pg-train", resource_claims=[SHARED])
    ssn, result = _from_template(group)
    consumers = {
        ca.consumer.name if ca.consumer else None for p in result.placements for ca in p.claims or ()
    }
    assert consumers == {"train"}
    assert ssn.jobs[native_job_key("default", "train")].uncopied_claims == ()


def test_a_templates_claim_the_podgroup_does_not_carry_is_not_the_groups_and_is_reported() -> None:
    # the PodGroup names the template but carries none of its claims: its spec is what counts, so
    # each pod reserves the claim for itself (as kube-scheduler would), and the job says what is missing
    group = native_podgroup("train", template=("job", "workers"), uid="pg-train")
    ssn, result = _from_template(group)
    job = ssn.jobs[native_job_key("default", "train")]
    assert job.min_available == 2, "the template's policy still fills what the PodGroup leaves out"
    assert len(result.placements) == 2
    assert all(ca.consumer is None for p in result.placements for ca in p.claims or ())
    assert job.uncopied_claims == ("fabric",)
    assert "does not carry the resourceClaims fabric of its template workers (Workload job)" in (
        uncopied_claims_message(group, job.uncopied_claims)
    )
