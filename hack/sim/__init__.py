"""caldera-sim: a simulated Kubernetes cluster that speaks the real API (for demos, e2e tests, soak and benchmarks)."""

from .cluster import SimCluster
from .errors import ApiError
from .faults import Faults
from .nodes import VGPU, ClusterSpec, NodeTemplate
from .resources import RESOURCES, Resource
from .store import Store

__all__ = [
    "RESOURCES",
    "VGPU",
    "ApiError",
    "ClusterSpec",
    "Faults",
    "NodeTemplate",
    "Resource",
    "SimCluster",
    "Store",
]
