"""binpack: prefer nodes that are already full, per resource weight (Volcano's arguments).

``binpack.weight`` (1), ``binpack.cpu`` (1), ``binpack.memory`` (1), ``binpack.resources``
("nvidia.com/gpu, example.com/foo") and ``binpack.resources.NAME`` (weight of that resource).
Score per node: sum over requested resources of weight * (used + request) / allocatable, over the
sum of weights, times 100 and ``binpack.weight``; 0 where the pod would not fit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from caldera.framework.model import TaskInfo
from caldera.framework.plugin import Plugin

if TYPE_CHECKING:
    from caldera.framework.session import Session


class BinpackPlugin(Plugin):
    name: ClassVar[str] = "binpack"
    arguments_schema: ClassVar[dict[str, type]] = {
        "binpack.weight": int,
        "binpack.cpu": int,
        "binpack.memory": int,
        "binpack.resources": list,
        "binpack.resources.*": int,
    }

    def on_session_open(self, ssn: Session) -> None:
        a = self.arguments
        self.weight = a.int("binpack.weight", 1)
        self.res_weights: dict[str, int] = {
            "cpu": a.int("binpack.cpu", 1),
            "memory": a.int("binpack.memory", 1),
        }
        for name in a.list("binpack.resources", []):
            self.res_weights[str(name)] = a.int(f"binpack.resources.{name}", 1)
        self.ssn = ssn
        if self.weight:
            ssn.add_bulk_node_order_fn(self.name, self.score, local=True)

    def score(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        t = self.ssn.table
        total = np.zeros(len(rows))
        weights = 0
        fits = np.ones(len(rows), dtype=bool)
        for name, w in self.res_weights.items():
            req = task.resreq.get(name)
            if w <= 0 or req <= 0:
                continue
            # Volcano's BinPackingScore / ResourceBinPackingScore (pkg/scheduler/plugins/binpack/
            # binpack.go): a requested resource the node lacks scores 0 but its weight still counts;
            # one the node has but cannot hold makes the node's score 0.
            weights += w
            col = t.dims.get(name)
            if col is None:
                continue
            alloc = t.allocatable[rows, col]
            used = t.used[rows, col] + req
            fits &= (alloc <= 0) | (used <= alloc)
            with np.errstate(divide="ignore", invalid="ignore"):
                total += w * np.where(alloc > 0, used / np.where(alloc > 0, alloc, 1.0), 0.0)
        if weights == 0:
            return total
        return np.where(fits, total / weights * 100.0 * self.weight, 0.0)
