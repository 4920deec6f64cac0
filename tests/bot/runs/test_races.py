"""Races a user would notice: decisions clicked at once in several processes, replies during a long run."""

from __future__ import annotations

import multiprocessing
import random
import threading
import time
from pathlib import Path

import pytest
import redis

from agent.redis_memory import RedisMemory
from agent.scripted import FunctionModel, ScriptItem, tool_call
from agent.types import Message, Request, RunStatus
from bot.keys import Keys
from bot.observability.audit import AuditKind
from bot.runs.inbox import DeliveryStatus
from bot.runs.presenter import InMemoryPresenter, RunRef
from bot.runs.service import RunService
from tests.support.harness import Harness, make_options
from tests.support.tools import RecordingTool, sleeping


def decide_in_child(
    url: str,
    prefix: str,
    queue: str,
    approval_id: str,
    user: str,
    ready: threading.Barrier,
    out: multiprocessing.Queue[tuple[str, bool, str, str]],
) -> None:
    """One person clicking Approve, in a process of its own, once every other process is ready."""
    service = RunService(redis.Redis.from_url(url), Keys(prefix), make_options(queue))
    ready.wait(timeout=120)  # every child has started and connected: they click at once
    result = service.lifecycle.decide(approval_id, user=user, approve=True)
    out.put((user, result.won, result.approval.decided_by, result.approval.status.value))


@pytest.mark.slow  # six spawned processes, each importing the bot
def test_decisions_racing_in_processes_have_one_winner_and_the_tool_runs_once(
    harness: Harness, redis_url: str, key_prefix: str
) -> None:
    run_id = harness.submit("plan: restart_service")
    harness.work()
    (approval,) = harness.service.approvals.for_run(run_id)
    context = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue[tuple[str, bool, str, str]] = context.Queue()
    users = [f"U_{n}" for n in range(6)]
    ready = context.Barrier(len(users))
    children = [
        context.Process(
            target=decide_in_child,
            args=(redis_url, key_prefix, harness.options.queue_name, approval.id, user, ready, out),
        )
        for user in users
    ]
    try:
        for child in children:
            child.start()
        results = [out.get(timeout=120) for _ in children]  # a bound for a hang only
        for child in children:
            child.join(timeout=30)
    finally:
        for child in children:
            if child.is_alive():
                child.kill()
                child.join()
    winners = [user for user, won, _, _ in results if won]
    assert len(winners) == 1
    winner = winners[0]
    assert all(decided_by == winner and status == "approved" for _, _, decided_by, status in results)
    harness.work()
    assert harness.status(run_id) is RunStatus.COMPLETED
    runs = harness.executions("restart_service")
    assert len(runs) == 1 and runs[0]["arguments"]["confirmed_by"] == winner  # type: ignore[index]
    decided = [e for e in harness.service.audit.entries(run_id) if e.kind is AuditKind.APPROVAL_DECIDED]
    assert len(decided) == 1 and decided[0].fields["decided_by"] == winner


class CheckingPresenter(InMemoryPresenter):
    """Records, at each acknowledgement, whether the message was already in the stored history."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        super().__init__()
        self.client, self.keys = client, keys
        self.stored_when_acknowledged: list[bool] = []

    def acknowledge(self, run: RunRef, message: Message) -> None:
        history = RedisMemory(self.client, self.keys, run.run_id).load_messages()
        self.stored_when_acknowledged.append(
            any(m.meta.get("inbox_id") == message.meta["inbox_id"] for m in history)
        )
        super().acknowledge(run, message)


def test_replies_during_a_twenty_step_run_reach_the_history_once_each_in_order(
    redis_client: redis.Redis, redis_url: str, keys: Keys, queue_name: str, tmp_path: Path
) -> None:
    notes = [f"note {n}" for n in range(10)]

    def twenty_ticks_then_all_notes(request: Request) -> ScriptItem:
        ticks = sum(1 for m in request.messages if m.role == "assistant" and m.tool_calls)
        seen = [
            m.content for m in request.messages if m.role == "user" and (m.content or "").startswith("note")
        ]
        if ticks < 20 or len(seen) < len(notes):
            return tool_call("tick", f"call_{ticks}", n=ticks)  # distinct: no loop detected
        return "all notes read"

    presenter = CheckingPresenter(redis_client, keys)
    harness = Harness(
        redis_client,
        keys,
        make_options(queue_name),
        tmp_path,
        [FunctionModel(twenty_ticks_then_all_notes)],
        [RecordingTool("tick", respond=sleeping(0.03, "tick ok"))],  # 20 steps take >= 0.6 s
        presenter,
    )
    run_id = harness.submit("tick twenty times and read my notes")
    stored_when_acked: list[bool] = []
    rng = random.Random()

    def reply_at_random_points() -> None:
        service = RunService(redis.Redis.from_url(redis_url), keys, harness.options)
        for n, text in enumerate(notes):
            time.sleep(rng.uniform(0, 0.05))  # 10 replies within ~0.25 s on average
            delivery = service.deliver("C1", "100.1", user="U_REQ", text=text, ts=f"200.{n}")
            assert delivery.status is DeliveryStatus.STORED
            # The person is acknowledged now: the reply must already be in Redis (inbox or history).
            inbox = [i.text for i in service.inbox.peek(run_id)]
            history = [m.content for m in service.history(run_id)]
            stored_when_acked.append(text in inbox or text in history)

    injector = threading.Thread(target=reply_at_random_points)
    injector.start()
    harness.work()
    injector.join()
    assert harness.status(run_id) is RunStatus.COMPLETED
    history = harness.history(run_id)
    assert [m.content for m in history if m.role == "user"][1:] == notes  # once each, in order
    positions = [i for i, m in enumerate(history) if m.content in notes]
    assert positions[-1] - positions[0] > len(notes)  # injected at several points, between tool steps
    assert sum(1 for m in history if m.role == "tool") >= 20
    assert stored_when_acked == [True] * len(notes)
    assert presenter.stored_when_acknowledged == [True] * len(notes)
    assert [m.content for m in presenter.of("acknowledge", run_id)] == notes
    assert harness.service.inbox.peek(run_id) == []
    injected = [
        e.fields["text"]
        for e in harness.service.audit.entries(run_id)
        if e.kind is AuditKind.MESSAGE_INJECTED
    ]
    assert injected == notes
