"""The typed scheduler conf, as the framework reads it (defined in ``config.model``)."""

from caldera.config.model import SWITCH_KEYS, SWITCHES, PluginOption, SchedulerConf, Tier

__all__ = ["SWITCHES", "SWITCH_KEYS", "PluginOption", "SchedulerConf", "Tier"]
