"""The web process: the HTTP server Slack, Alertmanager and Prometheus talk to.

- ``server``: the WSGI app and its routes (``POST /slack/events``, the alert webhooks, ``GET /healthz``,
  ``GET /metrics``) and ``chatops web``'s serve.
- ``http_server``: the HTTP/1.1 server (whole requests read on an event loop, then handed to the app).
- ``wsgi``: the PEP 3333 bridge between the two.
- ``paths``: the paths it answers.
- ``prefork``: one listening socket, ``WEB_WORKERS`` forked children serving it.
- ``socket_mode``: the same Bolt app over Slack's Socket Mode instead of HTTP.
- ``alert_receiver``: the alert webhook route (``bot.alerts.receiver``) as the web process serves it.
"""
