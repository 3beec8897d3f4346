"""Devices counted for people: per node and driver (``/debug/nodes`` and the web view's node page),
and cluster-wide per DeviceClass and driver (``explain`` for a job waiting on devices: "16 devices of
class gpu.example.com, 16 allocated").

A device counts when it is in the newest generation of a complete pool (``GatherPools`` in
``staging/src/k8s.io/dynamic-resource-allocation/structured/pools.go`` skips the others, so no claim
could get it); it is allocated when an allocated claim holds it (``DraView.allocated``, assumed
allocations included) or this cycle's placements allocated it. A device of a class is one every
selector of the class matches (``DeviceClassSpec.Selectors``, as the allocator's
``isSelectable`` checks them), answered through the inventory's CEL cache; which devices a class
matches is kept with the inventory, which lives until the ResourceSlices change.
"""

from __future__ import annotations

from collections.abc import Iterable

from caldera.framework.dra.allocator import DeviceID, Inventory, InventoryDevice
from caldera.framework.dra.objects import AllocationResult, DeviceClass, ResourceClaim
from caldera.framework.dra.view import DraView


def usable_devices(inventory: Inventory) -> list[InventoryDevice]:
    """The devices of complete pools."""
    return [d for pool in inventory.pools if not pool.incomplete for d in pool.all_devices]


def in_use(view: DraView, allocations: Iterable[AllocationResult] = ()) -> set[DeviceID]:
    """Devices held by allocated claims, and by `allocations` (this cycle's); a share of a device that
    allows multiple allocations or an admin-access result holds no device."""
    held = set(view.allocated)
    for allocation in allocations:
        for r in allocation.devices.results:
            if not r.admin_access and r.share_id is None:
                held.add((r.driver, r.pool, r.device))
    return held


def class_devices(inventory: Inventory, device_class: DeviceClass) -> frozenset[DeviceID]:
    """The usable devices every selector of the class matches (a selector that fails to evaluate on a
    device, or one of a kind this version does not know, rules the device out)."""
    expressions = tuple(s.cel.expression if s.cel is not None else None for s in device_class.spec.selectors)
    key = ("summary.class_devices", expressions)
    cached = inventory.derived.get(key)
    if isinstance(cached, frozenset):
        return cached
    out = frozenset(
        d.id
        for d in usable_devices(inventory)
        if all(e is not None and inventory.cel_matches(e, d) is True for e in expressions)
    )
    inventory.derived[key] = out
    return out


def node_devices(view: DraView, held: set[DeviceID]) -> dict[str, list[dict[str, object]]]:
    """Per node, per driver: the node-local devices (a slice's ``nodeName``, or the device's own with
    ``perDeviceNodeSelection``) and how many are allocated."""
    counts: dict[str, dict[str, list[int]]] = {}
    for pool in view.inventory.pools:
        if pool.incomplete:
            continue
        for node, devices in pool.devices_by_node.items():
            c = counts.setdefault(node, {}).setdefault(pool.driver, [0, 0])
            c[0] += len(devices)
            c[1] += sum(1 for d in devices if d.id in held)
    return {
        node: [{"driver": drv, "devices": n, "allocated": a} for drv, (n, a) in sorted(by_driver.items())]
        for node, by_driver in counts.items()
    }


def cluster_summary(
    view: DraView, classes: Iterable[str], held: set[DeviceID]
) -> dict[str, list[dict[str, object]]]:
    """For each DeviceClass named (those a job's claims ask for): its devices in the cluster and how many
    are allocated (a class that does not exist is listed with ``missing``); and the same per driver of
    those devices."""
    out_classes: list[dict[str, object]] = []
    drivers: set[str] = set()
    for name in sorted(set(classes)):
        device_class = view.classes.get(name)
        if device_class is None:
            out_classes.append({"class": name, "devices": 0, "allocated": 0, "missing": True})
            continue
        ids = class_devices(view.inventory, device_class)
        drivers.update(d[0] for d in ids)
        out_classes.append({"class": name, "devices": len(ids), "allocated": len(ids & held)})
    by_driver = driver_devices(view.inventory)
    return {
        "classes": out_classes,
        "drivers": [
            {"driver": d, "devices": len(by_driver[d]), "allocated": len(by_driver[d] & held)}
            for d in sorted(drivers)
        ],
    }


def driver_devices(inventory: Inventory) -> dict[str, frozenset[DeviceID]]:
    """The usable devices of each driver; kept with the inventory (the allocated ones among them are
    then a set intersection, no walk over every device of the cluster)."""
    key = ("summary.driver_devices",)
    cached = inventory.derived.get(key)
    if isinstance(cached, dict):
        return cached
    out: dict[str, set[DeviceID]] = {}
    for d in usable_devices(inventory):
        out.setdefault(d.id[0], set()).add(d.id)
    frozen = {driver: frozenset(ids) for driver, ids in out.items()}
    inventory.derived[key] = frozen
    return frozen


def requested_classes(claim: ResourceClaim) -> set[str]:
    """The DeviceClasses a claim's requests name (``exactly``, and every ``firstAvailable`` choice)."""
    out: set[str] = set()
    for request in claim.spec.devices.requests:
        if request.exactly is not None:
            out.add(request.exactly.device_class_name)
        out.update(sub.device_class_name for sub in request.first_available)
    return out


def summary_line(summary: dict[str, list[dict[str, object]]]) -> str:
    """``16 devices of class gpu.example.com, 16 allocated; driver gpu.example.com: 16 devices, 16
    allocated``."""
    parts = [
        f"DeviceClass {c['class']} does not exist"
        if c.get("missing")
        else f"{c['devices']} devices of class {c['class']}, {c['allocated']} allocated"
        for c in summary["classes"]
    ]
    parts += [
        f"driver {d['driver']}: {d['devices']} devices, {d['allocated']} allocated"
        for d in summary["drivers"]
    ]
    return "; ".join(parts)
