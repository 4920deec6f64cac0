"""What chatops tells operators about itself: the audit stream, metrics, transcripts and logs.

- ``audit``: the audit stream, the story of every run with its actors.
- ``metrics``: Prometheus metrics kept in Redis, shared by every process (the specs and the store).
- ``run_metrics``: what a run records in them (``RunMetrics``), the model wrapper that times answers.
- ``metrics_collector``: their exposition on ``GET /metrics``, plus gauges read at scrape time.
- ``transcript``: a run's transcript for post-mortems, and its Markdown and JSON renderings.
- ``logs``: structured JSON logs with the run's context on every line, secrets redacted.
"""
