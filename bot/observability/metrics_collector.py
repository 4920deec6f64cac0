"""``GET /metrics`` of the web process: the metrics workers keep in Redis, plus gauges read at scrape time.

``RedisCollector`` turns the hashes of ``bot.observability.metrics`` into Prometheus counter and histogram
families, and adds what is read live, per queue (the runs' and the alerts'): the RQ queue's depth and its oldest job's age, jobs by
registry (scheduled, started, deferred, failed), workers listening, active runs by status, and
``chatops_redis_up`` (0 when Redis could not be read; the scrape itself still answers 200, so
Prometheus sees the web process up and Redis down).

``MetricsEndpoint`` is the WSGI piece ``bot.web.server.WebApp`` mounts; with
``CHATOPS_METRICS_TOKEN`` set it answers 401 without ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC
from typing import Any

import redis
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector, CollectorRegistry
from rq import Queue, Worker
from rq.exceptions import NoSuchJobError
from rq.job import Job

from bot.keys import Keys
from bot.observability.metrics import SPECS, MetricsStore, Spec

log = logging.getLogger(__name__)

StartResponse = Callable[..., Any]


def counter_family(spec: Spec, values: dict[str, str]) -> CounterMetricFamily:
    family = CounterMetricFamily(spec.name, spec.help, labels=spec.labels)
    for field, value in sorted(values.items()):
        family.add_metric(json.loads(field), float(value))
    return family


def histogram_family(spec: Spec, values: dict[str, str]) -> HistogramMetricFamily:
    family = HistogramMetricFamily(spec.name, spec.help, labels=spec.labels)
    series: dict[str, dict[str, float]] = {}
    for field, value in values.items():
        labels, _, part = field.rpartition("\t")
        series.setdefault(labels, {})[part] = float(value)
    for labels, parts in sorted(series.items()):
        cumulative, buckets = 0.0, []
        for index, bound in enumerate(spec.buckets):
            cumulative += parts.get(str(index), 0.0)
            buckets.append((repr(float(bound)), cumulative))
        buckets.append(("+Inf", parts.get("count", 0.0)))
        family.add_metric(json.loads(labels), buckets, parts.get("sum", 0.0))
    return family


ActiveRuns = Callable[[redis.Redis], Mapping[str, int]]
"""How many runs are active, by status (every active status present, zeros included): the run
engine's records answer it (``bot.runs.record.active_runs_by_status``), handed in by the web process."""


def _no_runs(client: redis.Redis) -> Mapping[str, int]:
    return {}


class RedisCollector(Collector):
    """Reads every metric at scrape time; ``redis_client`` is called per scrape (per-process clients).
    ``queue_names``: the RQ queues the workers listen on (``bot.runs.queueing.worker_queue_names``)."""

    def __init__(
        self,
        redis_client: Callable[[], redis.Redis],
        keys: Keys,
        queue_names: Sequence[str],
        active_runs: ActiveRuns = _no_runs,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._redis = redis_client
        self._keys = keys
        self._queue_names = list(queue_names)
        self._active = active_runs
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("chatops_redis_up", "1 when this scrape could read Redis, else 0.")
        try:
            client = self._redis()
            stored = MetricsStore(client, self._keys).read()
            live = list(self._live(client))
        except redis.RedisError as error:
            log.warning("metrics scrape could not read Redis: %s", error)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        for spec in SPECS:
            values = stored[spec]
            yield counter_family(spec, values) if spec.kind == "counter" else histogram_family(spec, values)
        yield from live

    def _live(self, client: redis.Redis) -> Iterable[Metric]:
        depth = GaugeMetricFamily("chatops_queue_depth", "Jobs waiting in the RQ queue.", labels=["queue"])
        oldest = GaugeMetricFamily(
            "chatops_queue_oldest_age_seconds",
            "Seconds the oldest waiting job has been in the queue (0 when empty).",
            labels=["queue"],
        )
        jobs = GaugeMetricFamily(
            "chatops_queue_jobs", "Jobs in the queue's RQ registries.", labels=["queue", "state"]
        )
        workers = GaugeMetricFamily("chatops_workers", "RQ workers listening on the queue.", labels=["queue"])
        for name in self._queue_names:  # the alerts' queue and the runs'
            queue = Queue(name, connection=client)
            depth.add_metric([name], queue.count)
            oldest.add_metric([name], self._oldest_age(queue))
            for state, registry in (
                ("scheduled", queue.scheduled_job_registry),
                ("started", queue.started_job_registry),
                ("deferred", queue.deferred_job_registry),
                ("failed", queue.failed_job_registry),
            ):
                jobs.add_metric([name, state], registry.get_job_count(cleanup=False))
            workers.add_metric([name], Worker.count(connection=client, queue=queue))
        return [depth, oldest, jobs, workers, self._active_runs(client)]

    def _oldest_age(self, queue: Queue) -> float:
        for job_id in queue.get_job_ids(0, 1):
            try:
                enqueued = Job.fetch(job_id, connection=queue.connection).enqueued_at
            except NoSuchJobError:
                return 0.0
            if enqueued is not None:
                stamp = enqueued if enqueued.tzinfo else enqueued.replace(tzinfo=UTC)
                return max(0.0, self._clock() - stamp.timestamp())
        return 0.0

    def _active_runs(self, client: redis.Redis) -> GaugeMetricFamily:
        family = GaugeMetricFamily(
            "chatops_runs_active", "Runs not finished yet, by status.", labels=["status"]
        )
        for status, count in sorted(self._active(client).items()):
            family.add_metric([status], count)
        return family


class MetricsEndpoint:
    """WSGI for ``GET /metrics`` (text format, or OpenMetrics when the scraper asks for it)."""

    def __init__(self, collector: Collector, *, token: str = "", enabled: bool = True) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self._token = token
        self._enabled = enabled

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if not self._enabled:
            return _plain(
                start_response, "404 Not Found", "metrics are off (CHATOPS_METRICS_ENABLED=false)\n"
            )
        if self._token and not hmac.compare_digest(
            environ.get("HTTP_AUTHORIZATION", "").encode(), f"Bearer {self._token}".encode()
        ):
            return _plain(
                start_response, "401 Unauthorized", "send Authorization: Bearer <CHATOPS_METRICS_TOKEN>\n"
            )
        encoder, content_type = choose_encoder(environ.get("HTTP_ACCEPT", ""))
        body = encoder(self.registry)
        start_response("200 OK", [("Content-Type", content_type), ("Content-Length", str(len(body)))])
        return [] if environ.get("REQUEST_METHOD") == "HEAD" else [body]


def _plain(start_response: StartResponse, status: str, text: str) -> list[bytes]:
    body = text.encode()
    start_response(
        status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
    )
    return [body]
