"""The device counts explain shows for a job waiting on devices (framework/dra/summary.py)."""

from __future__ import annotations

from caldera.framework.dra.allocator import Inventory
from caldera.framework.dra.summary import cluster_summary, summary_line
from caldera.framework.dra.view import DraView
from caldera.hack.scenario import device_class, resource_slice

GPU = "gpu.example.com"


def test_a_class_counts_its_devices_and_the_driver_counts_all_of_its_own_with_the_allocated_ones() -> None:
    """A class selecting some of a driver's devices: the class line counts those, the driver line
    every usable device of the driver; both count the held ones among theirs."""
    slices = [
        resource_slice(
            "n1", GPU, {"big-0": {"size": {"string": "big"}}, "small-0": {"size": {"string": "small"}}}
        ),
        resource_slice(
            "n2", GPU, {"big-1": {"size": {"string": "big"}}, "small-1": {"size": {"string": "small"}}}
        ),
        resource_slice("n3", "other.example.com", ["o-0"]),
    ]
    big = device_class("big", f'device.driver == "{GPU}" && device.attributes["{GPU}"].size == "big"')
    inventory = Inventory(slices)
    view = DraView(inventory, {"big": big}, {}, frozenset())
    held = {(GPU, "n1", "small-0"), (GPU, "n2", "big-1"), ("other.example.com", "n3", "o-0")}
    summary = cluster_summary(view, ["big", "absent"], held)
    assert summary["classes"] == [
        {"class": "absent", "devices": 0, "allocated": 0, "missing": True},
        {"class": "big", "devices": 2, "allocated": 1},
    ]
    assert summary["drivers"] == [{"driver": GPU, "devices": 4, "allocated": 2}]
    assert summary_line(summary) == (
        "DeviceClass absent does not exist; 2 devices of class big, 1 allocated;"
        f" driver {GPU}: 4 devices, 2 allocated"
    )
    # the counts kept with the inventory answer the same for another set of held devices
    assert cluster_summary(view, ["big"], set())["drivers"] == [{"driver": GPU, "devices": 4, "allocated": 0}]
