"""The conf's ``metrics:`` section: where nodes' real load comes from (read by the ``usage`` plugin).

Volcano reads it as a string map (``MetricsConfiguration map[string]string`` in
pkg/scheduler/conf/scheduler_conf.go, decoded by yaml.v2, which turns any scalar into its text) and
hands it to the cache (``SetMetricsConf``), whose ``GetMetricsData`` builds a client from it every
``interval`` (``source.NewMetricsClient``, pkg/scheduler/metrics/source/metrics_client.go):

- ``type``: ``prometheus`` (``NewPrometheusMetricsClient``: PromQL instant queries at ``address``),
  ``prometheus_adaptor`` (``NewCustomMetricsClient``: ``custom.metrics.k8s.io`` through the API
  server), ``elasticsearch`` (``NewElasticsearchMetricsClient``); Caldera adds ``metrics_server``:
  ``metrics.k8s.io/v1beta1`` NodeMetrics through the API server (metrics-server's API);
- ``address`` (prometheus, elasticsearch), ``interval`` (a Go duration; Volcano: 30s when missing,
  unreadable or not positive), ``tls.insecureSkipVerify`` (``"true"``: the server's certificate is not
  checked), and for elasticsearch ``elasticsearch.index`` (default ``metricbeat-*``),
  ``elasticsearch.username``, ``elasticsearch.password``, ``elasticsearch.hostnameFieldName``
  (default ``host.hostname``).

Where Volcano would start and then log an error every interval (an unknown type, a missing address),
or silently use its default (an unreadable interval) or ignore a setting (an elasticsearch username
without password, or both beside credentials in the address), Caldera refuses the conf saying what is wrong,
so that the last good conf keeps running; a key Volcano does not read is refused too.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from caldera.config.duration import parse_duration

#: ``metrics_client.go``'s type names, and Caldera's own for metrics.k8s.io
PROMETHEUS = "prometheus"
PROMETHEUS_ADAPTOR = "prometheus_adaptor"
ELASTICSEARCH = "elasticsearch"
METRICS_SERVER = "metrics_server"
TYPES = (PROMETHEUS, PROMETHEUS_ADAPTOR, ELASTICSEARCH, METRICS_SERVER)
#: the types that read ``address``
NEEDS_ADDRESS = frozenset({PROMETHEUS, ELASTICSEARCH})
ELASTICSEARCH_KEYS = frozenset(
    {
        "elasticsearch.index",
        "elasticsearch.username",
        "elasticsearch.password",
        "elasticsearch.hostnameFieldName",
    }
)
COMMON_KEYS = frozenset({"type", "address", "interval", "tls.insecureSkipVerify"})
#: ``defaultMetricsInternal`` (pkg/scheduler/cache/cache.go)
DEFAULT_INTERVAL = 30.0


class MetricsConfError(ValueError):
    """A ``metrics:`` section that cannot be used; the message says which key and why."""


@dataclass(frozen=True)
class MetricsConf:
    type: str
    address: str = ""
    #: seconds between polls
    interval: float = DEFAULT_INTERVAL
    insecure_skip_verify: bool = False
    #: every key as given (strings), for the elasticsearch settings and for display
    values: dict[str, str] = field(default_factory=dict)


def _text(key: str, value: Any) -> str:
    """yaml.v2's decoding of a scalar into a string: its text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise MetricsConfError(f"metrics: {key!r} must be a string, got {value!r}")


def _check_credentials(values: dict[str, str], address: str) -> None:
    """go-elasticsearch sends basic auth from the address's user info, else from username and password
    when both are set (``Client.setReqAuth``, estransport): settings it would not send are refused."""
    user, password = values.get("elasticsearch.username", ""), values.get("elasticsearch.password", "")
    if bool(user) != bool(password):
        raise MetricsConfError(
            "metrics: 'elasticsearch.username' and 'elasticsearch.password' go together "
            "(with only one of them no credentials are sent)"
        )
    if user and urllib.parse.urlsplit(address).username is not None:
        raise MetricsConfError(
            "metrics: the 'address' carries credentials, so 'elasticsearch.username' and "
            "'elasticsearch.password' would not be used: give one or the other"
        )


def check_metrics(raw: Any) -> MetricsConf | None:
    """The section checked; None when there is none (nothing to poll)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise MetricsConfError(f"'metrics' must be a mapping of strings, got {type(raw).__name__}")
    values = {str(k): _text(str(k), v) for k, v in raw.items()}
    if not values:
        return None
    kind = values.get("type", "").strip()
    if not kind:
        raise MetricsConfError(
            "metrics: 'type' is missing: without it no load is collected "
            f"(one of {', '.join(TYPES)}; or leave out the 'metrics' section)"
        )
    if kind not in TYPES:
        raise MetricsConfError(f"metrics: unknown type {kind!r} (one of {', '.join(TYPES)})")
    allowed = COMMON_KEYS | (ELASTICSEARCH_KEYS if kind == ELASTICSEARCH else frozenset())
    for key in values:
        if key not in allowed:
            raise MetricsConfError(
                f"metrics: unknown key {key!r} for type {kind} (its keys: {', '.join(sorted(allowed))})"
            )
    address = values.get("address", "").strip()
    if kind in NEEDS_ADDRESS and not address:
        raise MetricsConfError(f"metrics: type {kind} needs an 'address' (Volcano: metrics address is empty)")
    if kind not in NEEDS_ADDRESS and address:
        raise MetricsConfError(f"metrics: type {kind} reads no 'address' (it asks the API server)")
    interval = DEFAULT_INTERVAL
    if "interval" in values:
        try:
            interval = parse_duration(values["interval"])
        except ValueError as exc:
            raise MetricsConfError(f"metrics: 'interval' {exc}") from None
        if interval <= 0:
            raise MetricsConfError(f"metrics: 'interval' must be positive, got {values['interval']!r}")
    if kind == ELASTICSEARCH:
        _check_credentials(values, address)
    skip = values.get("tls.insecureSkipVerify", "false").strip().lower()
    if skip not in ("true", "false"):
        raise MetricsConfError(f"metrics: 'tls.insecureSkipVerify' must be true or false, got {skip!r}")
    return MetricsConf(
        type=kind,
        address=address,
        interval=interval,
        insecure_skip_verify=skip == "true",
        values=values,
    )
