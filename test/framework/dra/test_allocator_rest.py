"""The rest of the structured allocator's shared test table, ported as data: the rows after the
consumable-capacity ones, and the earlier rows ``test_allocator_cases.py`` and
``test_allocator_features.py`` leave out (the prioritized-list ``All`` rows, ``max-number-devices``...).

Source: ``TestAllocator`` in ``staging/src/k8s.io/dynamic-resource-allocation/structured/internal/
allocatortesting/allocator_testing.go`` (kubernetes/kubernetes, the ``resource/v1`` version with
``DRAListTypeAttributes``), from ``allow-multiple-allocations-not-allocate-dedicated-device-which-change-
from-multi-allocatable`` to the end of the table. Each :class:`FCase` names its Go case; the builders and
the runner are ``test_allocator_features.py``'s. A row without ``features`` runs with Go's zero
``Features{}`` (``OFF``: partitionable devices, taints, binding conditions and consumable capacity off).

Where Go aborts with "unsupported attribute value" (an attribute of no type Caldera knows, which is
also how Caldera reads a list-valued attribute), Caldera counts the device as not matching and reports
the typed CEL error, as in ``test_allocator_cases.py``. The ``check-combinations-*`` rows also count
Go's ``allocateOne`` invocations; the port compares their results only (README lists why).

Two rows differ on purpose (``differs``; README lists them): ``multi-host-resource-pool-complete-update-
from-node-1-to-node-2`` and ``...-incomplete-update-from-node-1-to-node-2``, where Go still allocates
device-1 on node-1 from the pool's stale generation; Caldera counts only a pool's newest generation, which
the Go table's own comment says is what it would like, so those rows expect no allocation.

Not ported (README): the ``list-attributes-*`` rows whose devices carry list-valued attributes (Caldera
does not implement ``DRAListTypeAttributes``).
"""

from __future__ import annotations

import pytest

from caldera.framework.dra.allocator import Features
from caldera.framework.dra.objects import DeviceAttribute, DeviceConstraint
from test.framework.dra.test_allocator_cases import (
    ALL,
    BOOL_ATTR,
    CB,
    CLASS_A,
    CLASS_B,
    DEV1,
    DEV2,
    DEV3,
    DRIVER_A,
    DRIVER_B,
    INT_ATTR,
    NODE1,
    NODE2,
    POOL1,
    POOL2,
    POOL3,
    POOL4,
    REQ0,
    REQ1,
    REQ2,
    SLICE1,
    SLICE2,
    STRING_ATTR,
    SUB0,
    SUB1,
    VERSION_ATTR,
    a_bool,
    a_int,
    a_str,
    a_ver,
    cel,
    device_class,
    many_devices,
    match,
)
from test.framework.dra.test_allocator_features import (
    BIND,
    CA,
    CC,
    CS1,
    CS2,
    MEM4,
    MEM6,
    OFF,
    PART,
    SLICE3,
    SLICE4,
    FCase,
    claim,
    counters,
    dev,
    first,
    mem,
    multi_class,
    r,
    req,
    res,
    run_case,
    sl,
    sub,
)

REQ3, DEV4 = "req-3", "device-4"
CAP0, CAP1 = "capacity-0", "capacity-1"
PART_CC = Features(device_taints=False, device_binding=False)
INVALID = "invalid resource pools were encountered"
UNSUPPORTED = "unsupported attribute value"
#: how Caldera reads a list-valued attribute (``StringValues``, ``IntValues``...), and an empty one
NO_KNOWN_TYPE = DeviceAttribute()
STALE = (
    "Caldera counts only a pool's newest generation, also on a node that sees only an older one; Go "
    "gathers a node's slices first and so allocates from the stale generation there (the Go row's "
    "comment: 'We'd like this to *not* be allocated')"
)
SHARE: dict[str, str] = {}  # a share that consumes nothing (``withConsumedCapacity(&fixedShareID, nil)``)


def distinct(attribute: str, *requests: str) -> DeviceConstraint:
    return DeviceConstraint(distinct_attribute=attribute, requests=list(requests))


def cap_at_least(n: str) -> object:
    return cel(f'device.capacity["{DRIVER_A}"]["{CAP0}"].compareTo(quantity("{n}")) >= 0')


def typed(t: str) -> dict[str, DeviceAttribute]:
    return {"type": a_str(t)}


IS_X = cel(f'device.attributes["{DRIVER_A}"].type == "X"')
IS_Y = cel(f'device.attributes["{DRIVER_A}"].type == "Y"')
BOOL_SET = cel(f'device.attributes["{DRIVER_A}"].boolAttribute')
XYY = [dev(DEV1, attributes=typed("X")), dev(DEV2, attributes=typed("Y")), dev(DEV3, attributes=typed("Y"))]


def one(where: str, *devices: str, name: str = SLICE1, count: int = 2, generation: int = 1) -> object:
    """A slice of pool-1 for ``where`` with plain devices (the multi-host pool rows)."""
    return sl(
        name,
        where,
        POOL1,
        DRIVER_A,
        *(dev(d) for d in devices),
        count=count,
        generation=generation,
    )


def two_devices(
    attr: str, first_value: DeviceAttribute, second: DeviceAttribute | None = None
) -> list[object]:
    """Slice-1 with device-1 and device-2 carrying ``attr`` (the second's value: the first's unless given)."""
    return [
        sl(
            SLICE1,
            NODE1,
            POOL1,
            DRIVER_A,
            dev(DEV1, attributes={attr: first_value}),
            dev(DEV2, attributes={attr: second if second is not None else first_value}),
        )
    ]


def two_under(constraint: DeviceConstraint) -> list[object]:
    """``claimWithRequests(claim0, [constraint], request(req0, classA, 2))``."""
    return [claim("claim-0", req(REQ0, CLASS_A, 2), constraints=[constraint])]


#: ``claimWithRequest(claim0, req0, classA)``
ONE_DEVICE = [claim("claim-0", req(REQ0, CLASS_A))]


def pool_shapes(*slices: tuple[str, str, list[str], int]) -> list[object]:
    """``check-combinations``: (slice, pool, devices, resourceSliceCount) on node-1."""
    return [sl(n, NODE1, p, DRIVER_A, *(dev(d) for d in ds), count=c) for n, p, ds, c in slices]


def generation(g: str) -> object:
    return cel(f'device.attributes["{DRIVER_A}"].generation == "{g}"')


def gen_dev(name: str, g: str, **attrs: DeviceAttribute) -> object:
    return dev(name, attributes={"generation": a_str(g), **attrs})


#: ``subRequest(subReq0, ..., "v6").withAllocationMode(All)``, then the same for "v5"
V6_THEN_V5 = first(
    REQ0,
    sub(SUB0, CLASS_A, 0, generation("v6"), mode=ALL),
    sub(SUB1, CLASS_A, 0, generation("v5"), mode=ALL),
)
MAX = 32  # resourceapi.AllocationResultsMaxSize


def numbered(request: str, driver: str, pool: str, start: int, n: int) -> list[tuple[object, ...]]:
    """``multipleDeviceAllocationResults``."""
    return [r(request, driver, pool, f"device-{i}") for i in range(start, start + n)]


EARLIER: list[FCase] = [
    FCase(
        "all-devices-invalid-CEL",
        [claim("claim-0", req(REQ0, CLASS_A, 500))],
        [CA],
        features=OFF,
        reason="exceeds the claim limit",
        claim_error=True,
    ),
    FCase(
        "prioritized-list-allocation-mode-all",
        [claim("claim-0", first(REQ0, sub(SUB0, CLASS_A, 0, mode=ALL), sub(SUB1, CLASS_A)))],
        [CA],
        [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1), dev(DEV2))],
        allocated=[(DRIVER_A, POOL1, DEV2)],
        features=OFF,
        expect=[res(r(f"{REQ0}/{SUB1}", DRIVER_A, POOL1, DEV1))],
    ),
    FCase(
        "prioritized-list-allocation-mode-all-with-selectors",
        [claim("claim-0", V6_THEN_V5)],
        [CA],
        [sl(SLICE1, NODE1, POOL1, DRIVER_A, gen_dev(DEV1, "v5"))],
        features=OFF,
        expect=[res(r(f"{REQ0}/{SUB1}", DRIVER_A, POOL1, DEV1))],
    ),
    FCase(
        "prioritized-list-allocation-mode-all-with-selectors-multiple-pools",
        [claim("claim-0", V6_THEN_V5)],
        [CA],
        [
            sl(SLICE1, NODE1, POOL1, DRIVER_A, gen_dev(DEV1, "v5")),
            sl(SLICE2, NODE1, POOL2, DRIVER_A, gen_dev(DEV1, "v5")),
        ],
        features=OFF,
        expect=[res(r(f"{REQ0}/{SUB1}", DRIVER_A, POOL1, DEV1), r(f"{REQ0}/{SUB1}", DRIVER_A, POOL2, DEV1))],
    ),
    FCase(
        "prioritized-list-allocation-mode-all-with-selectors-multiple-pools-across-nodes",
        [claim("claim-0", V6_THEN_V5)],
        [CA],
        [
            sl(SLICE1, NODE1, POOL1, DRIVER_A, gen_dev(DEV1, "v5")),
            sl(SLICE2, NODE2, POOL2, DRIVER_A, gen_dev(DEV1, "v5"), gen_dev(DEV2, "v6")),
        ],
        features=OFF,
        expect=[res(r(f"{REQ0}/{SUB1}", DRIVER_A, POOL1, DEV1))],
    ),
    FCase(
        "prioritized-list-allocation-mode-all-with-selectors-deviceclass-subset",
        [claim("claim-0", V6_THEN_V5)],
        [
            device_class(
                CLASS_A,
                DRIVER_A,
                f'device.driver == "{DRIVER_A}" && device.attributes["{DRIVER_A}"].selected',
            )
        ],
        [
            sl(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                gen_dev(DEV1, "v6", selected=a_bool(False)),
                gen_dev(DEV2, "v5", selected=a_bool(False)),
                gen_dev(DEV3, "v5", selected=a_bool(True)),
            )
        ],
        features=OFF,
        expect=[res(r(f"{REQ0}/{SUB1}", DRIVER_A, POOL1, DEV3))],
    ),
    FCase(
        "max-number-devices",
        [claim("claim-0", req(REQ0, CLASS_A, MAX))],
        [CA],
        [many_devices(SLICE1, NODE1, POOL1, DRIVER_A, MAX)],
        features=OFF,
        expect=[res(*numbered(REQ0, DRIVER_A, POOL1, 0, MAX))],
    ),
    FCase(
        "prioritized-list-max-allocation-limit-request",
        [
            claim(
                "claim-0",
                *(first(q, sub(SUB0, CLASS_A, MAX), sub(SUB1, CLASS_A, MAX // 2)) for q in (REQ0, REQ1)),
            )
        ],
        [CA],
        [many_devices(SLICE1, NODE1, POOL1, DRIVER_A, 2 * MAX)],
        features=OFF,
        expect=[
            res(
                *numbered(f"{REQ0}/{SUB1}", DRIVER_A, POOL1, 0, MAX // 2),
                *numbered(f"{REQ1}/{SUB1}", DRIVER_A, POOL1, MAX // 2, MAX // 2),
            )
        ],
    ),
    FCase(
        "prioritized-list-max-allocation-allocation-mode-all",
        [
            claim(
                "claim-0",
                first(REQ0, sub(SUB0, CLASS_A, 0, mode=ALL), sub(SUB1, CLASS_A, 2)),
                req(REQ1, CLASS_B, 2),
            )
        ],
        [CA, CB],
        [
            many_devices(SLICE1, NODE1, POOL1, DRIVER_A, MAX - 1),
            many_devices(SLICE2, NODE1, POOL2, DRIVER_B, 2),
        ],
        features=OFF,
        expect=[
            res(
                *numbered(f"{REQ0}/{SUB1}", DRIVER_A, POOL1, 0, 2),
                *numbered(REQ1, DRIVER_B, POOL2, 0, 2),
            )
        ],
    ),
]

CASES: list[FCase] = [
    # --- consumable capacity with other features ------------------------------------------------
    FCase(
        "allow-multiple-allocations-not-allocate-dedicated-device-which-change-from-multi-allocatable",
        [claim("claim-0", req(REQ0, CLASS_A, capacity="1"))],
        [multi_class(CLASS_A, DRIVER_A, True)],
        [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1, policy=("range", {CAP0: "2"})))],
        consumed={(DRIVER_A, POOL1, DEV1): {CAP0: "1"}},
        features=CC,
    ),
    FCase(
        "allow-multiple-allocations-with-partitionable-device",
        [
            claim(
                "claim-0",
                req(REQ0, CLASS_A),
                first(REQ1, sub(SUB0, CLASS_A, 1, mem("6Gi")), sub(SUB1, CLASS_A, 1, mem("4Gi"))),
            )
        ],
        [multi_class(CLASS_A, DRIVER_A, True)],
        [
            sl(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                dev(DEV1, "fromCounters", counters=MEM4, multi=True),
                dev(DEV2, "fromCounters", counters=MEM6, multi=True),
                dev(DEV3, "fromCounters", counters=MEM4, multi=True),
                count=2,
            ),
            counters(SLICE2, NODE1, POOL1, DRIVER_A, (CS1, {"memory": "8Gi"}), count=2),
        ],
        features=PART_CC,
        expect=[
            res(
                r(REQ0, DRIVER_A, POOL1, DEV1, consumed={"memory": "4Gi"}),
                r(f"{REQ1}/{SUB1}", DRIVER_A, POOL1, DEV3, consumed={"memory": "4Gi"}),
            )
        ],
    ),
    FCase(
        "consumable-capacity-with-partitionable-device-multiple-capacity-pools",
        [
            claim(
                "claim-0",
                req(REQ0, CLASS_A, capacity="1"),
                req(REQ2, CLASS_A, capacity="2"),
                first(
                    REQ1,
                    sub(SUB0, CLASS_A, 1, cap_at_least("4"), capacity="1"),
                    sub(SUB1, CLASS_A, 1, cap_at_least("2"), capacity="1"),
                ),
            )
        ],
        [CA],
        [
            sl(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                *(
                    dev(
                        d,
                        "fromCounters",
                        counters=[(CS1, {CAP0: c0}), (CS2, {CAP1: "4"})],
                        multi=True,
                        policy=("range", {CAP1: "4"}),
                    )
                    for d, c0 in ((DEV1, "2"), (DEV2, "4"), (DEV3, "2"))
                ),
                count=2,
            ),
            counters(SLICE2, NODE1, POOL1, DRIVER_A, (CS1, {CAP0: "4"}), (CS2, {CAP1: "8"}), count=2),
        ],
        features=PART_CC,
        expect=[
            res(
                r(REQ0, DRIVER_A, POOL1, DEV1, consumed={CAP0: "1", CAP1: "2"}),
                r(REQ2, DRIVER_A, POOL1, DEV3, consumed={CAP0: "2", CAP1: "2"}),
                r(f"{REQ1}/{SUB1}", DRIVER_A, POOL1, DEV1, consumed={CAP0: "1", CAP1: "2"}),
            )
        ],
    ),
    # --- distinctAttribute ----------------------------------------------------------------------
    FCase(
        "with-distinct-constraints",
        [
            claim(
                "claim-0",
                *(req(q, CLASS_A) for q in (REQ0, REQ1, REQ2, REQ3)),
                constraints=[
                    distinct(BOOL_ATTR, REQ0, REQ1),
                    distinct(VERSION_ATTR, REQ0, REQ1, REQ2),
                    distinct(INT_ATTR, REQ0, REQ1, REQ2, REQ3),
                ],
            )
        ],
        [CA],
        [
            sl(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                *(
                    dev(
                        d,
                        attributes={"driverVersion": a_ver(v), "numa": a_int(n), "boolAttribute": a_bool(b)},
                        multi=True,
                    )
                    for d, v, n, b in (
                        (DEV1, "1.0.0", 0, True),
                        (DEV2, "1.0.1", 1, False),
                        (DEV3, "1.0.2", 2, True),
                        (DEV4, "1.0.0", 3, True),
                    )
                ),
            )
        ],
        features=CC,
        expect=[
            res(
                r(REQ0, DRIVER_A, POOL1, DEV1, consumed=SHARE),
                r(REQ1, DRIVER_A, POOL1, DEV2, consumed=SHARE),
                r(REQ2, DRIVER_A, POOL1, DEV3, consumed=SHARE),
                r(REQ3, DRIVER_A, POOL1, DEV4, consumed=SHARE),
            )
        ],
    ),
    FCase(
        "with-distinct-constraints-attribute-not-set",
        [claim("claim-0", req(REQ0, CLASS_A), constraints=[distinct(BOOL_ATTR, REQ0)])],
        [CA],
        [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1, multi=True))],
        features=CC,
    ),
    FCase(
        "with-distinct-constraints-unknown-type-attribute",
        [claim("claim-0", req(REQ0, CLASS_A), constraints=[distinct(BOOL_ATTR, REQ0)])],
        [CA],
        [
            sl(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                dev(DEV1, attributes={"boolAttribute": NO_KNOWN_TYPE}, multi=True),
            )
        ],
        features=CC,
        cel_error=UNSUPPORTED,
    ),
    FCase(
        "with-distinct-constraints-with-subrequests",
        [
            claim(
                "claim-0",
                *(first(q, sub(SUB0, CLASS_A, 1, BOOL_SET), sub(SUB1, CLASS_A)) for q in (REQ0, REQ1, REQ2)),
                constraints=[distinct(BOOL_ATTR, REQ0, REQ1)],
            )
        ],
        [CA],
        [
            sl(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                dev(DEV1, attributes={"boolAttribute": a_bool(True)}, multi=True),
                dev(DEV2, attributes={"boolAttribute": a_bool(False)}, multi=True),
            )
        ],
        features=CC,
        expect=[
            res(
                r(f"{REQ0}/{SUB0}", DRIVER_A, POOL1, DEV1, consumed=SHARE),
                r(f"{REQ1}/{SUB1}", DRIVER_A, POOL1, DEV2, consumed=SHARE),
                r(f"{REQ2}/{SUB0}", DRIVER_A, POOL1, DEV1, consumed=SHARE),
            )
        ],
    ),
    FCase(
        "distinct-constraint-one-multi-allocatable-device-with-distinct-constraint",
        [
            claim(
                "claim-0",
                req(REQ0, CLASS_A, capacity="1"),
                req(REQ1, CLASS_A, capacity="1"),
                constraints=[distinct(STRING_ATTR)],
            )
        ],
        [multi_class(CLASS_A, DRIVER_A, True)],
        [
            sl(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                dev(
                    DEV1,
                    attributes={"stringAttribute": a_str("stringAttributeValue")},
                    multi=True,
                    policy=("range", {CAP0: "2"}),
                ),
            )
        ],
        features=CC,
    ),
    FCase(
        "distinct-constraint-two-multi-allocatable-devices-with-distinct-constraint",
        [
            claim(
                "claim-0",
                req(REQ0, CLASS_A, capacity="2"),
                req(REQ1, CLASS_A, capacity="2"),
                constraints=[distinct(STRING_ATTR)],
            )
        ],
        [multi_class(CLASS_A, DRIVER_A, True)],
        [
            # two slices of one pool, both named slice-1 (as in Go)
            sl(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                dev(
                    d,
                    attributes={"stringAttribute": a_str(v)},
                    multi=True,
                    policy=("range", {CAP0: "4"}),
                ),
                count=2,
            )
            for d, v in ((DEV1, "stringAttributeValue1"), (DEV2, "stringAttributeValue2"))
        ],
        features=CC,
        expect=[
            res(
                r(REQ0, DRIVER_A, POOL1, DEV1, consumed={CAP0: "2"}),
                r(REQ1, DRIVER_A, POOL1, DEV2, consumed={CAP0: "2"}),
            )
        ],
    ),
    # --- DRAListTypeAttributes rows with scalar, empty or (feature off) unreadable attributes ----------
    FCase(
        "list-attributes-match-constaint-scalar-string-values",
        two_under(match(STRING_ATTR)),
        [CA],
        two_devices("stringAttribute", a_str("value1")),
        features=OFF,
        expect=[res(r(REQ0, DRIVER_A, POOL1, DEV1), r(REQ0, DRIVER_A, POOL1, DEV2))],
    ),
    FCase(
        "list-attributes-match-constaint-with-empty-or-unknown-type",
        two_under(match(STRING_ATTR)),
        [CA],
        two_devices("stringAttribute", NO_KNOWN_TYPE),
        features=OFF,
        cel_error=UNSUPPORTED,
    ),
    FCase(
        "list-attributes-disabled-match-constraint-with-lists",
        two_under(match(STRING_ATTR)),
        [CA],
        two_devices("stringAttribute", NO_KNOWN_TYPE),
        features=OFF,
        cel_error=UNSUPPORTED,
    ),
    FCase(
        "list-attributes-distinct-constraint-scalar-string-values-all-distinct",
        two_under(distinct(STRING_ATTR)),
        [CA],
        two_devices("stringAttribute", a_str("value1"), a_str("value2")),
        features=CC,
        expect=[res(r(REQ0, DRIVER_A, POOL1, DEV1), r(REQ0, DRIVER_A, POOL1, DEV2))],
    ),
    FCase(
        "list-attributes-distinct-constraint-scalar-string-values-not-distinct",
        two_under(distinct(STRING_ATTR)),
        [CA],
        two_devices("stringAttribute", a_str("value1")),
        features=CC,
    ),
    FCase(
        "list-attributes-distinct-constaint-with-empty-or-unknown-type",
        two_under(distinct(VERSION_ATTR)),
        [CA],
        two_devices("driverVersion", NO_KNOWN_TYPE),
        features=CC,
        cel_error=UNSUPPORTED,
    ),
    FCase(
        "list-attributes-disabled-distinct-constraint-with-lists",
        two_under(distinct(STRING_ATTR)),
        [CA],
        two_devices("stringAttribute", NO_KNOWN_TYPE),
        features=CC,
        cel_error=UNSUPPORTED,
    ),
    # --- pools over several nodes ---------------------------------------------------------------
    FCase(
        "allocation-mode-all-with-multi-host-resource-pool",
        [claim("claim-0", req(REQ0, CLASS_A, 0, mode="All"))],
        [CA],
        [one(NODE1, DEV1), one(NODE2, DEV2, name=SLICE2)],
        features=OFF,
        expect=[res(r(REQ0, DRIVER_A, POOL1, DEV1))],
    ),
    FCase(
        "multi-host-resource-pool-with-stale-slice-for-current-node",
        ONE_DEVICE,
        [CA],
        [one(NODE1, DEV1), one(NODE2, DEV2, name=SLICE2, generation=2)],
        features=OFF,
    ),
    FCase(
        "multi-host-resource-pool-complete-update-from-node-1-to-node-2",
        ONE_DEVICE,
        [CA],
        [
            one(NODE1, DEV1),
            one(NODE1, DEV2),
            one(NODE2, DEV1, name=SLICE2, generation=2),
            one(NODE2, DEV2, name=SLICE2, generation=2),
        ],
        features=OFF,
        differs=STALE,  # Go: device-1 on node-1, from generation 1
    ),
    FCase(
        "multi-host-resource-pool-complete-update-from-node-2-to-node-1",
        ONE_DEVICE,
        [CA],
        [
            one(NODE2, DEV1),
            one(NODE2, DEV2),
            one(NODE1, DEV1, name=SLICE2, generation=2),
            one(NODE1, DEV2, name=SLICE2, generation=2),
        ],
        features=OFF,
        expect=[res(r(REQ0, DRIVER_A, POOL1, DEV1))],
    ),
    FCase(
        "multi-host-resource-pool-incomplete-update-from-node-1-to-node-2",
        ONE_DEVICE,
        [CA],
        [one(NODE1, DEV1), one(NODE1, DEV2), one(NODE2, DEV1, name=SLICE2, generation=2)],
        features=OFF,
        differs=STALE,  # Go: device-1 on node-1, from generation 1
    ),
    FCase(
        "multi-host-resource-pool-incomplete-update-from-node-2-to-node-1",
        ONE_DEVICE,
        [CA],
        [one(NODE2, DEV1), one(NODE2, DEV2), one(NODE1, DEV1, name=SLICE2, generation=2)],
        features=OFF,
    ),
    # --- pool validation ------------------------------------------------------------------------
    FCase(
        "partitionable-devices-same-counter-set-name-in-different-resource-slices",
        ONE_DEVICE,
        [CA],
        [
            sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1), count=4),
            counters(SLICE2, NODE1, POOL1, DRIVER_A, (CS1, {}), count=4),
            sl(SLICE3, NODE1, POOL1, DRIVER_A, dev(DEV2), count=4),
            counters(SLICE4, NODE1, POOL1, DRIVER_A, (CS1, {}), count=4),
        ],
        features=PART,
        reason=INVALID,
    ),
    FCase(
        "partitionable-devices-device-counter-consumption-references-unknown-counter-set",
        ONE_DEVICE,
        [CA],
        [
            sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1, counters=[(CS2, {})]), count=2),
            counters(SLICE2, NODE1, POOL1, DRIVER_A, (CS1, {}), count=2),
        ],
        features=PART,
        reason=INVALID,
    ),
    FCase(
        "partitionable-devices-device-counter-consumption-references-unknown-counter-in-counter-set",
        ONE_DEVICE,
        [CA],
        [
            sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1, counters=[(CS1, {"memory": "8Gi"})]), count=2),
            counters(SLICE2, NODE1, POOL1, DRIVER_A, (CS1, {"other-memory": "8Gi"}), count=2),
        ],
        features=PART,
        reason=INVALID,
    ),
    FCase(
        "partitionable-devices-device-counter-consumption-references-counter-set-in-other-pool",
        ONE_DEVICE,
        [CA],
        [
            sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1, counters=[(CS1, {"memory": "8Gi"})])),
            counters(SLICE2, NODE1, POOL2, DRIVER_A, (CS1, {"memory": "8Gi"})),
        ],
        features=PART,
        reason=INVALID,
    ),
    FCase(
        "partitionable-devices-devices-on-different-nodes-consume-same-counter-set",
        [claim("claim-0", first(REQ0, sub(SUB0, CLASS_A, 1, mem("6Gi")), sub(SUB1, CLASS_A, 1, mem("2Gi"))))],
        [CA],
        [
            counters(SLICE1, NODE1, POOL1, DRIVER_A, (CS1, {"memory": "8Gi"}), count=3),
            sl(
                SLICE2,
                NODE1,
                POOL1,
                DRIVER_A,
                dev(DEV1, "fromCounters", counters=MEM6),
                dev(DEV2, "fromCounters", counters=[(CS1, {"memory": "2Gi"})]),
                count=3,
            ),
            sl(SLICE3, NODE2, POOL1, DRIVER_A, dev(DEV3, counters=MEM6), count=3),
        ],
        allocated=[(DRIVER_A, POOL1, DEV3)],
        features=PART,
        expect=[res(r(f"{REQ0}/{SUB1}", DRIVER_A, POOL1, DEV2))],
    ),
    FCase(
        "partitionable-devices-validation-error-on-non-targeting-slice",
        ONE_DEVICE,
        [CA],
        [
            counters(SLICE1, NODE1, POOL1, DRIVER_A, (CS1, {"memory": "8Gi"}), count=3),
            sl(SLICE2, NODE1, POOL1, DRIVER_A, dev(DEV1, "fromCounters", counters=MEM6), count=3),
            sl(SLICE3, NODE2, POOL1, DRIVER_A, dev(DEV3, counters=[(CS2, {"memory": "6Gi"})]), count=3),
        ],
        features=PART,
        reason=INVALID,
    ),
    FCase(
        "different-resourceslices-in-pool-can-target-different-nodes",
        ONE_DEVICE,
        [CA],
        [one(NODE2, DEV1), one(NODE1, DEV2, name=SLICE2)],
        features=OFF,
        expect=[res(r(REQ0, DRIVER_A, POOL1, DEV2))],
    ),
    FCase(
        "invalid-pool-is-ok-if-devices-can-be-allocated-from-other",
        ONE_DEVICE,
        [CA],
        [one(NODE1, DEV1), one(NODE1, DEV1, name=SLICE2), sl(SLICE3, NODE1, POOL2, DRIVER_A, dev(DEV2))],
        features=OFF,
        expect=[res(r(REQ0, DRIVER_A, POOL2, DEV2))],
    ),
    FCase(
        "invalid-pool-is-error-if-no-other-device-can-be-allocated",
        ONE_DEVICE,
        [CA],
        [one(NODE1, DEV1), one(NODE1, DEV1, name=SLICE2), sl(SLICE3, NODE1, POOL2, DRIVER_A, dev(DEV2))],
        allocated=[(DRIVER_A, POOL2, DEV2)],
        features=OFF,
        reason=INVALID,
    ),
    FCase(
        "no-allocation-from-incomplete-pools",
        ONE_DEVICE,
        [CA],
        [one(NODE1, DEV1)],
        features=OFF,
    ),
    # --- the search over combinations (results only; Go also counts allocateOne calls) ---------
    FCase(
        "check-combinations-within-single-request-single-pool-single-slice",
        [claim("claim-0", req(REQ0, CLASS_A, 5))],
        [CA],
        pool_shapes((SLICE1, POOL1, [DEV1, DEV2, DEV3, DEV4], 1)),
        features=OFF,
    ),
    FCase(
        "check-combinations-within-single-request-single-pool-multiple-slices",
        [claim("claim-0", req(REQ0, CLASS_A, 5))],
        [CA],
        pool_shapes((SLICE1, POOL1, [DEV1, DEV2], 2), (SLICE2, POOL1, [DEV3, DEV4], 2)),
        features=OFF,
    ),
    FCase(
        "check-combinations-within-single-request-multiple-pools-multiple-slices",
        [claim("claim-0", req(REQ0, CLASS_A, 5))],
        [CA],
        pool_shapes((SLICE1, POOL1, [DEV1], 2), (SLICE2, POOL1, [DEV2], 2), (SLICE3, POOL2, [DEV3, DEV4], 1)),
        features=OFF,
    ),
    FCase(
        "check-combinations-within-single-request-many-pools",
        [claim("claim-0", req(REQ0, CLASS_A, 5))],
        [CA],
        pool_shapes(
            (SLICE1, POOL1, [DEV1], 1),
            (SLICE2, POOL2, [DEV2], 1),
            (SLICE3, POOL3, [DEV3], 1),
            (SLICE4, POOL4, [DEV4], 1),
        ),
        features=OFF,
    ),
    FCase(
        "check-combinations-with-backtracking",
        [claim("claim-0", req(REQ1, CLASS_A, 2), req(REQ2, CLASS_A, 1, IS_X))],
        [CA],
        [sl(SLICE1, NODE1, POOL1, DRIVER_A, *XYY)],
        features=OFF,
        expect=[
            res(
                r(REQ1, DRIVER_A, POOL1, DEV2),
                r(REQ1, DRIVER_A, POOL1, DEV3),
                r(REQ2, DRIVER_A, POOL1, DEV1),
            )
        ],
    ),
    FCase(
        "check-combinations-with-backtracking-across-slices-and-pools",
        [claim("claim-0", req(REQ1, CLASS_A, 2), req(REQ2, CLASS_A, 1, IS_X))],
        [CA],
        [
            sl(SLICE1, NODE1, POOL1, DRIVER_A, XYY[0], count=2),
            sl(SLICE2, NODE1, POOL1, DRIVER_A, XYY[1], count=2),
            # a binding condition makes pool-2 searched after pool-1 (as the Go row says)
            sl(SLICE3, NODE1, POOL2, DRIVER_A, dev(DEV3, attributes=typed("Y"), binding=(["IsPrepare"], []))),
        ],
        features=BIND,
        expect=[
            res(
                r(REQ1, DRIVER_A, POOL1, DEV2),
                r(REQ1, DRIVER_A, POOL2, DEV3, bind=(["IsPrepare"], [])),
                r(REQ2, DRIVER_A, POOL1, DEV1),
            )
        ],
    ),
    FCase(
        "check-combinations-with-prioritized-list",
        [
            claim(
                "claim-0",
                first(REQ1, sub(SUB0, CLASS_A, 3, IS_Y), sub(SUB1, CLASS_A, 2)),
                first(REQ2, sub(SUB0, CLASS_A, 2), sub(SUB1, CLASS_A, 1, IS_X)),
            )
        ],
        [CA],
        [sl(SLICE1, NODE1, POOL1, DRIVER_A, *XYY)],
        features=OFF,
        expect=[
            res(
                r(f"{REQ1}/{SUB1}", DRIVER_A, POOL1, DEV2),
                r(f"{REQ1}/{SUB1}", DRIVER_A, POOL1, DEV3),
                r(f"{REQ2}/{SUB1}", DRIVER_A, POOL1, DEV1),
            )
        ],
    ),
]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.go_case) for c in EARLIER + CASES])
def test_allocator_rest_case(case: FCase) -> None:
    """One ported case of TestAllocator (``case.go_test`` / ``case.go_case``)."""
    run_case(case)


def test_case_names_are_unique() -> None:
    """Each Go row is ported once (a copy-paste slip would hide a row)."""
    from test.framework.dra import test_allocator_cases, test_allocator_features

    names = [c.go_case for c in EARLIER + CASES]
    names += [c.go_case for c in test_allocator_cases.CASES + test_allocator_features.CASES]
    assert len(names) == len(set(names))
