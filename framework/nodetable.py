"""Columnar node state for bulk feasibility and scoring.

Every NodeInfo of a snapshot owns one row of a NodeTable: capacities and usage per resource
dimension as float64 columns, so that "which nodes can take this pod" and "how does each score"
are a handful of vectorised operations instead of a Python loop over every node.
"""

from __future__ import annotations

import numpy as np

from framework.resource import CPU, MEMORY, PODS, Resource

BASE_DIMS = (CPU, MEMORY, PODS)


class NodeTable:
    """Rows are nodes, columns are resource dimensions (cpu, memory, pods, then scalars as met)."""

    __slots__ = (
        "allocatable",
        "dims",
        "idle",
        "names",
        "pipelined",
        "ready",
        "releasing",
        "rows",
        "unschedulable",
        "used",
    )

    def __init__(self, capacity: int = 64) -> None:
        self.dims: dict[str, int] = {name: i for i, name in enumerate(BASE_DIMS)}
        self.rows = 0
        self.names: list[str] = []
        width = len(self.dims)
        self.allocatable = np.zeros((capacity, width))
        self.idle = np.zeros((capacity, width))
        self.used = np.zeros((capacity, width))
        self.releasing = np.zeros((capacity, width))
        self.pipelined = np.zeros((capacity, width))
        self.ready = np.zeros(capacity, dtype=bool)
        self.unschedulable = np.zeros(capacity, dtype=bool)

    # -- shape -------------------------------------------------------------------------------------
    def _grow_rows(self, needed: int) -> None:
        cap = self.allocatable.shape[0]
        if needed <= cap:
            return
        new_cap = max(needed, cap * 2)
        for attr in ("allocatable", "idle", "used", "releasing", "pipelined"):
            old = getattr(self, attr)
            new = np.zeros((new_cap, old.shape[1]))
            new[: self.rows] = old[: self.rows]
            setattr(self, attr, new)
        for attr in ("ready", "unschedulable"):
            old = getattr(self, attr)
            new = np.zeros(new_cap, dtype=bool)
            new[: self.rows] = old[: self.rows]
            setattr(self, attr, new)

    def dim(self, name: str) -> int:
        """The column of a dimension, adding it (zero for every node) the first time it is seen."""
        col = self.dims.get(name)
        if col is None:
            col = self.dims[name] = len(self.dims)
            for attr in ("allocatable", "idle", "used", "releasing", "pipelined"):
                old = getattr(self, attr)
                setattr(self, attr, np.concatenate([old, np.zeros((old.shape[0], 1))], axis=1))
        return col

    def add_row(self, name: str) -> int:
        row = self.rows
        self._grow_rows(row + 1)
        self.rows += 1
        self.names.append(name)
        return row

    # -- writes ------------------------------------------------------------------------------------
    def write_node(
        self,
        row: int,
        allocatable: Resource,
        idle: Resource,
        used: Resource,
        releasing: Resource,
        pipelined: Resource,
        ready: bool,
        unschedulable: bool,
    ) -> None:
        for res in (allocatable, idle, used, releasing, pipelined):
            for name in res.scalars:
                if name not in self.dims:
                    self.dim(name)
        self._set(self.allocatable, row, allocatable)
        self._set(self.idle, row, idle)
        self._set(self.used, row, used)
        self._set(self.releasing, row, releasing)
        self._set(self.pipelined, row, pipelined)
        self.ready[row] = ready
        self.unschedulable[row] = unschedulable

    def write_usage(
        self, row: int, idle: Resource, used: Resource, releasing: Resource, pipelined: Resource
    ) -> None:
        for res in (idle, used, releasing, pipelined):
            for name in res.scalars:
                if name not in self.dims:
                    self.dim(name)
        self._set(self.idle, row, idle)
        self._set(self.used, row, used)
        self._set(self.releasing, row, releasing)
        self._set(self.pipelined, row, pipelined)

    def _set(self, array: np.ndarray, row: int, res: Resource) -> None:
        r = array[row]
        r[0] = res.cpu
        r[1] = res.memory
        r[2] = res.pods
        if res.scalars:
            dims = self.dims
            for name, value in res.scalars.items():
                r[dims[name]] = value

    # -- reads -------------------------------------------------------------------------------------
    def request_vector(self, res: Resource) -> tuple[np.ndarray, np.ndarray]:
        """(columns, values) of the dimensions this request asks for (value above zero)."""
        cols = []
        vals = []
        if res.cpu > 0:
            cols.append(0)
            vals.append(res.cpu)
        if res.memory > 0:
            cols.append(1)
            vals.append(res.memory)
        if res.pods > 0:
            cols.append(2)
            vals.append(res.pods)
        for name, value in res.scalars.items():
            if value > 0:
                cols.append(self.dim(name))
                vals.append(value)
        return np.asarray(cols, dtype=np.intp), np.asarray(vals)

    def copy(self) -> NodeTable:
        out = NodeTable.__new__(NodeTable)
        out.dims = dict(self.dims)
        out.rows = self.rows
        out.names = list(self.names)
        n = self.rows
        out.allocatable = self.allocatable[:n].copy()
        out.idle = self.idle[:n].copy()
        out.used = self.used[:n].copy()
        out.releasing = self.releasing[:n].copy()
        out.pipelined = self.pipelined[:n].copy()
        out.ready = self.ready[:n].copy()
        out.unschedulable = self.unschedulable[:n].copy()
        return out
