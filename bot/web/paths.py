"""The paths the web process answers: ``bot.web.server`` routes them all; Socket Mode's small
health server (``bot.web.socket_mode``) answers the health path only."""

from __future__ import annotations

EVENTS_PATH = "/slack/events"
HEALTH_PATH = "/healthz"
METRICS_PATH = "/metrics"  # Prometheus; see bot.observability.metrics_collector and docs/OPERATIONS.md
ALERTS_PREFIX = "/alerts/"  # Alertmanager, Grafana and PagerDuty webhooks (bot.alerts.receiver)
CHANGES_PATH = "/changes"  # deploy markers: ours, /github, /argocd (bot.web.change_receiver)
