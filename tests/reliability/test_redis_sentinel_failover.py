"""Redis Sentinel: the master SIGKILLed under load; after the failover nothing acknowledged is lost.

Issue 21, item 5. One master, one replica and three sentinels of the test's own on loopback
(``tests.reliability.sentinel_proc``: Debian's ``redis-server`` and ``redis-sentinel``), the web
app, the Slack emulator and two real worker subprocesses, all configured with ``REDIS_SENTINELS``
only: ``REDIS_URL`` names a port nothing listens on, so a connection that did not go through
``Sentinel.master_for`` would fail.

Under way when the master is killed: runs collecting thread replies (``collect: N`` calls a
read-only tool every turn until N replies are in its history), an approved restart in the middle
of its execution, and runs waiting for approval. While the sentinels fail over, and after, people
keep replying and clicking Approve: a click Slack answers with an error is clicked again, as a
person would; Slack retries an event until it is answered 200. The old master is started again
as a replica of the new one (what a node's start script does after asking the sentinels), and
then: every reply Slack was answered 200 for is in its run's history exactly once, every click
answered 200 is an approved decision by its clicker, every restart ran at most once (the one cut
short by the crash is not repeated), and every run finishes with one answer.

The figures (failover time, refused attempts, losses) are printed and written to
``{tmp_path}/sentinel-figures.json``; docs/RELIABILITY.md reports a run of them.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agent.tool_step import OUTCOME_UNKNOWN
from agent.types import RunStatus
from bot.runs.approvals import ApprovalStatus
from bot.slack.rendering import render
from emulator.slack.client import ControlApiError
from tests.bot.runtimes import executions
from tests.reliability.cluster import Cluster
from tests.support.sentinel_group import MASTER_NAME, SentinelGroup, sentinel_group
from tests.support.slack_workspace import CHANNEL, buttons
from tests.support.waiting import wait_for, wait_until

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

COLLECTING = 2  # runs in progress, each waiting for REPLIES thread replies (each holds a worker meanwhile)
WORKERS = COLLECTING + 1  # one for the approved runs
REPLIES = 4  # per run: one before the kill, two while the sentinels fail over, one after
APPROVALS = 4  # runs waiting for approval: one approved before the kill, two during the failover, one after
NOBODY_LISTENS = "redis://127.0.0.1:9/0"  # the discard port: only the database number is used
CLICKER = "U_BOB"


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[SentinelGroup]:
    yield from sentinel_group(tmp_path / "sentinel")


@dataclass
class Traffic:
    """What people sent, and what Slack was told (answered 200) or refused."""

    cluster: Cluster
    replies: dict[str, list[tuple[str, list[str]]]] = field(
        default_factory=dict
    )  # thread -> (text, event ids)
    clicks: dict[str, int] = field(default_factory=dict)  # thread ts -> attempts until answered 200
    refused_clicks: int = 0
    unanswered: list[str] = field(default_factory=list)  # threads whose clicks were all refused, for now
    decided_despite_error: list[str] = field(default_factory=list)  # a refused click had decided it

    def reply(self, thread_ts: str, text: str) -> None:
        posted = self.cluster.control.post_message(CHANNEL, CLICKER, text, thread_ts=thread_ts)
        events = [str(e) for e in posted.get("event_ids") or []]
        self.replies.setdefault(thread_ts, []).append((text, events))

    def approve(self, thread_ts: str, timeout: float = 40.0) -> None:
        """Click Approve until Slack's answer is 200 (an error answer: the person clicks again), on
        the thread's card that shows the buttons: a job that took the run over may have posted it
        again (the old one then has none), and a person clicks the one they see. A person also
        stops once the card says it was approved: a click answered with an error during the
        failover may still have decided it (the decision was written, only no replica confirmed it
        in time; nothing ran before one did), and then there is nothing left to click."""
        deadline = time.monotonic() + timeout
        attempts, last = 0, "no click"
        while time.monotonic() < deadline:
            if attempts and self._shown_approved(thread_ts):
                self.clicks[thread_ts] = attempts
                self.decided_despite_error.append(thread_ts)
                return
            attempts += 1
            try:
                card_ts = str(self.cluster.approval_card(thread_ts, timeout=5)["ts"])
                status = self.cluster.control.click(card_ts, CLICKER, action_id=render.ACTION_APPROVE)[
                    "status"
                ]
            except (
                OSError,
                ControlApiError,
                AssertionError,
            ) as error:  # Slack down, or no card with buttons yet
                status, last = None, f"{type(error).__name__}: {error}"
            else:
                last = f"answered {status}"
            if status == 200:
                self.clicks[thread_ts] = attempts
                return
            self.refused_clicks += 1
            time.sleep(0.3)
        shown = [
            (m["ts"], str(m["text"])[:120], len(buttons(m))) for m in self.cluster.bot_replies(thread_ts)
        ]
        run_id = self.cluster.run_id(thread_ts)
        approvals = [
            (a.status.value, a.card_ts, a.decided_by) for a in self.cluster.service.approvals.for_run(run_id)
        ]
        raise AssertionError(
            f"no click in thread {thread_ts} was answered 200 in {timeout} s (last: {last}); "
            f"run {self.cluster.status(run_id)}, approvals {approvals}, bot's replies {shown}"
        )

    def _shown_approved(self, thread_ts: str) -> bool:
        return any(
            str(m["text"]).startswith("Approval approved") and not buttons(m)
            for m in self.cluster.bot_replies(thread_ts)
        )

    def acknowledged(self, events: list[str]) -> bool:
        deliveries = self.cluster.control.deliveries(kind="event")
        return any(d["event_id"] in events and d["status"] == 200 for d in deliveries)

    def refused_deliveries(self) -> int:
        return sum(1 for d in self.cluster.control.deliveries(kind="event") if d["status"] != 200)


def user_texts(cluster: Cluster, run_id: str) -> list[str]:
    return [m.content or "" for m in cluster.service.history(run_id) if m.role == "user"]


@pytest.mark.timeout(300)  # its own waits name what is missing; on a loaded machine they add up
def test_a_master_sigkilled_under_load_loses_nothing_acknowledged_and_repeats_nothing(
    sentinels: SentinelGroup, make_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    started = time.monotonic()
    cluster = make_cluster(
        redis=NOBODY_LISTENS,
        retry_delays=(1.0, 2.0, 4.0, 8.0, 16.0),  # Slack's own: at once, 1 and 5 minutes
        redis_sentinels=sentinels.addresses,
        redis_sentinel_master=MASTER_NAME,
        worker_env={
            "CHATOPS_MAX_ITERATIONS": "400",
            # The suite's 1 s lease, shorter than the failover (~2.3 s): jobs lose their runs mid-failover
            # and others take them over. A reply posted right after its mention may be handled before
            # it (under load): it is parked for the run (bot.runs.early_replies), not answered and lost.
            "CHATOPS_TEST_MODEL_SLEEP": "0.3",
            "CHATOPS_TEST_SLEEP_FIRST": "4",  # the first restart is still running when the master dies
            "CHATOPS_TEST_SLEEP_TOOL": "restart_service",
        },
    )
    workers = [cluster.start_worker() for _ in range(WORKERS)]
    traffic = Traffic(cluster)
    awaiting = [cluster.mention(f"plan: restart_service #a{n}") for n in range(APPROVALS)]
    for ts in awaiting:
        cluster.approval_card(ts)
    collecting = [cluster.mention(f"collect: {REPLIES} #c{n}") for n in range(COLLECTING)]
    for n, ts in enumerate(collecting):
        traffic.reply(ts, f"reply {n}.0")
    wait_for(
        lambda: all(traffic.acknowledged(e) for r in traffic.replies.values() for _, e in r), 30, "replies"
    )
    traffic.approve(awaiting[0])  # its restart sleeps through the kill
    restarts = cluster.directory / "restart_service.log"
    wait_for(lambda: executions(restarts), 30, "the first restart to start")

    sentinels.master.kill()
    killed = time.monotonic()
    during = threading.Thread(target=_during_failover, args=(traffic, collecting, awaiting[1:-1]))
    during.start()
    new_master = wait_for(lambda: _new_master(sentinels), 30, "the sentinels to promote the replica")
    failover_seconds = time.monotonic() - killed
    assert new_master == sentinels.replica.port
    sentinels.master.start(replica_of=sentinels.replica.port)  # the old master comes back as a replica
    sentinels.wait_replicas(sentinels.replica, 1)
    rejoined_seconds = time.monotonic() - killed
    during.join(timeout=60)
    assert not during.is_alive()
    for ts in traffic.unanswered:  # on a loaded machine the replica can take longer to be back
        traffic.approve(ts, timeout=60)  # than a person's clicks during the failover: they click again

    for n, ts in enumerate(collecting):
        traffic.reply(ts, f"reply {n}.3")
    traffic.approve(awaiting[-1])  # after the failover

    run_ids = [cluster.run_id(ts) for ts in [*collecting, *awaiting]]
    try:
        wait_until(lambda: all(cluster.status(r) is RunStatus.COMPLETED for r in run_ids), 90, "every run")
    except AssertionError as error:
        raise AssertionError(_diagnosis(traffic, run_ids)) from error
    cluster.settle()

    # Every reply Slack was answered 200 for is in its run's history, once, in the order sent.
    lost_replies = answers_posted_twice = 0
    for ts in collecting:
        sent = [text for text, events in traffic.replies[ts] if traffic.acknowledged(events)]
        assert len(sent) == REPLIES, traffic.replies[ts]  # Slack's retries got every one stored
        seen = [text for text in user_texts(cluster, cluster.run_id(ts)) if text.startswith("reply ")]
        lost_replies += len(set(sent) - set(seen))
        assert sorted(seen) == sorted(sent), (seen, sent)  # each once (a retried one may come later)
        # The answer is never lost. A report is at least once (docs/RELIABILITY.md): a final post
        # whose "done" mark the dead master took with it is posted once more by the job that
        # finishes the report.
        answers = cluster.answers(ts, prefix="got")
        assert set(answers) == {f"got {REPLIES} replies"} and len(answers) <= 2, answers
        answers_posted_twice += len(answers) - 1

    # Every click answered 200 is an approval decided by its clicker; every restart ran at most once.
    ran = executions(restarts)
    assert len(ran) <= len(awaiting), ran
    assert all(entry["arguments"]["confirmed_by"] == CLICKER for entry in ran)
    outcomes = []
    for ts in awaiting:
        [approval] = cluster.service.approvals.for_run(cluster.run_id(ts))
        assert approval.status is ApprovalStatus.APPROVED and approval.decided_by == CLICKER, approval
        assert approval.consumed_at is not None
        [answer] = cluster.answers(ts)
        outcomes.append(answer)
    unknown = f"done: {OUTCOME_UNKNOWN.format(tool='restart_service')}"
    executed = [a for a in outcomes if a in ("done: restart_service ok", unknown)]
    refused = [a for a in outcomes if "could not be made durable" in a]  # fail closed: not run, said so
    assert len(executed) + len(refused) == len(awaiting), outcomes
    assert len(ran) == len(executed), (ran, outcomes)  # an unknown outcome ran once, before the crash
    assert all(w.proc.poll() is None for w in workers), "a worker quit with the master"

    figures = {
        "runs": len(run_ids),
        "runs_collecting": COLLECTING,
        "runs_awaiting_approval": len(awaiting),
        "replies_acknowledged": sum(len(r) for r in traffic.replies.values()),
        "replies_lost": lost_replies,
        "answers_posted_twice": answers_posted_twice,
        "clicks_acknowledged": len(traffic.clicks),
        "clicks_repeated_after_the_failover": len(traffic.unanswered),
        "approvals_decided_by_a_click_answered_with_an_error": len(traffic.decided_despite_error),
        "click_attempts_refused": traffic.refused_clicks,
        "event_deliveries_refused": traffic.refused_deliveries(),
        "restarts_executed": len(ran),
        "restarts_outcome_unknown": outcomes.count(unknown),
        "restarts_refused_not_durable": len(refused),
        "failover_seconds": round(failover_seconds, 2),
        "old_master_back_as_replica_seconds": round(rejoined_seconds, 2),
        "test_seconds": round(time.monotonic() - started, 1),
    }
    (tmp_path / "sentinel-figures.json").write_text(json.dumps(figures, indent=2))
    print("sentinel failover figures:", json.dumps(figures))


def _diagnosis(traffic: Traffic, run_ids: list[str]) -> str:
    """What a run that did not finish was waiting for: the statuses, and every reply's deliveries."""
    cluster = traffic.cluster
    lines = []
    for r in run_ids:
        entries = cluster.audit(r)
        kinds = Counter(e.kind.value for e in entries)
        lines.append(f"run {r}: {cluster.status(r)}, {len(entries)} audit entries {dict(kinds)}")
        if cluster.status(r) is not RunStatus.COMPLETED:
            lines += [f"  {e.kind.value} {e.fields}"[:300] for e in entries[:40]]
    deliveries = cluster.control.deliveries(kind="event")
    for thread, replies in traffic.replies.items():
        run_id = cluster.run_id(thread)
        inbox = cluster.redis.lrange(cluster.keys.inbox(run_id), 0, -1)
        lines.append(f"{thread} -> run {run_id}: history {user_texts(cluster, run_id)}, inbox {inbox}")
        lines += [f"  {e.kind.value} {e.fields}" for e in cluster.audit(run_id) if "inject" in e.kind.value]
        for text, events in replies:
            tries = [(d["type"], d["retry_num"], d["status"]) for d in deliveries if d["event_id"] in events]
            lines.append(f"{thread} {text!r}: {tries}")
    lines.append(
        f"clicks: {traffic.clicks}, refused {traffic.refused_clicks}, clicked again {traffic.unanswered}"
    )
    return "\n".join(lines)


def _new_master(sentinels: SentinelGroup) -> int | None:
    ports = {sentinels.master_port(s) for s in sentinels.sentinels}
    return ports.pop() if len(ports) == 1 and sentinels.master.port not in ports else None


def _during_failover(traffic: Traffic, collecting: list[str], awaiting: list[str]) -> None:
    """While the master is down and being replaced: two replies per collecting run, and clicks."""
    for k in (1, 2):
        for n, ts in enumerate(collecting):
            traffic.reply(ts, f"reply {n}.{k}")
            time.sleep(0.2)
    for thread_ts in awaiting:
        try:
            traffic.approve(thread_ts)
        except AssertionError:  # refused all along: no replica confirms a decision until one is back
            traffic.unanswered.append(thread_ts)


def test_with_no_replica_online_nothing_is_acknowledged_and_no_tool_runs_until_one_is_back(
    sentinels: SentinelGroup, make_cluster: Callable[..., Cluster]
) -> None:
    """Fail closed: the master alone answers every write, but a failover now would lose them, so
    Slack is answered with errors (it retries the event; the person clicks again) and the worker
    refuses the approved restart (its executing mark is on no replica) instead of running it."""
    cluster = make_cluster(
        redis=NOBODY_LISTENS,
        retry_delays=(1.0, 2.0, 4.0, 8.0),
        redis_sentinels=sentinels.addresses,
        redis_sentinel_master=MASTER_NAME,
    )
    cluster.start_worker()
    ts = cluster.mention("plan: restart_service")
    card = str(cluster.approval_card(ts)["ts"])
    sentinels.replica.kill()
    sentinels.wait_replicas(sentinels.master, 0)

    assert cluster.control.click(card, CLICKER, action_id=render.ACTION_APPROVE)["status"] == 503
    alone = cluster.mention("plan: check_health #alone")
    events = cluster.event_ids[alone]

    def refused() -> list[dict[str, object]]:
        found = cluster.control.deliveries(kind="event")
        return [
            d for d in found if d["event_id"] in events and d["type"] == "app_mention" and d["status"] == 503
        ]

    wait_for(lambda: len(refused()) >= 2, 20, "Slack's first attempt and a retry answered 503")
    # The click's decision is on the master: the run resumed, and the worker refused the restart.
    answer = wait_for(lambda: cluster.answers(ts), 30, "the refusal in the thread")
    assert len(answer) == 1 and "could not be made durable" in answer[0], answer
    assert not (cluster.directory / "restart_service.log").exists()

    sentinels.replica.start(replica_of=sentinels.master.port)
    sentinels.wait_replicas(sentinels.master, 1)
    cluster.wait_status(cluster.run_id(alone, timeout=30), RunStatus.COMPLETED, timeout=30)  # a retry got 200
    assert wait_for(lambda: cluster.answers(alone), 20, "the answer") == ["done: check_health ok"]
    [approval] = cluster.service.approvals.for_run(cluster.run_id(ts))
    assert approval.status is ApprovalStatus.APPROVED and approval.decided_by == CLICKER  # decided, not run
    cluster.settle()
    assert cluster.answers(ts) == answer and cluster.answers(alone) == ["done: check_health ok"]
