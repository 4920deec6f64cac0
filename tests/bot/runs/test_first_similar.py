"""A mention's past incidents, searched by its run's first job (``bot.runs.first_similar``): the
lines go into the first message in the loop's first (fenced) write only, exactly once even when
the job is delivered again; the thread's note is posted at most once per run."""

from __future__ import annotations

import json

import redis

from agent.config import RunConfig
from agent.memory import InMemoryMemory
from agent.run import Run
from agent.scripted import ScriptedModel
from agent.types import Message
from bot.keys import Keys
from bot.memory.incident import Incident
from bot.memory.notes import SIMILAR_NOTE
from bot.memory.similar import IncidentMemory, Similar
from bot.runs import first_similar
from bot.runs.presenter import InMemoryPresenter, RunRef
from tests.bot.memory.test_store import incident, store

RUN = RunRef("r1", "C_ONE", "1700000000.000100", "U_ALICE")


def found() -> list[Similar]:
    incident = Incident(
        id="i1", channel="C_ONE", private=False, thread_ts="1690000000.000100", link="", at=1_690_000_000.0
    )
    return [Similar(incident, 1.0, ("words",))]


def pending_first() -> Message:
    first = Message.user("web-03 is out of disk", slack_user="U_ALICE", ts=RUN.thread_ts)
    first.meta["similar_pending"] = True
    return first


def test_the_lines_go_into_the_first_write_once_and_the_mark_goes() -> None:
    memory = InMemoryMemory([pending_first()])  # as the web stored it: no state yet
    assert first_similar.pending(memory.load_messages())
    calls: list[str] = []

    def hook(message: Message) -> Message:
        calls.append(message.content or "")
        return first_similar.with_lines(found(), lambda text: text.replace("SECRET", "[redacted]"))(message)

    Run(RunConfig(models=[ScriptedModel(["done"])], memory=memory, first_message=hook)).execute()
    stored = memory.load_messages()
    assert stored[0].role == "system"
    assert stored[1].content is not None and stored[1].content.count(SIMILAR_NOTE) == 1
    assert "similar_pending" not in stored[1].meta
    assert not first_similar.pending(stored)
    # The job delivered again (a crash after the first write): the run has a state, nothing is added.
    Run(RunConfig(models=[ScriptedModel(["again"])], memory=memory, first_message=hook)).execute()
    assert len(calls) == 1
    assert memory.load_messages()[1].content == stored[1].content


def test_only_a_single_marked_user_message_is_pending() -> None:
    plain = Message.user("hello", slack_user="U_ALICE")
    assert not first_similar.pending([plain])
    assert not first_similar.pending([pending_first(), plain])
    forged = Message.user("hi")
    forged.meta["similar_pending"] = "yes"  # type: ignore[typeddict-item]
    assert not first_similar.pending([forged])


def test_the_note_is_posted_once_per_run(redis_client: redis.Redis, keys: Keys) -> None:
    presenter = InMemoryPresenter()
    remembered: list[tuple[str, str, list[str]]] = []
    claim = keys.similar_note_claim(RUN.run_id)

    def remember(channel: str, ts: str, ids: list[str]) -> None:
        remembered.append((channel, ts, ids))

    ts = first_similar.post_note(redis_client, claim, presenter, RUN, found(), remember)
    assert ts and remembered == [(RUN.channel, ts, ["i1"])]
    # A re-delivered job: no second note, no second record of one.
    assert first_similar.post_note(redis_client, claim, presenter, RUN, found(), remember) is None
    assert len(presenter.of("post_similar_note")) == 1 and len(remembered) == 1
    # Nothing found: no note, no claim.
    other = keys.similar_note_claim("r2")
    assert first_similar.post_note(redis_client, other, presenter, RUN, [], remember) is None
    assert not redis_client.exists(other)


def test_hostile_records_reach_neither_the_first_message_nor_the_note(
    redis_client: redis.Redis, keys: Keys
) -> None:
    """A hostile Redis writer's incident records: malformed, huge, another (private) channel's, one
    claiming another id than its key. The worker's search gives the run only its channel's own."""
    s = store(redis_client, keys)
    s.save(incident(1))
    s.save(
        incident(
            2,
            channel="C0SECRET",
            private=True,
            answer="SECRET-CAUSE",
            question="SECRET-CAUSE disk full on web-03",
        )
    )
    s.save(incident(3))
    s.save(incident(4))
    redis_client.set(keys.memory_incident("run3"), b"\xff not json")
    redis_client.set(
        keys.memory_incident("run4"),
        json.dumps({"id": "run4", "channel": "CPUB", "question": "disk full on web-03 " + "x" * 2_000_000}),
    )
    s.save(incident(5))
    redis_client.set(
        keys.memory_incident("run5"),
        incident(9, id="evil", answer="EVIL", question="EVIL disk full on web-03").to_json(),
    )
    run = RunRef("r9", "CPUB", "999.0001", "U_ALICE")
    found = first_similar.search(IncidentMemory(s, scope="channel"), run, "disk full on web-03", ["web-03"])
    assert [similar.incident.id for similar in found] == ["run1"]
    text = first_similar.with_lines(found, lambda text: text)(pending_first()).content or ""
    assert "SECRET-CAUSE" not in text and "EVIL" not in text and "x" * 1000 not in text
    presenter = InMemoryPresenter()
    first_similar.post_note(redis_client, keys.similar_note_claim("r9"), presenter, run, found, None)
    (shown,) = presenter.of("post_similar_note")
    assert [similar.incident.id for similar in shown] == ["run1"]
