"""What a soak run is asked to do."""

from __future__ import annotations

from dataclasses import dataclass

from caldera.hack.soak.faults import FAULT_KINDS


@dataclass
class Options:
    minutes: float = 2.0
    seed: int = 1
    mix: str = "default"
    faults: tuple[str, ...] = FAULT_KINDS
    report_dir: str = "soak-report"
    nodes: int = 48
    ib_groups: int = 4
    period: str = "500ms"
    replicas: int = 2
    load_fraction: float = 0.8
    storm_seconds: float = 8.0
    probe_pods: int = 20
    finished_ttl: float = 15.0  # seconds finished pods stay before the janitor deletes them
    #: the share of the workloads' gangs that are Kubernetes' own PodGroups (the simulator then serves
    #: scheduling.k8s.io/v1alpha2, and the checker holds those gangs to their minCount too)
    native_gang: float = 0.0
    dra: bool = False  # DRA nodes (ResourceSlices of GPUs) and the `dra` generator's gangs, checked
    dra_nodes: int = 4
    verbose: bool = False
    #: pods created and deleted through the load (the ``churn`` fault)
    churn_pods: int = 2000
    #: seconds the leader is kept from renewing past its renew deadline (the ``lease-stall`` fault)
    lease_stall: float = 1.0
