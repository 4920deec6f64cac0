"""The built-in tools: health (system), logs, cleanup, files, network, services, and Prometheus and
Alertmanager when their URLs are configured (observability)."""

from __future__ import annotations

from typing import Any

from tools.base import FunctionTool
from tools.builtin.cleanup import cleanup_tools
from tools.builtin.files import file_tools
from tools.builtin.logs import log_tools
from tools.builtin.network import network_tools
from tools.builtin.observability import observability_endpoints, observability_tools
from tools.builtin.services import make_backend, service_tools
from tools.builtin.system import system_tools
from tools.config import ToolsConfig
from tools.egress import EgressPolicy
from tools.paths import AllowedDirs


def builtin_tools(config: ToolsConfig, egress: EgressPolicy | None = None) -> list[FunctionTool[Any]]:
    """Every built-in tool, configured (log directories, service backend, plan lifetime, the
    Prometheus and Alertmanager endpoints); ``ToolConfigError`` for a bad endpoint setting."""
    policy = egress or config.egress_policy()
    prometheus, alertmanager = observability_endpoints(
        prometheus_url=config.prometheus_url,
        prometheus_headers=config.prometheus_headers,
        alertmanager_url=config.alertmanager_url,
        alertmanager_headers=config.alertmanager_headers,
        env=config.environment(),
        egress=policy,
    )
    log_dirs = AllowedDirs(config.log_dirs)
    backend = make_backend(
        config.service_backend, config.command_env(), config.kube_namespace, config.kube_context
    )
    return [
        *system_tools(),
        *log_tools(log_dirs),
        *cleanup_tools(log_dirs, config.plan_ttl_seconds),
        *file_tools(),
        *network_tools(policy),
        *service_tools(backend),
        *observability_tools(prometheus, alertmanager),
    ]
