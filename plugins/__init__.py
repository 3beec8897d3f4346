"""Plugins: scheduling policy registered on a session. ``ALL`` lists the built-ins for the registry.

Plugins never touch the API; what the binary should publish they leave in the session's typed
``ssn.report`` (``framework.result.SessionReport``: events, queue shares, scaled guarantees, ...).
A cache a plugin builds for the session lives on the plugin object (plugins are built per session),
or, when several plugins share it, in ``ssn.memo(key, build)`` keyed by an object of their own.
"""

from caldera.framework.plugin import Plugin
from caldera.plugins.binpack import BinpackPlugin
from caldera.plugins.capacity import CapacityPlugin
from caldera.plugins.cdp import CdpPlugin
from caldera.plugins.conformance import ConformancePlugin
from caldera.plugins.deviceshare import DeviceSharePlugin
from caldera.plugins.drf import DrfPlugin
from caldera.plugins.extender import ExtenderPlugin
from caldera.plugins.gang import GangPlugin
from caldera.plugins.network_topology_aware import NetworkTopologyAwarePlugin
from caldera.plugins.nodegroup import NodeGroupPlugin
from caldera.plugins.nodeorder import NodeOrderPlugin
from caldera.plugins.numaaware import NumaAwarePlugin
from caldera.plugins.overcommit import OvercommitPlugin
from caldera.plugins.pdb import PdbPlugin
from caldera.plugins.predicates import PredicatesPlugin
from caldera.plugins.priority import PriorityPlugin
from caldera.plugins.proportion import ProportionPlugin
from caldera.plugins.rescheduling import ReschedulingPlugin
from caldera.plugins.resource_strategy_fit import ResourceStrategyFitPlugin
from caldera.plugins.resourcequota import ResourceQuotaPlugin
from caldera.plugins.sla import SlaPlugin
from caldera.plugins.task_topology import TaskTopologyPlugin
from caldera.plugins.tdm import TdmPlugin
from caldera.plugins.usage import UsagePlugin

ALL: list[type[Plugin]] = [
    PriorityPlugin,
    GangPlugin,
    ConformancePlugin,
    DrfPlugin,
    ProportionPlugin,
    PredicatesPlugin,
    NodeOrderPlugin,
    PdbPlugin,
    BinpackPlugin,
    OvercommitPlugin,
    CapacityPlugin,
    SlaPlugin,
    DeviceSharePlugin,
    NetworkTopologyAwarePlugin,
    NodeGroupPlugin,
    ResourceStrategyFitPlugin,
    CdpPlugin,
    TaskTopologyPlugin,
    ResourceQuotaPlugin,
    ExtenderPlugin,
    UsagePlugin,
    NumaAwarePlugin,
    TdmPlugin,
    ReschedulingPlugin,
]
