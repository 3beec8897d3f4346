"""`caldera-sim workload`: synthetic workloads, reproducible by seed.

Every generator turns (seed, rate, duration) into a *plan*: a time-ordered list of API actions (create these
objects, scale that Deployment, cordon that node...). The same seed gives the same plan, so a failing soak
can be replayed; the plan is then executed against any API server (caldera-sim or a real cluster) by
`Executor`, which also plays the part of the controllers a bare API server lacks: finished pods are deleted
and a job's PodGroup and shared ResourceClaims go with its last pod, so the cluster turns over. Jobs finish through the simulator's
`sim.caldera.io/run-seconds` annotation.

Generators: `gang` (training jobs, min member 2-256, cpu/memory/GPU), `mpi` (gangs held to one InfiniBand
group by a hard network-topology requirement), `besteffort` (single pods without PodGroup or requests),
`preempt` (high-priority gangs sized to need preemption), `deploy` (Deployments scaled up and down, with
rapid 0<->1 flips), `vgpu` (pods asking for random vGPU slices), `queues` (queues whose guarantees exceed the
cluster, fed with jobs), `churn` (nodes added, cordoned, uncordoned and deleted) and `dra` (a DeviceClass,
ResourceSlices of GPUs for the nodes `ClusterShape.dra_nodes` names, and gangs claiming them through a
ResourceClaimTemplate or one shared ResourceClaim; not in the default mix: `caldera-sim soak --dra` adds it).

Rooms: `client` (the API client and object paths), `manifests` (object builders and labels), `plan` (actions,
the generator base, `build_plan`), `generators` (the nine generators and mixes), `executor` (runs a plan),
`cli` (the subcommand).
"""
