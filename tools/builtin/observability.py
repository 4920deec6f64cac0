"""The observability tools: Prometheus and Alertmanager, offered when their URLs are configured.

* ``prometheus_query`` (read-only, parallel): ``GET /api/v1/query``;
* ``prometheus_range`` (read-only, parallel): ``GET /api/v1/query_range``;
* ``alertmanager_alerts`` (read-only, parallel): ``GET /api/v2/alerts``;
* ``alertmanager_silence`` (mutating: a card; ``createdBy`` is the approver): ``POST /api/v2/silences``.

With ``CHATOPS_PROMETHEUS_URL`` (``CHATOPS_ALERTMANAGER_URL``) empty, that service's tools are not
offered at all. Each service is one ``Endpoint`` (``observability_endpoint``): the configured base
URL is the only place its tools can reach, whatever ``CHATOPS_EGRESS_ALLOW`` says, because the
model supplies queries and matchers, never URLs. The header values (``${ENV_NAME}`` references
allowed) are secrets: every result and card of these tools is redacted with them, the settings
count them among the bot's own secrets (``bot.settings``: the run's redactor, commands' hidden
variables), and ``secret_values`` lists them for a registry built in code.

The pieces: ``prometheus`` (the two PromQL tools and their summaries), ``alertmanager`` (the alert
lines, the silence and its card), ``alertmanager_matchers`` (the matcher grammar),
``observability_endpoint`` (the bounded requests, salvaging a cut answer, writing label sets).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tools.base import FunctionTool
from tools.builtin.alertmanager import alertmanager_tools
from tools.builtin.observability_endpoint import Endpoint, configure_endpoint, secret_parts
from tools.builtin.prometheus import prometheus_tools
from tools.egress import EgressPolicy

PROMETHEUS_URL_SETTING = "CHATOPS_PROMETHEUS_URL"
ALERTMANAGER_URL_SETTING = "CHATOPS_ALERTMANAGER_URL"


def observability_endpoints(
    *,
    prometheus_url: str,
    prometheus_headers: Mapping[str, str],
    alertmanager_url: str,
    alertmanager_headers: Mapping[str, str],
    env: Mapping[str, str],
    egress: EgressPolicy,
) -> tuple[Endpoint | None, Endpoint | None]:
    """The Prometheus and Alertmanager endpoints (``None``: not configured); raises
    ``ToolConfigError`` for a bad URL, a bad header name or an unset ``${NAME}``."""
    prometheus = configure_endpoint(
        "Prometheus", PROMETHEUS_URL_SETTING, prometheus_url, prometheus_headers, env=env, egress=egress
    )
    alertmanager = configure_endpoint(
        "Alertmanager",
        ALERTMANAGER_URL_SETTING,
        alertmanager_url,
        alertmanager_headers,
        env=env,
        egress=egress,
    )
    return prometheus, alertmanager


def observability_tools(
    prometheus: Endpoint | None, alertmanager: Endpoint | None
) -> list[FunctionTool[Any]]:
    """The tools of the configured services (none for a service without a URL)."""
    tools: list[FunctionTool[Any]] = []
    if prometheus is not None:
        tools.extend(prometheus_tools(prometheus))
    if alertmanager is not None:
        tools.extend(alertmanager_tools(alertmanager))
    return tools


def secret_values(*endpoints: Endpoint | None) -> list[str]:
    """The header values the endpoints send (and their credentials alone): redacted from every output."""
    return secret_parts(
        value for endpoint in endpoints if endpoint is not None for value in endpoint.headers.values()
    )
