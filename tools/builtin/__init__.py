"""The built-in host tools: health (system), logs, cleanup, files, network, services."""

from __future__ import annotations

from typing import Any

from tools.base import FunctionTool
from tools.builtin.cleanup import PlanStore, cleanup_tools
from tools.builtin.files import file_tools
from tools.builtin.logs import log_tools
from tools.builtin.network import network_tools
from tools.builtin.services import make_backend, service_tools
from tools.builtin.system import system_tools
from tools.config import ToolsConfig
from tools.paths import AllowedDirs


def builtin_tools(config: ToolsConfig) -> list[FunctionTool[Any]]:
    """Every built-in tool, configured (log directories, service backend, plan store)."""
    log_dirs = AllowedDirs(config.log_dirs)
    store = PlanStore(config.resolved_state_dir(), config.plan_ttl_seconds)
    backend = make_backend(
        config.service_backend, config.command_env(), config.kube_namespace, config.kube_context
    )
    return [
        *system_tools(),
        *log_tools(log_dirs),
        *cleanup_tools(log_dirs, store),
        *file_tools(),
        *network_tools(),
        *service_tools(backend),
    ]
