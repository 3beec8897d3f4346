"""Columnar node state for bulk feasibility and scoring.

Every NodeInfo of a snapshot owns one row of a NodeTable: capacities and usage per resource
dimension as float64 columns, so that "which nodes can take this pod" and "how does each score"
are a handful of vectorised operations instead of a Python loop over every node.
"""

from __future__ import annotations

import numpy as np

from caldera.framework.resource import CPU, MEMORY, MIN_RESOURCE, PODS, Resource

BASE_DIMS = (CPU, MEMORY, PODS)
#: up to this many rows, per-row answers are computed value by value (cheaper than array operations)
SMALL_ROWS = 4


class NodeTable:
    """Rows are nodes, columns are resource dimensions (cpu, memory, pods, then scalars as met)."""

    __slots__ = (
        "_all_rows",
        "_requests",
        "allocatable",
        "dims",
        "future",
        "idle",
        "log",
        "names",
        "pipelined",
        "ready",
        "releasing",
        "rows",
        "unschedulable",
        "used",
        "version",
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
        #: idle + releasing - pipelined, kept in step on every write (Volcano's FutureIdle)
        self.future = np.zeros((capacity, width))
        self.ready = np.zeros(capacity, dtype=bool)
        self.unschedulable = np.zeros(capacity, dtype=bool)
        self._all_rows: np.ndarray | None = None
        #: bumped by every write: equal versions mean equal contents (for per-cycle result caches)
        self.version = 0
        #: when a list: the row of every write, in order (sessions patch per-template caches from it)
        self.log: list[int] | None = None
        #: request vectors by request value (see :meth:`fits`)
        self._requests: dict[tuple[object, ...], list[tuple[int, float]]] = {}

    # -- shape -------------------------------------------------------------------------------------
    def _grow_rows(self, needed: int) -> None:
        cap = self.allocatable.shape[0]
        if needed <= cap:
            return
        new_cap = max(needed, cap * 2)
        for attr in ("allocatable", "idle", "used", "releasing", "pipelined", "future"):
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
            for attr in ("allocatable", "idle", "used", "releasing", "pipelined", "future"):
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
        self.future[row] = self.idle[row] + self.releasing[row] - self.pipelined[row]
        self.version += 1
        if self.log is not None:
            self.log.append(row)
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
        if len(self.dims) == len(BASE_DIMS):
            # No scalar dimensions: the three sums as floats (the same operations as on the rows)
            future = self.future
            future[row, 0] = idle.cpu + releasing.cpu - pipelined.cpu
            future[row, 1] = idle.memory + releasing.memory - pipelined.memory
            future[row, 2] = idle.pods + releasing.pods - pipelined.pods
        else:
            self.future[row] = self.idle[row] + self.releasing[row] - self.pipelined[row]
        self.version += 1
        if self.log is not None:
            self.log.append(row)

    def write_usages(self, usages: list[tuple[int, Resource, Resource, Resource, Resource]]) -> None:
        """:meth:`write_usage` for many rows (row, idle, used, releasing, pipelined) at once: the
        same values and the same float operations, in a few array assignments when no figure has a
        scalar dimension (else row by row)."""
        if len(self.dims) != len(BASE_DIMS) or any(
            idle.scalars or used.scalars or releasing.scalars or pipelined.scalars
            for _, idle, used, releasing, pipelined in usages
        ):
            for row, idle, used, releasing, pipelined in usages:
                self.write_usage(row, idle, used, releasing, pipelined)
            return
        if not usages:
            return
        values = np.array(
            [
                (
                    idle.cpu, idle.memory, idle.pods,
                    used.cpu, used.memory, used.pods,
                    releasing.cpu, releasing.memory, releasing.pods,
                    pipelined.cpu, pipelined.memory, pipelined.pods,
                )
                for _, idle, used, releasing, pipelined in usages
            ],
            dtype=np.float64,
        )  # fmt: skip
        rows = np.fromiter((u[0] for u in usages), dtype=np.intp, count=len(usages))
        idles, releasings, pipelineds = values[:, 0:3], values[:, 6:9], values[:, 9:12]
        self.idle[rows] = idles
        self.used[rows] = values[:, 3:6]
        self.releasing[rows] = releasings
        self.pipelined[rows] = pipelineds
        self.future[rows] = idles + releasings - pipelineds  # (a + b) - c per figure, as write_usage
        self.version += len(usages)
        if self.log is not None:
            self.log.extend(rows.tolist())

    def _set(self, array: np.ndarray, row: int, res: Resource) -> None:
        r = array[row]
        r[0] = res.cpu
        r[1] = res.memory
        r[2] = res.pods
        dims = self.dims
        if len(dims) > len(BASE_DIMS):
            # A dimension the figure does not name is zero, not what the row held before: a node
            # whose device plugin went away lists no nvidia.com/gpu in its allocatable any more.
            r[len(BASE_DIMS) :] = 0.0
            for name, value in res.scalars.items():
                r[dims[name]] = value

    # -- reads -------------------------------------------------------------------------------------
    @property
    def all_rows(self) -> np.ndarray:
        """Every row, as one shared array: callers pass it back to mean "all nodes", which lets bulk
        code use column views instead of fancy-indexed copies (``rows is table.all_rows``)."""
        rows = self._all_rows
        if rows is None or len(rows) != self.rows:
            rows = self._all_rows = np.arange(self.rows, dtype=np.intp)
        return rows

    def request_items(self, res: Resource) -> list[tuple[int, float]]:
        """(column, value) of every dimension this request asks for (value above zero)."""
        items = []
        if res.cpu > 0:
            items.append((0, res.cpu))
        if res.memory > 0:
            items.append((1, res.memory))
        if res.pods > 0:
            items.append((2, res.pods))
        for name, value in res.scalars.items():
            if value > 0:
                items.append((self.dim(name), value))
        return items

    def column(self, array: np.ndarray, col: int, rows: np.ndarray | None) -> np.ndarray:
        """One column of ``array`` for ``rows``: a view when rows is None or every row."""
        if rows is None or rows is self._all_rows:
            return array[: self.rows, col]
        return array[rows, col]

    def fits(self, res: Resource, rows: np.ndarray | None = None, future: bool = True) -> np.ndarray:
        """Mask over ``rows`` (default all) of the nodes whose idle (or future idle) holds ``res``."""
        array = self.future if future else self.idle
        if rows is not None and rows is not self._all_rows and len(rows) <= SMALL_ROWS:
            # A few rows (a placement patching its cache): compared value by value, which for one or
            # two rows is many times cheaper than array operations; the same comparisons of the
            # same numbers, so the same answer.
            key = (
                (res.cpu, res.memory, res.pods, *res.scalars.items())
                if res.scalars
                else (
                    res.cpu,
                    res.memory,
                    res.pods,
                )
            )
            request = self._requests.get(key)
            if request is None:
                request = self._requests[key] = [
                    (col, value - MIN_RESOURCE) for col, value in self.request_items(res)
                ]
            item = array.item
            return np.array(
                [all(item(row, col) >= floor for col, floor in request) for row in rows.tolist()],
                dtype=bool,
            )
        mask: np.ndarray | None = None
        for col, value in self.request_items(res):
            ok = self.column(array, col, rows) >= value - MIN_RESOURCE
            if mask is None:
                mask = ok
            else:
                mask &= ok
        if mask is None:
            return np.ones(self.rows if rows is None else len(rows), dtype=bool)
        return mask

    def shortfalls(
        self, res: Resource, rows: np.ndarray | None = None, future: bool = True
    ) -> dict[str, np.ndarray]:
        """Per dimension the request lacks on some rows: the mask of those rows, keyed by
        kube-scheduler's reason ("Insufficient cpu", "Too many pods")."""
        array = self.future if future else self.idle
        names = {col: name for name, col in self.dims.items()}
        out: dict[str, np.ndarray] = {}
        for col, value in self.request_items(res):
            fails = self.column(array, col, rows) < value - MIN_RESOURCE
            name = names[col]
            out["Too many pods" if name == PODS else f"Insufficient {name}"] = fails
        return out

    def total(self, array: np.ndarray, mask: np.ndarray | None = None) -> Resource:
        """The sum of ``array``'s rows (those where ``mask`` holds) as a Resource, in one pass."""
        rows = array[: self.rows]
        if mask is not None:
            rows = rows[mask[: self.rows]]
        sums = rows.sum(axis=0) if len(rows) else np.zeros(array.shape[1])
        out = Resource(float(sums[0]), float(sums[1]), float(sums[2]))
        for name, col in self.dims.items():
            if col >= len(BASE_DIMS) and sums[col]:
                out.scalars[name] = float(sums[col])
        return out

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
        out.future = self.future[:n].copy()
        out._all_rows = None
        out.version = 0
        out.log = None
        out._requests = {}
        out.ready = self.ready[:n].copy()
        out.unschedulable = self.unschedulable[:n].copy()
        return out
