"""The cache's Numatopologies (``nodeinfo.volcano.sh/v1alpha1``, read by the numa-aware plugin).

Each watched object is turned once into a lean :class:`~caldera.framework.numa.NumaInfo` (by node
name). What the scheduler assigned on a node and the exporter has not reported yet is kept as an
assumption (Volcano's ``NodeInfo.UnassignedNumaPods``, filled by ``SchedulerCache.AddUnassignedNumaPods``
in ``pkg/scheduler/cache/cache.go``): a committed placement carries its NUMA sets
(``Placement.numa``), ``apply`` records them, and they stay taken in every snapshot until the node's
``podAllocations`` report all of them (``RefreshNumaSchedulerInfoByCrd``), the pod is deleted
(``clearUnassignedNumaPod``) or its bind fails for good. The snapshot's :class:`NumaView` is made
anew only when one of these changes, and is None while the cluster has no Numatopology.
"""

from __future__ import annotations

from caldera.cache.indexes import Indexes
from caldera.framework.numa import Numatopology, NumaView, PodMeta, ResNumaSets, numa_info, with_assumed


class NumaCache(Indexes):
    def upsert_numatopology(self, obj: Numatopology) -> None:
        info = numa_info(obj)  # outside the lock: it reads only the object
        with self._lock:
            self.revision += 1
            if info is None:
                self.numatopologies.pop(obj.metadata.name, None)
            else:
                self.numatopologies[obj.metadata.name] = info
            self._numa_made = None

    def delete_numatopology(self, obj: Numatopology) -> None:
        with self._lock:
            if self.numatopologies.pop(obj.metadata.name, None) is not None:
                self.revision += 1
                self._numa_made = None

    def assume_numa(self, node: str, pod: PodMeta, sets: ResNumaSets) -> None:
        """A placement's NUMA sets, taken on its node until the exporter reports the pod (lock held)."""
        self.numa_assumed.setdefault(node, {})[pod] = dict(sets)
        self._numa_made = None

    def forget_numa(self, uid: str) -> None:
        """The pod is gone or will not be bound: its assumed sets are free again (lock held)."""
        for node, pods in list(self.numa_assumed.items()):
            for pod in [p for p in pods if p.uid == uid]:
                del pods[pod]
                self._numa_made = None
            if not pods:
                del self.numa_assumed[node]

    def numa_view(self) -> NumaView | None:
        """The session's view (None while no Numatopology is known)."""
        with self._lock:
            made = self._numa_made
            if made is not None or not self.numatopologies:
                return made
            nodes = dict(self.numatopologies)
            for name, pods in list(self.numa_assumed.items()):
                info = nodes.get(name)
                if info is None:
                    continue
                nodes[name], all_reported = with_assumed(info, pods)
                if all_reported:
                    # Volcano clears a node's list only once every entry is reported
                    del self.numa_assumed[name]
            made = self._numa_made = NumaView(nodes)
            return made
