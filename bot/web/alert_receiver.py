"""The web process's ``AlertReceiver`` built from the settings (``bot.alerts.receiver``).

Its Redis is the web runtime's (opened lazily per forked process): the receiver resolves it on
each request. The routes file and the inventory's target names are read once, at start-up; a
mistake in either stops the web process with the file, the route and the field named.
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.alerts.receiver import AlertReceiver, Answer
from bot.alerts.routing import load_routes
from bot.alerts.store import AlertStore
from bot.errors import BotConfigurationError, NotReplicatedError
from bot.observability.metrics import RunMetrics
from bot.runs.queueing import alerts_queue_name, worker_queue
from bot.slack.handlers.runtime import WebRuntime
from tools.errors import ToolConfigError
from tools.inventory import SshDefaults, load_inventory


class WebAlerts:
    """The receiver on the web runtime's per-process Redis."""

    def __init__(self, runtime: WebRuntime) -> None:
        settings = runtime.settings
        self._runtime = runtime
        self._routes = load_routes(settings.chatops_alerts_file)
        try:
            defaults = SshDefaults(
                settings.chatops_ssh_user or None,
                settings.chatops_ssh_key_file,
                settings.chatops_ssh_known_hosts,
            )
            inventory = load_inventory(settings.chatops_inventory_file, ssh_defaults=defaults)
        except ToolConfigError as error:
            raise BotConfigurationError(str(error)) from error
        self._targets = () if inventory.implicit else inventory.names()
        self._token = settings.chatops_alerts_token
        self._secrets = tuple(settings.chatops_pagerduty_secret)
        self._cached: tuple[object, AlertReceiver] | None = None

    def receive(self, path: str, headers: Mapping[str, str], body: bytes) -> Answer:
        """The receiver's answer; a 2xx only once a replica has what it stored (behind sentinels:
        ``bot.runs.replication``), else a 503 the sender retries."""
        answer = self._receiver().receive(path, headers, body)
        if 200 <= answer.status < 300:
            try:
                self._runtime.replication().confirm()
            except NotReplicatedError as error:
                return Answer(503, f"stored, not yet on a replica ({error.what}); retry later")
        return answer

    def _receiver(self) -> AlertReceiver:
        """One per process and Redis connection (the web runtime opens Redis after the fork)."""
        client = self._runtime.redis()
        cached = self._cached
        if cached is not None and cached[0] is client:
            return cached[1]
        receiver = AlertReceiver(
            AlertStore(client, self._runtime.keys, self._runtime.redact),
            worker_queue(alerts_queue_name(self._runtime.settings.chatops_queue), client),
            self._routes,
            self._token,
            self._secrets,
            self._targets,
            RunMetrics.for_redis(
                client, self._runtime.keys, enabled=self._runtime.settings.chatops_metrics_enabled
            ),
        )
        self._cached = (client, receiver)
        return receiver


def alert_receiver(runtime: WebRuntime) -> WebAlerts:
    return WebAlerts(runtime)
