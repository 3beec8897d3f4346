"""Issue 14 item 8: each of Volcano's predicates switches and nodeorder's podtopologyspread.weight
changes where a pod lands (the checks themselves are plugins/predicates.py's, plugins/volumes.py's
and plugins/spread.py's). Nodes a1, a2 (zone a), b1, b2 (zone b); with nothing else to tell them
apart, a pod goes to the first by name, a1."""

import msgspec
import pytest

from caldera.framework.objects import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from caldera.hack.scenario import InProcessCluster, node, pod, podgroup

ZONE = "topology.kubernetes.io/zone"


def conf(plugin_lines):
    return 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n' + plugin_lines


def predicates(switch=None):
    return conf("  - name: predicates\n" + (f"    arguments: {{{switch}: false}}\n" if switch else ""))


def nodes():
    return [
        node(f"{z}{i}", labels={ZONE: z, "kubernetes.io/hostname": f"{z}{i}"}, cpu="8")
        for z in ("a", "b")
        for i in (1, 2)
    ]


def pvc(name, cls="standard", volume=""):
    return msgspec.convert(
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"storageClassName": cls, "volumeName": volume},
            "status": {"phase": "Bound" if volume else "Pending"},
        },
        PersistentVolumeClaim,
    )


def pv(name, zone=None, driver=None):
    spec: dict = {"storageClassName": "standard"}
    if driver:
        spec["csi"] = {"driver": driver, "volumeHandle": name}
    meta = {"name": name, "labels": {ZONE: zone} if zone else {}}
    return msgspec.convert({"metadata": meta, "spec": spec, "status": {"phase": "Bound"}}, PersistentVolume)


def with_claims(name, *claims, **kw):
    volumes = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    return pod(name, group="g", spec_extra={"volumes": volumes}, **kw)


def placed(text, pods, pvcs=(), pvs=(), classes=(), csinodes=()):
    sim = InProcessCluster(text, nodes=nodes(), pods=pods, podgroups=[podgroup("g")])
    for c in pvcs:
        sim.cache.upsert_pvc(c)
    for v in pvs:
        sim.cache.upsert_pv(v)
    for sc in classes:
        sim.cache.upsert_storage_class(sc)
    for cn in csinodes:
        sim.cache.upsert_csinode(cn)
    return {p.task.name: p.node for p in sim.cycle().placements}


def volume_zone():
    return dict(
        pods=[with_claims("p", "data")], pvcs=[pvc("data", volume="pv-z")], pvs=[pv("pv-z", zone="b")]
    )


def volume_binding():
    immediate = msgspec.convert(
        {"metadata": {"name": "fast"}, "provisioner": "csi.example.com", "volumeBindingMode": "Immediate"},
        StorageClass,
    )
    return dict(pods=[with_claims("p", "data")], pvcs=[pvc("data", cls="fast")], classes=[immediate])


def volume_limits():
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
        with_claims(
            f"r-{n}", f"used-{n}", node_name=n, phase="Running", scheduler="other", cpu=None, memory=None
        )
        for n in ("a1", "a2", "b1")
    ]
    claims = [pvc(f"used-{n}", volume=f"pv-used-{n}") for n in ("a1", "a2", "b1")] + [
        pvc("mine", volume="pv-mine")
    ]
    vols = [pv(f"pv-used-{n}", driver="csi.example.com") for n in ("a1", "a2", "b1")] + [
        pv("pv-mine", driver="csi.example.com")
    ]
    return dict(pods=[*running, with_claims("p", "mine")], pvcs=claims, pvs=vols, csinodes=csinodes)


def spread(when):
    constraint = {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    running = [
        pod(f"r-{n}", group="g", node_name=n, phase="Running", labels={"app": "web"}, cpu=None, memory=None)
        for n in ("a1", "a2")
    ]
    new = pod("p", group="g", labels={"app": "web"}, spec_extra={"topologySpreadConstraints": [constraint]})
    return dict(pods=[*running, new])


CASES = {
    "predicate.VolumeZoneEnable": (volume_zone, {"p": "b1"}, {"p": "a1"}),
    "predicate.VolumeBindingEnable": (volume_binding, {}, {"p": "a1"}),
    "predicate.NodeVolumeLimitsEnable": (volume_limits, {"p": "b2"}, {"p": "a1"}),
    "predicate.PodTopologySpreadEnable": (lambda: spread("DoNotSchedule"), {"p": "b1"}, {"p": "a1"}),
}


@pytest.mark.parametrize("switch", list(CASES))
def test_predicate_switch_changes_placement(switch):
    build, on, off = CASES[switch]
    assert {k: v for k, v in placed(predicates(), **build()).items() if k == "p"} == on
    assert {k: v for k, v in placed(predicates(switch), **build()).items() if k == "p"} == off


def test_podtopologyspread_weight_changes_placement():
    zero = "leastrequested.weight: 0, balancedresource.weight: 0, nodeaffinity.weight: 0, podaffinity.weight: 0, tainttoleration.weight: 0"

    def text(weight):
        return conf(f"  - name: nodeorder\n    arguments: {{{zero}, podtopologyspread.weight: {weight}}}\n")

    assert placed(text(0), **spread("ScheduleAnyway"))["p"] == "a1"
    assert placed(text(2), **spread("ScheduleAnyway"))["p"].startswith("b")
