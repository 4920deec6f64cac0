"""Run one scenario through the real processes and score it.

``run_scenario`` injects the scenario's fleet, starts an ``EvalSession`` (the demo's processes),
starts the run as the scenario says (a mention in #incident, or an Alertmanager webhook to
``/alerts/alertmanager``), plays the people around it (each thread reply once the model has
answered its ``turn`` times; the approver clicks ``approve`` or ``decline`` on every card), waits
until every run of the session has ended and its ``run_finished`` is in the audit stream, reads the
run's findings, audit entries and usage from Redis, tears everything down, and scores the run with
``emulator.eval.scoring``. Waiting is on events (a record's status, an audit entry, a card); the
deadline only turns a hang into an error.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis

from bot.keys import Keys
from bot.observability.audit import AuditKind, AuditLog
from bot.runs.record import RunRecord, RunRecords
from emulator.demo.alert import ALERT_CHANNEL, AlertButton
from emulator.demo.main import DemoError, Interrupted
from emulator.eval.errors import EvalError
from emulator.eval.recording import RecordingPlan, finish
from emulator.eval.scoring.inputs import RunObservation, flat
from emulator.eval.scoring.verdict import RunScore, score_run
from emulator.eval.session import EvalSession
from emulator.eval.spec import Alert, EvalScenario
from emulator.slack import SlackEmulatorClient

RUN_DEADLINE = 300.0  # seconds: a run that has not ended by then is a hang, reported as an error
REQUESTER, APPROVER, TEAMMATE = "alice", "bob", "carol"
CHANNEL = "#incident"
ACTIONS = {"approve": "chatops_approve", "decline": "chatops_decline"}


class EvalRunError(EvalError):
    """A scenario could not be run to its end (not a low score: the harness failed)."""


class RunStopped(EvalRunError):
    """A run stopped before its end because the suite was (``cancel``: Ctrl-C, another's error)."""


@dataclass(frozen=True)
class ScenarioOutcome:
    scenario: EvalScenario
    agent: str
    repeat: int
    run_id: str
    score: RunScore
    seconds: float  # from the start of the run to its end
    startup_seconds: float  # injecting and starting the processes
    total_seconds: float  # wall time of the whole scenario, teardown included
    key_prefix: str  # the session's Redis keys (removed at its end) and queues' stem
    queue: str
    replay: str = "none"  # exact | stale (neither passed nor failed) | none (not a replay)


def run_scenario(
    scenario: EvalScenario,
    directory: Path,
    agent: str = "reference",
    repeat: int = 1,
    redis_url: str | None = None,
    recording: RecordingPlan | None = None,
    system_prompt: Path | None = None,
    before_teardown: Callable[[EvalSession, str], None] | None = None,
    *,
    cancel: threading.Event | None = None,
) -> ScenarioOutcome:
    """One run of ``scenario`` in ``directory`` (made fresh), scored; recorded or replayed when
    ``recording`` says so (``emulator.eval.recording``). ``before_teardown(session, run_id)`` is
    called once the run has ended, while its processes and Redis keys are still there (``chatops
    eval capture``'s tests read the finished run there). ``cancel`` (the suite's: set on Ctrl-C or
    when another scenario could not run) stops it while it starts or runs, with the same teardown,
    as an ``EvalRunError``."""
    began = time.monotonic()
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "session.log", "w") as log:
        session = EvalSession(
            scenario,
            directory,
            agent=agent,
            redis_url=redis_url,
            out=log,
            recording=recording,
            system_prompt=system_prompt,
        )
        if cancel is not None:
            session.stopping = cancel  # what the demo's start and the drive below wait on
        try:
            session.start()
            ready = time.monotonic()
            run_id, observation = _drive(session, scenario)
            ended = time.monotonic()
            if before_teardown is not None:
                before_teardown(session, run_id)
        except Interrupted as error:
            raise RunStopped(f"{scenario.name}: stopped before its end") from error
        except DemoError as error:
            raise EvalRunError(f"{scenario.name}: {error}") from error
        finally:
            session.stop()
    observation = RunObservation(
        findings=observation.findings,
        audit=observation.audit,
        usage=observation.usage,
        iterations=observation.iterations,
        seconds=round(ended - ready, 3),
    )
    score = score_run(scenario.truth, scenario.targets, observation)
    replay = "none"
    if recording is not None and session.proxy is not None:
        replay = finish(
            recording,
            session.proxy,
            scenario=scenario.name,
            repeat=repeat,
            agent=agent,
            settings=session.model_settings,
            scores=score.scores(),
        )
    return ScenarioOutcome(
        scenario=scenario,
        agent=agent,
        repeat=repeat,
        run_id=run_id,
        score=score,
        seconds=observation.seconds,
        startup_seconds=round(ready - began, 3),
        total_seconds=round(time.monotonic() - began, 3),
        key_prefix=session.key_prefix,
        queue=session.queue,
        replay=replay,
    )


def _drive(session: EvalSession, scenario: EvalScenario) -> tuple[str, RunObservation]:
    assert session.slack is not None and session.redis is not None
    control = SlackEmulatorClient(session.slack.url)
    client = redis.Redis.from_url(session.redis.url, socket_timeout=10)
    try:
        thread = _start(session, control, scenario)
        people = _People(session, control, scenario, thread)
        records = RunRecords(client, Keys(session.key_prefix))
        audit = AuditLog(client, Keys(session.key_prefix), max_len=100_000)
        deadline = time.monotonic() + RUN_DEADLINE
        while True:
            session._check_children()  # a process that died is the harness's error, said with its log
            people.act()
            ended = _ended_runs(records, audit)
            if ended is not None:
                return _observe(ended, audit)
            if time.monotonic() > deadline:
                raise EvalRunError(f"{scenario.name}: the run did not end within {RUN_DEADLINE:.0f}s")
            if session.stopping.wait(0.1):
                raise Interrupted
    finally:
        client.close()


def _start(session: EvalSession, control: SlackEmulatorClient, scenario: EvalScenario) -> str | None:
    """Start the run; the mention's ts (its thread), or ``None`` for an alert (the bot opens it)."""
    if scenario.start.mention is not None:
        return str(control.post_message(CHANNEL, REQUESTER, f"@ops {scenario.start.mention}")["ts"])
    assert scenario.start.alert is not None
    button = AlertButton(f"{session.web_url}/alerts/alertmanager", session.alerts_token)
    # Fired at the scenario's epoch, not the wall clock: a replay sends the worker the same alert.
    fired = datetime.fromtimestamp(session.started_at, UTC)
    status, answer = button.send(alert_payload(scenario.start.alert, scenario.name, fired))
    if status is None or not 200 <= status < 300:
        raise EvalRunError(f"{scenario.name}: the bot refused the alert: {status} {answer}")
    return None


def alert_payload(alert: Alert, name: str, now: datetime | None = None) -> dict[str, Any]:
    """An Alertmanager webhook (version 4) with ``alert`` firing since ``alert.started`` ago."""
    now = now or datetime.now(UTC)
    starts = datetime.fromtimestamp(now.timestamp() - alert.started, UTC)
    stamp = starts.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    labels = dict(alert.labels)
    group_key = f'{{}}/{{eval="{name}"}}:{{alertname="{labels["alertname"]}"}}'
    return {
        "receiver": "chatops",
        "status": "firing",
        "alerts": [
            {
                "status": "firing",
                "labels": labels,
                "annotations": dict(alert.annotations),
                "startsAt": stamp,
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "http://prometheus.eval:9090/graph",
                "fingerprint": hashlib.sha256(f"{group_key}\n{stamp}".encode()).hexdigest()[:16],
            }
        ],
        "groupLabels": {"alertname": labels["alertname"]},
        "commonLabels": labels,
        "commonAnnotations": dict(alert.annotations),
        "externalURL": "http://alertmanager.eval:9093",
        "version": "4",
        "groupKey": group_key,
        "truncatedAlerts": 0,
    }


class _People:
    """The requester's and a teammate's replies at their turns, and the approver's clicks."""

    def __init__(
        self, session: EvalSession, control: SlackEmulatorClient, scenario: EvalScenario, thread: str | None
    ) -> None:
        self.session = session
        self.control = control
        self.scenario = scenario
        self.thread = thread
        self.replies = list(scenario.replies)
        self.clicked: set[str] = set()
        self.submitted: set[str] = set()  # decline modals answered

    def act(self) -> None:
        self._reply()
        self._click_cards()

    def _reply(self) -> None:
        answered = self.session.model_requests()
        while self.replies and self.replies[0].turn <= answered:
            reply = self.replies.pop(0)
            thread = self.thread or self._bot_thread()
            if thread is None:
                self.replies.insert(0, reply)
                return
            user = REQUESTER if reply.user == "requester" else TEAMMATE
            self.control.post_message(CHANNEL, user, reply.text, thread_ts=thread)

    def _bot_thread(self) -> str | None:
        roots = [m for m in self.control.messages("incident") if m.get("bot_id")]
        return str(roots[0]["ts"]) if roots else None

    def _click_cards(self) -> None:
        action = ACTIONS[self.scenario.approver]
        for root in self.control.messages("incident"):
            for message in self.control.thread("incident", str(root["ts"])):
                ts = str(message["ts"])
                if ts in self.clicked or "chatops_approve" not in str(_buttons(message)):
                    continue
                self.clicked.add(ts)
                self.control.click(ts, APPROVER, action_id=action, channel=ALERT_CHANNEL)
        if self.scenario.approver == "decline":
            self._submit_reasons()

    def _submit_reasons(self) -> None:
        """A Decline click opens a modal asking why (optional): the approver submits it, reasonless."""
        for view in self.control.views():
            view_id = str(view.get("id") or "")
            if view_id and view_id not in self.submitted:
                self.submitted.add(view_id)
                self.control.submit_view(view_id, {}, user=view.get("user"))


def _buttons(message: Mapping[str, Any]) -> list[Any]:
    return [
        e for b in message.get("blocks") or [] if b.get("type") == "actions" for e in b.get("elements", [])
    ]


def _ended_runs(records: RunRecords, audit: AuditLog) -> RunRecord | None:
    """The session's run, once every run has ended and its ``run_finished`` is recorded."""
    found = records.get_many(records.scan_ids())
    if not found or not all(record.status.terminal for record in found):
        return None
    finished = {entry.run_id for entry in audit.entries() if entry.kind is AuditKind.RUN_FINISHED}
    if not all(record.run_id in finished for record in found):
        return None
    if len(found) > 1:
        raise EvalRunError(f"the scenario started {len(found)} runs; one was expected")
    return found[0]


def _observe(record: RunRecord, audit: AuditLog) -> tuple[str, RunObservation]:
    state = record.state()
    if state is None:
        raise EvalRunError(f"run {record.run_id} ended without a saved state")
    return record.run_id, RunObservation(
        findings=state.findings.as_json() if state.findings is not None else None,
        audit=[flat(entry) for entry in audit.entries(record.run_id)],
        usage=state.usage.model_dump(),
        iterations=state.iteration,
    )
