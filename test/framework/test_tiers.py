"""Tier semantics of every kind of callback, as Volcano defines them."""

from collections.abc import Callable

import numpy as np

from caldera.config.conf import parse_conf
from caldera.framework.plugin import Action, Plugin, Registry
from caldera.framework.session import ABSTAIN, PERMIT, REJECT, Session, ValidateResult, open_session
from caldera.hack.scenario import cluster, gang, node, podgroup


def make_plugin(name: str, register: Callable[[Session], None]) -> type[Plugin]:
    def on_open(self, ssn):
        register(ssn)

    return type(f"P_{name}", (Plugin,), {"name": name, "on_session_open": on_open})


class Noop(Action):
    name = "allocate"

    def execute(self, ssn):
        pass


def session(conf_yaml: str, plugins: dict[str, Callable[[Session], None]], snap=None) -> Session:
    registry = Registry()
    registry.register_action(Noop)
    for name, register in plugins.items():
        registry.register_plugin(make_plugin(name, register))
    conf = parse_conf(conf_yaml, registry)
    if snap is None:
        pg1, pods1 = gang("a", 2)
        pg2, pods2 = gang("b", 2)
        snap = cluster(nodes=[node("n1"), node("n2"), node("n3")], pods=pods1 + pods2, podgroups=[pg1, pg2])
    return open_session(snap, conf.tiers, registry.plugins, conf.configurations)


TWO_TIERS = """
actions: allocate
tiers:
- plugins:
  - name: first
  - name: second
- plugins:
  - name: third
"""


def test_order_first_plugin_that_decides_wins_then_creation_then_uid():
    calls = []

    def first(ssn):
        ssn.add_job_order_fn("first", lambda left, r: (calls.append("first"), 0)[1])

    def second(ssn):
        ssn.add_job_order_fn(
            "second", lambda left, r: (calls.append("second"), 1 if left.name == "a" else -1)[1]
        )

    def third(ssn):
        ssn.add_job_order_fn(
            "third", lambda left, r: (calls.append("third"), -1 if left.name == "a" else 1)[1]
        )

    ssn = session(TWO_TIERS, {"first": first, "second": second, "third": third})
    a, b = ssn.jobs["default/a"], ssn.jobs["default/b"]
    assert ssn.job_order(b, a)  # "second" decided: b before a
    assert "third" not in calls
    ssn2 = session(TWO_TIERS, {"first": first, "second": lambda s: None, "third": lambda s: None})
    a, b = ssn2.jobs["default/a"], ssn2.jobs["default/b"]
    assert ssn2.job_order(a, b)  # nobody decided: a was created first
    assert sorted([b, a], key=ssn2.job_key) == [a, b]


def test_switch_turns_off_one_callback_kind_of_one_plugin():
    conf = TWO_TIERS.replace("  - name: second\n", "  - name: second\n    enableJobOrder: false\n")

    def second(ssn):
        ssn.add_job_order_fn("second", lambda left, r: 1 if left.name == "a" else -1)

    ssn = session(conf, {"first": lambda s: None, "second": second, "third": lambda s: None})
    a, b = ssn.jobs["default/a"], ssn.jobs["default/b"]
    assert ssn.job_order(a, b)  # the disabled order function is not asked


def test_predicates_all_must_pass_bulk_and_scalar():
    def first(ssn):
        rows_ok = np.array([True, True, False])
        ssn.add_bulk_predicate_fn("first", lambda task, rows: rows_ok[rows], static=True)

    def third(ssn):
        ssn.add_predicate_fn("third", lambda task, node: "no n1" if node.name == "n1" else None)

    ssn = session(TWO_TIERS, {"first": first, "second": lambda s: None, "third": third})
    task = next(iter(ssn.jobs["default/a"].tasks.values()))
    assert [ssn.node_list[r].name for r in ssn.feasible_rows(task)] == ["n2"]
    assert ssn.predicate(task, ssn.nodes["n1"]) == "no n1"
    assert ssn.predicate(task, ssn.nodes["n3"]) is not None
    assert ssn.predicate(task, ssn.nodes["n2"]) is None


def test_predicate_switch_off():
    conf = TWO_TIERS.replace("  - name: first\n", "  - name: first\n    enablePredicate: false\n")

    def first(ssn):
        ssn.add_bulk_predicate_fn("first", lambda task, rows: np.zeros(len(rows), dtype=bool))

    ssn = session(conf, {"first": first, "second": lambda s: None, "third": lambda s: None})
    task = next(iter(ssn.jobs["default/a"].tasks.values()))
    assert len(ssn.feasible_rows(task)) == 3


def test_node_scores_add_up_and_ties_break_by_name():
    def first(ssn):
        ssn.add_bulk_node_order_fn("first", lambda task, rows: np.array([1.0, 5.0, 5.0])[rows])

    def second(ssn):
        ssn.add_node_order_fn("second", lambda task, node: 10.0 if node.name == "n1" else 0.0)

    def third(ssn):
        ssn.add_batch_node_order_fn("third", lambda task, nodes: {"n3": 1.0})

    ssn = session(TWO_TIERS, {"first": first, "second": second, "third": third})
    task = next(iter(ssn.jobs["default/a"].tasks.values()))
    rows = ssn.all_rows
    scores = ssn.node_scores(task, rows)
    assert scores.tolist() == [11.0, 5.0, 6.0]
    assert ssn.node_list[ssn.best_row(task, rows, scores)].name == "n1"
    tie = np.array([1.0, 1.0, 1.0])
    assert ssn.node_list[ssn.best_row(task, rows[::-1], tie)].name == "n1"


def test_enqueueable_votes_reject_wins_permit_stops_at_its_tier():
    seen = []

    def vote(name, value):
        def register(ssn):
            ssn.add_job_enqueueable_fn(name, lambda job: (seen.append(name), value)[1])

        return register

    ssn = session(
        TWO_TIERS,
        {"first": vote("first", PERMIT), "second": vote("second", ABSTAIN), "third": vote("third", REJECT)},
    )
    assert ssn.job_enqueueable(ssn.jobs["default/a"])
    assert "third" not in seen  # a permit in tier 1 settles it
    ssn = session(
        TWO_TIERS,
        {"first": vote("first", PERMIT), "second": vote("second", REJECT), "third": vote("third", PERMIT)},
    )
    assert not ssn.job_enqueueable(ssn.jobs["default/a"])
    ssn = session(
        TWO_TIERS,
        {"first": vote("first", ABSTAIN), "second": vote("second", ABSTAIN), "third": vote("third", REJECT)},
    )
    assert not ssn.job_enqueueable(ssn.jobs["default/a"])
    ssn = session(TWO_TIERS, {"first": lambda s: None, "second": lambda s: None, "third": lambda s: None})
    assert ssn.job_enqueueable(ssn.jobs["default/a"])  # nobody votes: allowed


def test_pipelined_votes_same_as_enqueueable():
    def reg(value):
        return lambda ssn: ssn.add_job_pipelined_fn("third", lambda job: value)

    ssn = session(TWO_TIERS, {"first": lambda s: None, "second": lambda s: None, "third": reg(REJECT)})
    assert not ssn.job_pipelined(ssn.jobs["default/a"])


def test_job_ready_all_must_agree_and_switch():
    def first(ssn):
        ssn.add_job_ready_fn("first", lambda job: True)

    def third(ssn):
        ssn.add_job_ready_fn("third", lambda job: False)

    ssn = session(TWO_TIERS, {"first": first, "second": lambda s: None, "third": third})
    assert not ssn.job_ready(ssn.jobs["default/a"])
    conf = TWO_TIERS.replace("  - name: third\n", "  - name: third\n    enableJobReady: false\n")
    ssn = session(conf, {"first": first, "second": lambda s: None, "third": third})
    assert ssn.job_ready(ssn.jobs["default/a"])


def test_victims_intersect_within_a_tier_and_first_selecting_tier_wins():
    def candidates_named(*names):
        return lambda preemptor, preemptees: ([t for t in preemptees if t.name in names], PERMIT)

    def first(ssn):
        ssn.add_preemptable_fn("first", candidates_named("b-0", "b-1"))

    def second(ssn):
        ssn.add_preemptable_fn("second", candidates_named("b-1"))

    def third(ssn):
        ssn.add_preemptable_fn("third", candidates_named("b-0"))

    ssn = session(TWO_TIERS, {"first": first, "second": second, "third": third})
    preemptor = ssn.jobs["default/a"].tasks
    preemptees = list(ssn.jobs["default/b"].tasks.values())
    p = next(iter(preemptor.values()))
    assert [t.name for t in ssn.preemptable(p, preemptees)] == ["b-1"]

    def empty(ssn):
        ssn.add_preemptable_fn("second", lambda preemptor, preemptees: ([], PERMIT))

    # a plugin that selects nobody empties its tier; the next tier decides
    ssn = session(TWO_TIERS, {"first": first, "second": empty, "third": third})
    preemptees = list(ssn.jobs["default/b"].tasks.values())
    p = next(iter(ssn.jobs["default/a"].tasks.values()))
    assert [t.name for t in ssn.preemptable(p, preemptees)] == ["b-0"]

    def abstain(ssn):
        ssn.add_preemptable_fn("second", lambda preemptor, preemptees: ([], ABSTAIN))

    ssn = session(TWO_TIERS, {"first": first, "second": abstain, "third": third})
    preemptees = list(ssn.jobs["default/b"].tasks.values())
    p = next(iter(ssn.jobs["default/a"].tasks.values()))
    assert sorted(t.name for t in ssn.preemptable(p, preemptees)) == [
        "b-0",
        "b-1",
    ]  # abstaining does not narrow


def test_victim_tasks_add_up_within_a_tier_and_the_first_tier_choosing_any_wins():
    """Volcano's Session.VictimTasks (session_plugins.go): within a tier the plugins' choices are
    united (a task chosen twice counts once); a tier that chooses nobody hands over to the next."""

    def choose(name, *tasks):
        return lambda ssn: ssn.add_victim_tasks_fns(name, [lambda ts: [t for t in ts if t.name in tasks]])

    def victims(first, second, third):
        ssn = session(TWO_TIERS, {"first": first, "second": second, "third": third})
        every = [t for j in ssn.jobs.values() for t in j.tasks.values()]
        return sorted(t.name for t in ssn.victim_tasks(every))

    assert victims(choose("first", "a-0", "b-1"), choose("second", "b-1", "b-0"), choose("third", "a-1")) == [
        "a-0",
        "b-0",
        "b-1",
    ]
    assert victims(choose("first"), choose("second"), choose("third", "a-1")) == ["a-1"]
    assert victims(choose("first"), choose("second"), choose("third")) == []


def test_reclaimable_switch():
    conf = TWO_TIERS.replace("  - name: first\n", "  - name: first\n    enableReclaimable: false\n")

    def first(ssn):
        ssn.add_reclaimable_fn("first", lambda r, rs: (rs[:1], PERMIT))

    ssn = session(conf, {"first": first, "second": lambda s: None, "third": lambda s: None})
    p = next(iter(ssn.jobs["default/a"].tasks.values()))
    assert ssn.reclaimable(p, list(ssn.jobs["default/b"].tasks.values())) == []


def test_overused_any_allocatable_all():
    def first(ssn):
        ssn.add_overused_fn("first", lambda q: False)
        ssn.add_allocatable_fn("first", lambda q, t: True)

    def third(ssn):
        ssn.add_overused_fn("third", lambda q: True)
        ssn.add_allocatable_fn("third", lambda q, t: False)

    ssn = session(TWO_TIERS, {"first": first, "second": lambda s: None, "third": third})
    q = ssn.queues["default"]
    t = next(iter(ssn.jobs["default/a"].tasks.values()))
    assert ssn.overused(q)
    assert not ssn.allocatable(q, t)


def test_job_valid_first_failure_and_starving():
    def first(ssn):
        ssn.add_job_valid_fn("first", lambda job: ValidateResult(True))
        ssn.add_job_starving_fn("first", lambda job: True)

    def third(ssn):
        ssn.add_job_valid_fn("third", lambda job: ValidateResult(False, "NotEnoughPods", "needs 3"))
        ssn.add_job_starving_fn("third", lambda job: False)

    ssn = session(TWO_TIERS, {"first": first, "second": lambda s: None, "third": third})
    a = ssn.jobs["default/a"]
    result = ssn.job_valid(a)
    assert result is not None and result.reason == "NotEnoughPods"
    assert ssn.job_starving(a)  # tier 1 answered
    empty = session(TWO_TIERS, {"first": lambda s: None, "second": lambda s: None, "third": lambda s: None})
    assert not empty.job_starving(empty.jobs["default/a"])  # nobody says starving: not starving


def test_best_node_fn_overrides_scores():
    def first(ssn):
        ssn.add_best_node_fn("first", lambda task, by_score: ssn.nodes["n3"])

    ssn = session(TWO_TIERS, {"first": first, "second": lambda s: None, "third": lambda s: None})
    t = next(iter(ssn.jobs["default/a"].tasks.values()))
    assert ssn.node_list[ssn.best_row(t, ssn.all_rows, np.array([9.0, 1.0, 0.0]))].name == "n3"


def test_static_predicate_is_cached_per_template():
    calls = []

    def first(ssn):
        def fn(task, rows):
            calls.append(task.name)
            return np.ones(len(rows), dtype=bool)

        ssn.add_bulk_predicate_fn("first", fn, static=True)

    pg, pods = gang("big", 50)
    snap = cluster(nodes=[node("n1")], pods=pods, podgroups=[pg, podgroup("x")])
    ssn = session(TWO_TIERS, {"first": first, "second": lambda s: None, "third": lambda s: None}, snap)
    for task in ssn.jobs["default/big"].tasks.values():
        ssn.feasible_rows(task)
    assert len(calls) == 1  # fifty identical pods, one evaluation
