"""The node table's future-idle column is idle + releasing - pipelined, with or without scalar
resources (two code paths: floats for cpu/memory/pods alone, row arithmetic with scalars)."""

import numpy as np
import pytest

from caldera.framework.nodetable import NodeTable
from caldera.framework.resource import Resource


@pytest.mark.parametrize("gpus", [False, True], ids=["cpu-memory-pods", "with-gpus"])
def test_future_idle_is_idle_plus_releasing_minus_pipelined(gpus):
    table = NodeTable()
    for name in ("a", "b"):
        table.add_row(name)

    def res(cpu, mem, pods, gpu):
        return Resource(cpu, mem, pods, {"nvidia.com/gpu": gpu} if gpus else None)

    idle, used = res(1500.5, 3e9, 7, 2), res(2500, 1e9, 3, 1)
    releasing, pipelined = res(700.25, 5e8, 1, 1), res(300.1, 2.5e8, 2, 2)
    table.write_usage(1, idle, used, releasing, pipelined)
    expected = (
        np.array([1500.5, 3e9, 7.0] + ([2.0] if gpus else []))
        + np.array([700.25, 5e8, 1.0] + ([1.0] if gpus else []))
        - np.array([300.1, 2.5e8, 2.0] + ([2.0] if gpus else []))
    )
    assert table.future[1].tobytes() == expected.tobytes()
    assert not table.future[0].any()
    assert table.log is None and table.version == 1


@pytest.mark.parametrize("gpus", [False, True], ids=["cpu-memory-pods", "with-gpus"])
def test_many_rows_written_at_once_equal_rows_written_one_by_one(gpus):
    """``write_usages`` (the cache's sync before a snapshot) leaves every array, the future-idle
    bits, the version and the write log as ``write_usage`` row by row does."""
    tables = (NodeTable(), NodeTable())
    for table in tables:
        table.log = []
        for name in "abcde":
            table.add_row(name)

    def res(i, k):
        return Resource(1000.5 * i + k, 3e9 / (i + 1), i + k, {"nvidia.com/gpu": i} if gpus and i else None)

    usages = [(row, res(row, 1), res(row, 2), res(row, 0.3), res(row, 0.7)) for row in (3, 0, 4)]
    tables[0].write_usages(usages)
    for usage in usages:
        tables[1].write_usage(*usage)
    at_once, one_by_one = tables
    for name in ("idle", "used", "releasing", "pipelined", "future"):
        assert getattr(at_once, name).tobytes() == getattr(one_by_one, name).tobytes(), name
    assert at_once.dims == one_by_one.dims
    assert (at_once.version, at_once.log) == (one_by_one.version, one_by_one.log) == (3, [3, 0, 4])


def test_a_row_written_again_without_a_scalar_reads_zero_there():
    """A figure that no longer names a dimension (a node whose device plugin went away lists no
    nvidia.com/gpu in its allocatable) leaves zero in that column, not what the row held before."""
    table = NodeTable()
    table.add_row("a")
    gpus = Resource(8000, 3e10, 110, {"nvidia.com/gpu": 4000})
    table.write_node(0, gpus, gpus, Resource(0, 0, 0), Resource(0, 0, 0), Resource(0, 0, 0), True, False)
    gpu = table.dims["nvidia.com/gpu"]
    assert table.idle[0, gpu] == 4000.0
    table.write_node(
        0, Resource(8000, 3e10, 110), Resource(8000, 3e10, 110), Resource(0, 0, 0),
        Resource(0, 0, 0), Resource(0, 0, 0), True, False,
    )  # fmt: skip
    assert [getattr(table, f)[0, gpu] for f in ("allocatable", "idle", "future")] == [0.0, 0.0, 0.0]
    assert not table.fits(Resource(100, 0, 1, {"nvidia.com/gpu": 1000}))[0]
    # the usage path too: a GPU task left, and the figures name the GPU no more
    table.write_usage(
        0, gpus, Resource(0, 0, 0, {"nvidia.com/gpu": 1000}), Resource(0, 0, 0), Resource(0, 0, 0)
    )
    assert table.used[0, gpu] == 1000.0
    table.write_usage(0, Resource(8000, 3e10, 110), Resource(0, 0, 0), Resource(0, 0, 0), Resource(0, 0, 0))
    assert (table.used[0, gpu], table.idle[0, gpu], table.future[0, gpu]) == (0.0, 0.0, 0.0)
