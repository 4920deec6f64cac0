"""Alerts from monitoring: webhook bodies parsed, their senders authenticated, each routed to a channel.

The pure half, with no I/O beyond reading the routes file:

* ``payloads``: Alertmanager's (version 4) and Grafana's webhook bodies become a neutral, frozen
  ``Notification`` of ``Alert``s; a malformed one raises ``AlertPayloadError``, the 400 reason;
* ``pagerduty``: the same for a PagerDuty V3 webhook (one incident event);
* ``auth``: the bearer token of Alertmanager and Grafana, the HMAC signature of PagerDuty;
* ``tools.alert_matchers``: Alertmanager's label matcher syntax, regexes on RE2 (shared with the
  model's alert filters);
* ``routing``: ``CHATOPS_ALERTS_FILE``, which route (channel, auto or button, target) an
  alert takes.

The I/O half: ``receiver`` (the webhook route's logic), ``replay`` (a delivery claimed once),
``store`` (the alerts' Redis records), ``threads`` (one thread per alert group), ``jobs`` (the
worker job), ``presenter`` (the seam to the chat transport; Slack's is
``bot.slack.delivery.alert_presenter``).

Nothing here imports ``bot.slack``, ``bot.web`` or ``bot.ops``.
"""

from bot.alerts.auth import bearer_ok, pagerduty_signature_ok
from bot.alerts.pagerduty import parse_pagerduty
from bot.alerts.payloads import Alert, Notification, parse_alertmanager, parse_grafana
from bot.alerts.routing import AlertRoutes, Route, StormLimit, load_routes
from tools.alert_matchers import Matcher, parse_matcher, parse_matchers

__all__ = [
    "Alert",
    "AlertRoutes",
    "Matcher",
    "Notification",
    "Route",
    "StormLimit",
    "bearer_ok",
    "load_routes",
    "pagerduty_signature_ok",
    "parse_alertmanager",
    "parse_grafana",
    "parse_matcher",
    "parse_matchers",
    "parse_pagerduty",
]
