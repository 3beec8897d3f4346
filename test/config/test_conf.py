"""The scheduler conf: Volcano's format, Volcano's default, and errors that say exactly what is wrong."""

import pytest

from caldera.config.conf import DEFAULT_CONF, ConfError, default_conf, parse_conf
from caldera.framework.plugin import Action, Plugin, Registry


def registry() -> Registry:
    reg = Registry()
    for name in ("enqueue", "allocate", "backfill", "preempt", "reclaim"):
        schema = {"predicateErrorCacheEnable": bool, "mode": str} if name == "allocate" else {}
        reg.register_action(
            type(name, (Action,), {"name": name, "arguments_schema": schema, "execute": lambda s, ssn: None})
        )
    for name in (
        "priority",
        "gang",
        "conformance",
        "overcommit",
        "drf",
        "predicates",
        "proportion",
        "nodeorder",
        "binpack",
    ):
        schema: dict[str, type] = {}
        if name == "nodeorder":
            schema = {
                "leastrequested.weight": int,
                "mostrequested.weight": int,
                "balancedresource.weight": int,
            }
        if name == "binpack":
            schema = {
                "binpack.weight": int,
                "binpack.cpu": int,
                "binpack.resources": list,
                "binpack.resources.*": int,
            }
        reg.register_plugin(
            type(
                name,
                (Plugin,),
                {"name": name, "arguments_schema": schema, "on_session_open": lambda s, ssn: None},
            )
        )
    return reg


def test_default_conf_is_volcanos():
    conf = default_conf(registry())
    assert conf.actions == ["enqueue", "allocate", "backfill"]
    assert [[p.name for p in t.plugins] for t in conf.tiers] == [
        ["priority", "gang", "conformance"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder"],
    ]
    assert conf.source == DEFAULT_CONF


def test_full_conf_with_switches_arguments_and_configurations():
    conf = parse_conf(
        """
actions: "enqueue, allocate, backfill, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
- plugins:
  - name: predicates
  - name: nodeorder
    arguments:
      leastrequested.weight: 2
      mostrequested.weight: "0"
  - name: binpack
    arguments:
      binpack.weight: 10
      binpack.resources: nvidia.com/gpu, example.com/foo
      binpack.resources.nvidia.com/gpu: 2
configurations:
- name: allocate
  arguments:
    predicateErrorCacheEnable: "true"
""",
        registry(),
    )
    assert conf.actions == ["enqueue", "allocate", "backfill", "preempt"]
    gang = conf.plugin_option("gang")
    assert gang is not None
    assert not gang.enabled("preemptable")
    assert gang.enabled("job_ready")
    nodeorder = conf.plugin_option("nodeorder")
    assert nodeorder is not None
    assert nodeorder.arguments.int("leastrequested.weight", 1) == 2
    assert nodeorder.arguments.int("mostrequested.weight", 1) == 0
    assert nodeorder.arguments.int("balancedresource.weight", 1) == 1
    binpack = conf.plugin_option("binpack")
    assert binpack is not None
    assert binpack.arguments.list("binpack.resources", []) == ["nvidia.com/gpu", "example.com/foo"]
    assert binpack.arguments.int("binpack.resources.nvidia.com/gpu", 1) == 2
    assert conf.configurations["allocate"].bool("predicateErrorCacheEnable", False) is True


def test_actions_as_a_yaml_list_are_accepted():
    assert parse_conf("actions: [allocate, backfill]\ntiers: []", registry()).actions == [
        "allocate",
        "backfill",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("actions: enqueue, allocate, shuffle\n", "unknown action 'shuffle'"),
        ("actions: allocate\ntiers:\n- plugins:\n  - name: magic\n", "unknown plugin 'magic' in tier 1"),
        (
            "actions: allocate\ntiers:\n- plugins:\n  - name: nodeorder\n    arguments: {leastrequested.weight: heavy}\n",
            "argument 'leastrequested.weight' of plugin 'nodeorder' must be an integer, got 'heavy'",
        ),
        (
            "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n    enablePreemptable: maybe\n",
            "option 'enablePreemptable' of plugin 'gang' must be true or false",
        ),
        (
            "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n    enablePreemptible: false\n",
            "unknown option 'enablePreemptible'",
        ),
        ("actions: allocate\ntiers:\n- plugins:\n  - arguments: {}\n", "tier 1 plugin 1 has no name"),
        (
            "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n  - name: gang\n",
            "plugin 'gang' appears twice",
        ),
        ("actions: [\n", "not valid YAML"),
        ("", "empty"),
        ("- just\n- a list\n", "must be a mapping"),
        ("tiers: []\n", "needs 'actions'"),
        ("actions: ''\n", "lists no actions"),
        ("actions: allocate\ntiers: {plugins: []}\n", "'tiers' must be a list"),
        (
            "actions: allocate\nconfigurations:\n- name: shuffle\n",
            "configuration 1 names an unknown action 'shuffle'",
        ),
        (
            "actions: allocate\nconfigurations:\n- name: allocate\n  arguments: {predicateErrorCacheEnable: sometimes}\n",
            "argument 'predicateErrorCacheEnable' of action 'allocate' must be a boolean",
        ),
        ("actions: allocate\nplugins: []\n", "unknown key 'plugins'"),
    ],
)
def test_invalid_confs_name_what_is_wrong(text, message):
    with pytest.raises(ConfError) as info:
        parse_conf(text, registry())
    assert message in str(info.value)
