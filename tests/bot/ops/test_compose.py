"""The composition root (``bot.ops.compose``): what it builds has the alerts' typed seams, and a
custom runtime (``CHATOPS_RUNTIME``) without them stops ``chatops worker`` at start, naming what
is missing, instead of sending every alert thread to the log."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from rq.job import JobStatus

from bot.alerts import jobs as alert_jobs
from bot.alerts.jobs import AlertJobs
from bot.alerts.presenter import LoggingAlertPresenter
from bot.keys import Keys
from bot.ops.cli import CONFIGURATION_ERROR, EXIT_CONFIGURATION
from bot.ops.compose import default_runtime
from bot.ops.compose_web import web_runtime
from bot.runs.presenter import InMemoryPresenter
from bot.runs.queueing import NOTIFICATION_JOB, WORKER_FUNCTIONS, NotificationQueue, fetch_worker_job
from bot.runs.runtime import Runtime
from bot.runs.worker import ChatopsSimpleWorker
from bot.settings import Settings
from tests.support.harness import make_options

ROOT = Path(__file__).resolve().parents[3]


def chatops_worker(
    redis_url: str, key_prefix: str, queue_name: str, runtime: str, **settings: str
) -> subprocess.CompletedProcess[str]:
    """``chatops worker --burst`` with ``CHATOPS_RUNTIME=runtime`` (and ``settings``), as an operator starts it."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("CHATOPS_", "SLACK_", "REDIS_", "LLM_"))
    }
    env.update(
        PYTHONPATH=str(ROOT),
        REDIS_URL=redis_url,
        CHATOPS_REDIS_PREFIX=key_prefix,
        CHATOPS_QUEUE=queue_name,
        CHATOPS_RUNTIME=runtime,
        **settings,
    )
    return subprocess.run(
        [str(ROOT / ".venv/bin/chatops"), "--env-file", os.devnull, "worker", "--burst", "--simple"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )


@pytest.mark.parametrize(
    ("factory", "named"),
    [
        ("without_alerts", "the runtime it builds has no alert seam (Runtime.alerts)"),
        ("with_half_a_presenter", "its alert presenter (RootsOnly) has no post_alert_note"),
        ("with_a_disguised_seam", "its alert seam (Disguised) has no run_answered"),
    ],
)
def test_a_custom_runtime_without_the_alerts_seam_stops_the_worker_at_start(
    redis_url: str, key_prefix: str, queue_name: str, factory: str, named: str
) -> None:
    path = f"tests.bot.ops.partial_runtimes:{factory}"
    done = chatops_worker(redis_url, key_prefix, queue_name, path)
    assert done.returncode == EXIT_CONFIGURATION, done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith(CONFIGURATION_ERROR)]
    assert line.startswith(f"{CONFIGURATION_ERROR}CHATOPS_RUNTIME={path}: {named}"), line
    assert "fix: give its Runtime alerts=bot.alerts.jobs.AlertJobs(presenter)" in line
    assert "Listening on" not in done.stderr  # refused before the worker took anything


def test_the_same_runtime_with_the_seam_starts(redis_url: str, key_prefix: str, queue_name: str) -> None:
    done = chatops_worker(redis_url, key_prefix, queue_name, "tests.bot.ops.partial_runtimes:whole")
    assert done.returncode == 0, done.stderr
    assert f"Listening on {queue_name}.alerts" in done.stderr


def test_the_roots_runtime_shows_alert_threads_in_the_log_without_a_slack_token(redis_url: str) -> None:
    runtime = default_runtime(Settings(_env_file=None, redis_url=redis_url))  # type: ignore[call-arg]
    try:
        assert isinstance(runtime.alerts, AlertJobs)
        assert isinstance(runtime.alerts.presenter, LoggingAlertPresenter)
    finally:
        runtime.close()


def test_a_worker_loads_neither_bolt_nor_the_web_server() -> None:
    """The root's worker half imports none of the web process (its web half does)."""
    code = (
        "import sys, bot.ops.worker\n"
        "loaded = [m for m in sys.modules if m.startswith(('slack_bolt', 'bot.web', 'bot.slack.handlers'))]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_alerts_job_is_named_by_its_import_path_on_the_workers_allow_list() -> None:
    module, _, name = NOTIFICATION_JOB.rpartition(".")
    assert module == alert_jobs.__name__ and getattr(alert_jobs, name) is alert_jobs.handle_notification
    assert NOTIFICATION_JOB in WORKER_FUNCTIONS


def test_an_alert_job_on_a_runtime_without_the_seam_fails_loudly(
    redis_client: redis.Redis, keys: Keys, queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker built in code (no ``CHATOPS_RUNTIME`` check) on a runtime without the seam: the
    alert's job fails with the reason and is retried; it is never quietly applied to the log."""

    def runtime() -> Runtime:
        return Runtime(redis_client, keys, make_options(queue_name), [], [], InMemoryPresenter())

    jobs = NotificationQueue(redis_client, queue_name)
    jobs.enqueue("n-1")
    [job_id] = jobs.queue.job_ids
    worker = ChatopsSimpleWorker([jobs.queue.name], connection=redis_client, runtime_factory=runtime)
    with caplog.at_level(logging.ERROR, logger="rq.worker"):
        worker.work(burst=True)
    assert fetch_worker_job(job_id, redis_client).get_status() is JobStatus.SCHEDULED  # its retry
    failure = "\n".join(record.getMessage() for record in caplog.records)
    assert "BotConfigurationError" in failure and "no alert seam (Runtime.alerts)" in failure


def test_the_web_process_reads_the_inventory_once_at_start(tmp_path: Path, redis_url: str) -> None:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("targets:\n  - name: web-03\n    via: local\n")
    settings = Settings(_env_file=None, redis_url=redis_url, chatops_inventory_file=inventory)  # type: ignore[call-arg]
    runtime = web_runtime(settings)
    assert runtime.targets.inventory.names() == ("web-03",)
    inventory.write_text("targets: [not, a, target]\n")  # read once, at start: later edits change nothing
    assert [target.name for target in runtime.targets.for_channel("C1")] == ["web-03"]


def test_a_runbook_folder_offers_the_two_runbook_tools_and_a_missing_one_is_refused(
    tmp_path: Path, redis_url: str
) -> None:
    from bot.errors import BotConfigurationError

    bare = default_runtime(Settings(_env_file=None, redis_url=redis_url))  # type: ignore[call-arg]
    try:
        names = {tool.definition.name for tool in bare.tools}
        assert not names & {"search_runbooks", "read_runbook"} and bare.runbooks is not None
    finally:
        bare.close()
    folder = tmp_path / "runbooks"
    folder.mkdir()
    (folder / "disk.md").write_text(
        "---\nalerts: [DiskFull]\n---\n# Disk full\nthe token xoxb-1234567890-abcdefghijkl\n"
    )
    settings = Settings(_env_file=None, redis_url=redis_url, chatops_runbooks_dir=folder)  # type: ignore[call-arg]
    runtime = default_runtime(settings)
    try:
        offered = {tool.definition.name: tool for tool in runtime.tools}
        assert (
            offered["search_runbooks"].category.value == offered["read_runbook"].category.value == "read_only"
        )
        assert runtime.runbooks is not None and runtime.runbooks.for_alert("DiskFull", {}) is not None
        read = offered["read_runbook"].execute('{"id": "disk.md"}', timeout=5).output
        assert runtime.tool_output_filter is not None and "xoxb-1234567890" in read
        assert "xoxb-1234567890" not in runtime.tool_output_filter(read)  # the run's output filter redacts it
    finally:
        runtime.close()
    missing = Settings(_env_file=None, redis_url=redis_url, chatops_runbooks_dir=tmp_path / "nope")  # type: ignore[call-arg]
    with pytest.raises(BotConfigurationError, match="CHATOPS_RUNBOOKS_DIR"):
        default_runtime(missing)


def test_a_worker_refuses_a_missing_runbook_folder_and_starts_past_a_malformed_runbook(
    redis_url: str, key_prefix: str, queue_name: str, tmp_path: Path
) -> None:
    runtime = "bot.ops.compose:default_runtime"
    missing = chatops_worker(
        redis_url, key_prefix, queue_name, runtime, CHATOPS_RUNBOOKS_DIR=str(tmp_path / "no")
    )
    assert missing.returncode == EXIT_CONFIGURATION, missing.stderr
    assert f"{CONFIGURATION_ERROR}CHATOPS_RUNBOOKS_DIR={tmp_path / 'no'} is not a directory" in missing.stderr
    (tmp_path / "good.md").write_text("# Good\n")
    (tmp_path / "bad.md").write_text("---\nalerts: nope: [\n---\n# Bad\n")
    started = chatops_worker(redis_url, key_prefix, queue_name, runtime, CHATOPS_RUNBOOKS_DIR=str(tmp_path))
    assert started.returncode == 0, started.stderr
    assert "runbook bad.md: front matter: invalid YAML" in started.stderr
    assert f"Listening on {queue_name}.alerts" in started.stderr
