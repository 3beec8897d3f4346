"""Volume predicates as kube-scheduler's VolumeBinding, VolumeZone and NodeVolumeLimits decide."""

import msgspec

from caldera.framework.objects import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from caldera.hack.scenario import InProcessCluster, node, pod, podgroup

ZONE = "topology.kubernetes.io/zone"


def pvc(name, cls="standard", volume="", ns="default"):
    return msgspec.convert(
        {
            "metadata": {"name": name, "namespace": ns},
            "spec": {"storageClassName": cls, "volumeName": volume},
            "status": {"phase": "Bound" if volume else "Pending"},
        },
        PersistentVolumeClaim,
    )


def pv(name, zone=None, hostname=None, driver=None, labels=None):
    spec = {"storageClassName": "standard"}
    if hostname:
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [hostname]}
                        ]
                    }
                ]
            }
        }
    if driver:
        spec["csi"] = {"driver": driver, "volumeHandle": name}
    meta = {"name": name, "labels": dict(labels or {})}
    if zone:
        meta["labels"][ZONE] = zone
    return msgspec.convert({"metadata": meta, "spec": spec, "status": {"phase": "Bound"}}, PersistentVolume)


def storage_class(name, mode="WaitForFirstConsumer", provisioner="csi.example.com", zones=None):
    body = {"metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode}
    if zones:
        body["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": zones}]}]
    return msgspec.convert(body, StorageClass)


def with_claims(name, *claims, **kw):
    volumes = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    return pod(name, group="g", spec_extra={"volumes": volumes}, **kw)


def nodes():
    return [
        node(f"{z}{i}", labels={ZONE: z, "kubernetes.io/hostname": f"{z}{i}"}, cpu="8")
        for z in ("a", "b")
        for i in (1, 2)
    ]


def run(pods, **storage):
    sim = InProcessCluster(nodes=nodes(), pods=pods, podgroups=[podgroup("g")])
    for c in storage.get("pvcs", ()):
        sim.cache.upsert_pvc(c)
    for v in storage.get("pvs", ()):
        sim.cache.upsert_pv(v)
    for sc in storage.get("classes", ()):
        sim.cache.upsert_storage_class(sc)
    for cn in storage.get("csinodes", ()):
        sim.cache.upsert_csinode(cn)
    result = sim.cycle()
    return result, sim


def test_a_pod_goes_where_its_bound_volume_can_attach():
    result, _ = run(
        [with_claims("p", "data")], pvcs=[pvc("data", volume="pv-1")], pvs=[pv("pv-1", hostname="b2")]
    )
    assert [(p.task.name, p.node) for p in result.placements] == [("p", "b2")]


def test_unbound_immediate_claim_keeps_the_pod_waiting():
    result, _ = run(
        [with_claims("p", "data")],
        pvcs=[pvc("data", cls="fast")],
        classes=[storage_class("fast", mode="Immediate")],
    )
    assert result.placements == []
    assert result.jobs["default/g"].job_fit_error == "pod has unbound immediate PersistentVolumeClaims"


def test_missing_claim_is_named():
    result, _ = run([with_claims("p", "nope")], pvcs=[pvc("other")])
    assert result.placements == []
    assert result.jobs["default/g"].job_fit_error == 'persistentvolumeclaim "nope" not found'


def test_wait_for_first_consumer_claim_lands_where_the_class_can_provision():
    result, _ = run(
        [with_claims("p", "data")],
        pvcs=[pvc("data", cls="zonal")],
        classes=[storage_class("zonal", zones=["b"])],
    )
    assert [p.node[0] for p in result.placements] == ["b"]


def test_volume_zone_labels_must_hold_on_the_node():
    result, _ = run([with_claims("p", "data")], pvcs=[pvc("data", volume="pv-z")], pvs=[pv("pv-z", zone="a")])
    assert [p.node[0] for p in result.placements] == ["a"]


def test_csi_attach_limit_from_csinode():
    csinodes = [
        msgspec.convert(
            {
                "metadata": {"name": n},
                "spec": {"drivers": [{"name": "csi.example.com", "allocatable": {"count": 1}}]},
            },
            CSINode,
        )
        for n in ("a1", "a2", "b1", "b2")
    ]
    # a1..b1 already have one volume of the driver attached; only b2 has room for another
    running = [
        with_claims(f"r-{n}", f"used-{n}", node_name=n, phase="Running", scheduler="other")
        for n in ("a1", "a2", "b1")
    ]
    claims = [pvc(f"used-{n}", volume=f"pv-used-{n}") for n in ("a1", "a2", "b1")] + [
        pvc("mine", volume="pv-mine")
    ]
    volumes = [pv(f"pv-used-{n}", driver="csi.example.com") for n in ("a1", "a2", "b1")] + [
        pv("pv-mine", driver="csi.example.com")
    ]
    result, _ = run([*running, with_claims("p", "mine")], pvcs=claims, pvs=volumes, csinodes=csinodes)
    assert [(p.task.name, p.node) for p in result.placements] == [("p", "b2")]


def test_a_claim_still_to_be_provisioned_counts_against_its_drivers_attach_limit():
    csinodes = [
        msgspec.convert(
            {
                "metadata": {"name": n},
                "spec": {"drivers": [{"name": "csi.example.com", "allocatable": {"count": 1}}]},
            },
            CSINode,
        )
        for n in ("a1", "a2", "b1", "b2")
    ]
    running = [
        with_claims(f"r-{n}", f"used-{n}", node_name=n, phase="Running", scheduler="other")
        for n in ("a1", "b1", "b2")
    ]
    claims = [pvc(f"used-{n}", volume=f"pv-used-{n}") for n in ("a1", "b1", "b2")] + [pvc("new", cls="lazy")]
    volumes = [pv(f"pv-used-{n}", driver="csi.example.com") for n in ("a1", "b1", "b2")]
    result, _ = run(
        [*running, with_claims("p", "new")],
        pvcs=claims,
        pvs=volumes,
        csinodes=csinodes,
        classes=[storage_class("lazy", provisioner="csi.example.com")],
    )
    assert [(p.task.name, p.node) for p in result.placements] == [("p", "a2")]
