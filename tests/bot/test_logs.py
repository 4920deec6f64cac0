"""Structured logs: JSON lines off a terminal, a human format on one, run context on a run's lines,
secrets redacted with the tool-output redactor."""

from __future__ import annotations

import io
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from bot.keys import Keys
from bot.observability.logs import JsonFormatter, RunContextFilter, configure_logging, run_context
from bot.runs.service import RunService
from emulator.models.openai_server import OpenAIServer, Reply
from tests.support.harness import make_options
from tests.support.waiting import wait_until
from tests.support.worker_process import WorkerProcess
from tools.safety import Redactor

SLACK_TOKEN = "xoxb-1234567890-abcdefghij"


@pytest.fixture
def logger() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A private logger writing JSON lines to a buffer (the root logger is left alone)."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(JsonFormatter(Redactor(secrets=["hunter2-corp-secret"]).redact))
    handler.addFilter(RunContextFilter())
    log = logging.getLogger(f"chatops.test.{id(buffer)}")
    log.addHandler(handler)
    log.propagate = False
    log.setLevel(logging.DEBUG)
    yield log, buffer
    log.removeHandler(handler)


def lines(buffer: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def test_lines_inside_a_run_carry_its_context_and_lines_outside_do_not(
    logger: tuple[logging.Logger, io.StringIO],
) -> None:
    log, buffer = logger
    log.info("before")
    with run_context("r1", "C_INC", "171.2"):
        log.info("inside %s", "the job")
        thread = threading.Thread(target=lambda: log.warning("from a tool thread"))
        thread.start()
        thread.join()
    log.info("after")
    before, inside, threaded, after = lines(buffer)
    assert "run_id" not in before and "run_id" not in after
    for line in (inside, threaded):
        assert (line["run_id"], line["channel"], line["thread_ts"]) == ("r1", "C_INC", "171.2")
    assert inside["msg"] == "inside the job" and inside["level"] == "INFO"
    assert threaded["level"] == "WARNING" and isinstance(threaded["pid"], int)
    assert str(inside["ts"]).endswith("Z")


def test_secrets_are_redacted_in_messages_extras_and_tracebacks(
    logger: tuple[logging.Logger, io.StringIO],
) -> None:
    log, buffer = logger
    log.info("posting with %s", SLACK_TOKEN)
    log.info(
        "connecting", extra={"dsn": "postgres://app:hunter2-corp-secret@db/app", "api_token": "abc123456"}
    )
    try:
        raise RuntimeError(f"Authorization: Bearer {SLACK_TOKEN}")
    except RuntimeError:
        log.exception("call failed")
    text = buffer.getvalue()
    assert SLACK_TOKEN not in text and "hunter2-corp-secret" not in text and "abc123456" not in text
    message, extras, failure = lines(buffer)
    assert message["msg"] == "posting with [REDACTED]"
    assert extras["dsn"] == "postgres://app:[REDACTED]@db/app" and extras["api_token"] == "[REDACTED]"
    assert "RuntimeError" in str(failure["exc"]) and "[REDACTED]" in str(failure["exc"])


def test_auto_is_human_on_a_terminal_and_json_elsewhere() -> None:
    master, slave = os.openpty()
    terminal = os.fdopen(slave, "w")
    root = logging.getLogger()
    level = root.level
    try:
        handler = configure_logging("INFO", "auto", stream=terminal)
        with run_context("0123456789abcdef", "C_INC", "171.2"):
            logging.getLogger("bot.runs.jobs").info("working on it with %s", SLACK_TOKEN)
        terminal.flush()
        shown = os.read(master, 4096).decode()
        assert "INFO bot.runs.jobs [run 0123456789ab C_INC/171.2]: working on it with [REDACTED]" in shown
        assert not shown.lstrip().startswith("{")

        piped = io.StringIO()
        root.removeHandler(handler)
        handler = configure_logging("INFO", "auto", stream=piped)
        assert [h for h in root.handlers if h is handler] == [handler]
        logging.getLogger("bot.runs.jobs").info("to a pipe")
        assert json.loads(piped.getvalue())["msg"] == "to a pipe"
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        terminal.close()
        os.close(master)


@pytest.mark.slow
def test_a_worker_process_writes_json_lines_tagged_with_the_run(
    redis_client: redis.Redis,
    keys: Keys,
    queue_name: str,
    worker_processes: Callable[..., WorkerProcess],
    tmp_path: Path,
) -> None:
    with OpenAIServer(model="gpt-test") as llm:
        llm.enqueue(Reply(text=f"Rotated. The new token is {SLACK_TOKEN}"))
        worker = worker_processes(
            CHATOPS_RUNTIME="bot.ops.worker:default_runtime",
            LLM_BASE_URL=llm.url,
            LLM_MODEL="gpt-test",
            SLACK_BOT_TOKEN="",
        )
        service = RunService(redis_client, keys, make_options(queue_name))
        run_id = service.submit("C_INC", "171.2", requester="U_REQ", text="rotate the token").run_id
        wait_until(
            lambda: (r := service.get(run_id)) is not None and r.status.terminal, timeout=180, what="the run"
        )
        # The report (card, then answer) follows the run's end: on a busy machine, seconds later.
        wait_until(lambda: "answer:" in worker.output(), timeout=180, what="the answer in the log")
    output = worker.output()
    assert SLACK_TOKEN not in output
    records = [json.loads(line) for line in output.splitlines() if line.strip()]
    answer = next(r for r in records if "answer:" in str(r["msg"]))
    assert answer["msg"] == f"run {run_id}: answer: Rotated. The new token is [REDACTED]"
    assert (answer["run_id"], answer["channel"], answer["thread_ts"]) == (run_id, "C_INC", "171.2")
    assert answer["logger"] == "bot.runs.presenter" and answer["level"] == "INFO"
    rq_lines = [r for r in records if str(r["logger"]).startswith("rq.")]
    assert rq_lines, "RQ's own lines go through the same JSON handler"
