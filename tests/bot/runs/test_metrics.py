"""``GET /metrics``: what workers count in Redis, as the web process serves it to Prometheus.

Runs are scripted (plan model, file tools) and worked in-process or by real ``chatops worker``
subprocesses; every test scrapes the real WSGI app over HTTP and reads the exposition text
with prometheus_client's own parser.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families
from rq import Worker
from slack_sdk.errors import SlackApiError

from agent.redis_memory import RedisMemory
from agent.types import RunStatus
from bot.keys import Keys
from bot.observability.metrics import APPROVAL_WAIT, RUNS_STARTED, TOOL_DURATION, MetricsStore
from bot.observability.metrics_collector import MetricsEndpoint, RedisCollector
from bot.ops.compose_web import web_app, web_runtime
from bot.runs.queueing import alerts_queue_name
from bot.runs.service import RunService
from bot.settings import Settings
from bot.slack.delivery.client import make_client
from emulator.models.openai_server import OpenAIServer, Reply, ScriptedUsage
from emulator.slack import SlackEmulator, WorkspaceConfig
from tests.support.harness import Harness, make_options
from tests.support.slack_http import http
from tests.support.waiting import wait_until
from tests.support.web_server import WebServer
from tests.support.worker_process import WorkerProcess

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def web_settings(redis_url: str, key_prefix: str, queue_name: str, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "slack_bot_token": "xoxb-metrics-test",
        "slack_signing_secret": "metrics-secret",
        "slack_api_url": "http://127.0.0.1:9/api/",
        "redis_url": redis_url,
        "chatops_redis_prefix": key_prefix,
        "chatops_queue": queue_name,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[arg-type]


@pytest.fixture
def serve_web(redis_url: str, key_prefix: str, queue_name: str) -> Iterator[Callable[..., str]]:
    """``serve_web(**settings)``: the web app on a free port; returns its base URL."""
    servers: list[WebServer] = []

    def start(**overrides: object) -> str:
        servers.append(
            WebServer(web_app(web_runtime(web_settings(redis_url, key_prefix, queue_name, **overrides))))
        )
        return servers[-1].url

    yield start
    for server in servers:
        server.close()


def scrape(base_url: str) -> Samples:
    answer = http(f"{base_url}/metrics")
    assert answer.status == 200, answer.body
    samples: Samples = {}
    for family in text_string_to_metric_families(answer.body.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_a_run_with_tools_an_approval_and_a_reply_moves_every_run_metric(
    harness: Harness, serve_web: Callable[..., str]
) -> None:
    url = serve_web()
    before = scrape(url)
    assert value(before, "chatops_redis_up") == 1
    assert value(before, "chatops_runs_started_total") == 0

    run_id = harness.submit("plan: check_health restart_service")
    harness.work()
    waiting = scrape(url)
    assert value(waiting, "chatops_runs_started_total") == 1
    assert value(waiting, "chatops_runs_active", status="awaiting_approval") == 1
    assert value(waiting, "chatops_approvals_requested_total", category="mutating") == 1
    assert value(waiting, "chatops_tool_calls_total", tool="check_health", outcome="ok") == 1
    assert value(waiting, "chatops_tool_duration_seconds_count", tool="check_health") == 1
    assert value(waiting, "chatops_queue_jobs", queue=harness.options.queue_name, state="scheduled") == 1
    assert value(waiting, "chatops_runs_finished_total", status="completed") == 0

    (approval,) = harness.service.approvals.for_run(run_id)
    harness.service.lifecycle.decide(approval.id, user="U_APPROVER", approve=True)
    harness.service.deliver("C1", "100.1", user="U_ALICE", text="also look at the disk", ts="100.5")
    assert value(scrape(url), "chatops_queue_depth", queue=harness.options.queue_name) == 1
    harness.work()

    assert harness.status(run_id) is RunStatus.COMPLETED
    done = scrape(url)
    assert value(done, "chatops_runs_started_total") == 1  # a resumed run is not a new one
    assert value(done, "chatops_runs_finished_total", status="completed") == 1
    assert value(done, "chatops_runs_active", status="awaiting_approval") == 0
    assert value(done, "chatops_run_iterations_count") == 1
    assert value(done, "chatops_run_iterations_sum") == 3  # two tool turns and the answer
    assert value(done, "chatops_run_iterations_bucket", le="2.0") == 0
    assert value(done, "chatops_run_iterations_bucket", le="3.0") == 1
    assert value(done, "chatops_tool_calls_total", tool="restart_service", outcome="ok") == 1
    assert value(done, "chatops_approvals_decided_total", decision="approved") == 1
    assert value(done, "chatops_approval_wait_seconds_count", decision="approved") == 1
    assert value(done, "chatops_approval_wait_seconds_bucket", decision="approved", le="+Inf") == 1
    assert value(done, "chatops_messages_injected_total") == 1
    assert value(done, "chatops_llm_request_duration_seconds_count", model="plan", outcome="ok") == 3
    state = RedisMemory(harness.redis, harness.keys, run_id).load_state()
    assert state is not None
    assert (
        value(done, "chatops_llm_tokens_total", model="plan", kind="prompt") == state.usage.prompt_tokens > 0
    )
    assert (
        value(done, "chatops_llm_tokens_total", model="plan", kind="completion")
        == state.usage.completion_tokens
    )


def test_a_declined_call_counts_as_refused_and_declined(
    harness: Harness, serve_web: Callable[..., str]
) -> None:
    url = serve_web()
    run_id = harness.submit("plan: restart_service")
    harness.work()
    (approval,) = harness.service.approvals.for_run(run_id)
    harness.service.lifecycle.decide(
        approval.id, user="U_APPROVER", approve=False, reason="not during the freeze"
    )
    harness.work()
    samples = scrape(url)
    assert value(samples, "chatops_approvals_decided_total", decision="declined") == 1
    assert value(samples, "chatops_tool_calls_total", tool="restart_service", outcome="refused") == 1
    assert value(samples, "chatops_tool_duration_seconds_count", tool="restart_service") == 0  # nothing ran
    assert harness.executions("restart_service") == []


@pytest.mark.slow
def test_worker_subprocesses_count_into_the_same_metrics(
    redis_client: redis.Redis,
    keys: Keys,
    queue_name: str,
    worker_processes: Callable[..., WorkerProcess],
    serve_web: Callable[..., str],
) -> None:
    url = serve_web()
    worker_processes()
    worker_processes()
    service = RunService(redis_client, keys, make_options(queue_name))
    runs = [
        service.submit("C1", f"{n}.1", requester="U_REQ", text="plan: check_health").run_id for n in range(3)
    ]

    def finished() -> bool:
        return all((r := service.get(run_id)) is not None and r.status.terminal for run_id in runs)

    wait_until(finished, timeout=60, what="three runs on the worker subprocesses")
    wait_until(lambda: Worker.count(connection=redis_client, queue=service.queue) == 2, what="both workers")
    # A run's status is terminal before its job reports it (the finish is counted in the report).
    wait_until(
        lambda: value(scrape(url), "chatops_runs_finished_total", status="completed") == 3,
        what="the runs' finishes counted",
    )
    samples = scrape(url)
    assert value(samples, "chatops_runs_started_total") == 3
    assert value(samples, "chatops_runs_finished_total", status="completed") == 3
    assert value(samples, "chatops_tool_calls_total", tool="check_health", outcome="ok") == 3
    assert value(samples, "chatops_tool_duration_seconds_count", tool="check_health") == 3
    assert value(samples, "chatops_llm_request_duration_seconds_count", model="plan", outcome="ok") == 6
    assert value(samples, "chatops_workers", queue=queue_name) == 2
    assert value(samples, "chatops_queue_depth", queue=queue_name) == 0
    # The alerts' queue has its own gauges: the same workers take it first.
    assert value(samples, "chatops_workers", queue=alerts_queue_name(queue_name)) == 2
    assert value(samples, "chatops_queue_depth", queue=alerts_queue_name(queue_name)) == 0


@pytest.mark.slow
def test_llm_retries_and_tokens_from_the_production_runtime_in_a_worker_subprocess(
    redis_client: redis.Redis,
    keys: Keys,
    queue_name: str,
    worker_processes: Callable[..., WorkerProcess],
    serve_web: Callable[..., str],
) -> None:
    with OpenAIServer(model="gpt-test") as llm:
        llm.enqueue(
            Reply.rate_limited(retry_after=0),
            Reply(text="All services are healthy.", usage=ScriptedUsage(120, 15, cached_tokens=80)),
        )
        url = serve_web()
        worker_processes(
            CHATOPS_RUNTIME="bot.ops.worker:default_runtime",
            LLM_BASE_URL=llm.url,
            LLM_MODEL="gpt-test",
            LLM_API_KEY="sk-test",
            SLACK_BOT_TOKEN="",
        )
        service = RunService(redis_client, keys, make_options(queue_name))
        run_id = service.submit("C1", "9.1", requester="U_REQ", text="is everything fine?").run_id
        wait_until(
            lambda: (r := service.get(run_id)) is not None and r.status.terminal, timeout=60, what="the run"
        )
    assert service.history(run_id)[-1].content == "All services are healthy."
    samples = scrape(url)
    assert value(samples, "chatops_llm_retries_total", model="gpt-test", reason="rate_limited") == 1
    assert value(samples, "chatops_llm_request_duration_seconds_count", model="gpt-test", outcome="ok") == 1
    assert value(samples, "chatops_llm_tokens_total", model="gpt-test", kind="prompt") == 120
    assert value(samples, "chatops_llm_tokens_total", model="gpt-test", kind="completion") == 15
    assert value(samples, "chatops_llm_tokens_total", model="gpt-test", kind="cache_read") == 80


def test_slack_api_errors_are_counted_by_method_and_error(
    redis_url: str, key_prefix: str, queue_name: str, serve_web: Callable[..., str]
) -> None:
    with SlackEmulator(WorkspaceConfig(bot_token="xoxb-t")) as slack:
        settings = web_settings(
            redis_url, key_prefix, queue_name, slack_bot_token="xoxb-t", slack_api_url=slack.api_url
        )
        client = make_client(settings, retries=False)
        client.chat_postMessage(channel="C_INCIDENT", text="fine")
        for _ in range(2):
            with pytest.raises(SlackApiError):
                client.chat_postMessage(channel="C_NOWHERE", text="lost")
    samples = scrape(serve_web())
    assert (
        value(samples, "chatops_slack_api_errors_total", method="chat.postMessage", error="channel_not_found")
        == 2
    )
    assert sum(v for (name, _), v in samples.items() if name == "chatops_slack_api_errors_total") == 2


def test_histogram_buckets_are_cumulative_and_label_sets_stay_apart(
    redis_client: redis.Redis, keys: Keys, queue_name: str, serve_web: Callable[..., str]
) -> None:
    store = MetricsStore(redis_client, keys)
    for seconds in (0.01, 0.3, 0.3, 7.0, 1000.0):
        store.observe(TOOL_DURATION, seconds, tool="disk_usage")
    store.observe(TOOL_DURATION, 0.01, tool="tail_log")
    store.observe(APPROVAL_WAIT, 42.0, decision="expired")
    store.inc(RUNS_STARTED, 2)
    samples = scrape(serve_web())
    buckets = {
        le: value(samples, "chatops_tool_duration_seconds_bucket", tool="disk_usage", le=le)
        for le in ("0.05", "0.5", "10.0", "300.0", "+Inf")
    }
    assert buckets == {"0.05": 1, "0.5": 3, "10.0": 4, "300.0": 4, "+Inf": 5}
    assert value(samples, "chatops_tool_duration_seconds_sum", tool="disk_usage") == pytest.approx(1007.61)
    assert value(samples, "chatops_tool_duration_seconds_count", tool="tail_log") == 1
    assert value(samples, "chatops_approval_wait_seconds_bucket", decision="expired", le="30.0") == 0
    assert value(samples, "chatops_approval_wait_seconds_bucket", decision="expired", le="60.0") == 1
    assert value(samples, "chatops_runs_started_total") == 2


def test_the_metrics_token_is_required_when_set(serve_web: Callable[..., str]) -> None:
    url = serve_web(chatops_metrics_token="scrape-me")
    assert http(f"{url}/metrics").status == 401
    assert http(f"{url}/metrics", headers={"Authorization": "Bearer wrong"}).status == 401
    answer = http(f"{url}/metrics", headers={"Authorization": "Bearer scrape-me"})
    assert answer.status == 200 and b"chatops_redis_up 1.0" in answer.body


def test_metrics_can_be_turned_off(serve_web: Callable[..., str]) -> None:
    answer = http(f"{serve_web(chatops_metrics_enabled=False)}/metrics")
    assert answer.status == 404 and b"CHATOPS_METRICS_ENABLED" in answer.body


def test_a_scrape_while_redis_is_down_still_answers_and_says_so(tmp_path: Path, keys: Keys) -> None:
    down = redis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.5)
    endpoint = MetricsEndpoint(RedisCollector(lambda: down, keys, ["q"]))
    statuses: list[str] = []
    body = b"".join(endpoint({"REQUEST_METHOD": "GET"}, lambda status, headers: statuses.append(status)))
    assert statuses == ["200 OK"]
    assert b"chatops_redis_up 0.0" in body
    assert b"chatops_runs_started_total" not in body  # no numbers rather than wrong zeros
