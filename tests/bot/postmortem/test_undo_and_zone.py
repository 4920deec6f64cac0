"""A change's undo state in the draft (offered until, expired, requested, executed and checked) and
the timeline in the reader's time zone beside UTC (a zone whose offset is not a whole hour)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import redis

from bot.keys import Keys
from bot.observability.audit import AuditKind, AuditLog
from bot.postmortem.facts import Postmortem
from bot.postmortem.render import to_markdown, utc
from bot.postmortem.source import load_postmortem
from bot.postmortem.zone import Zone
from tests.bot.postmortem.incident import HOSTILE, T0, Clock, write_incident
from tools.safety import Redactor

UNTIL = T0 + 900


def _draft(client: redis.Redis, keys: Keys, now: float) -> Postmortem:
    audit = AuditLog(client, keys, max_len=10_000)
    return load_postmortem(client, keys, audit, "run-pm-1", redact=Redactor().redact, clock=lambda: now)


def _offer(client: redis.Redis, keys: Keys) -> AuditLog:
    clock = Clock(T0 + 530)
    audit = AuditLog(client, keys, max_len=10_000, clock=clock)
    audit.record(
        AuditKind.UNDO_OFFERED,
        "run-pm-1",
        approval_id="a1",
        call_id="c2",
        offer_id="o1",
        undo='logrotate_restore {"unit":"nginx"}',
        until=repr(UNTIL),
    )
    return audit


def _undo_run(audit: AuditLog, run_id: str, offer: str, *, passed: str = "1") -> None:
    audit.record(
        AuditKind.UNDO_REQUESTED,
        run_id,
        user="U3",
        offer_id=offer,
        approval_id="a1",
        call_id="c2",
        action_run_id="run-pm-1",
        undo='logrotate_restore {"unit":"nginx"}',
    )
    audit.record(
        AuditKind.UNDO_EXECUTED,
        run_id,
        offer_id=offer,
        call_id=f"undo_{offer}",
        action_run_id="run-pm-1",
        approval_id="a1",
        action_call_id="c2",
        failed=False,
    )
    audit.record(
        AuditKind.CHECK_ENDED, run_id, call_id=f"undo_{offer}", tool="disk_usage", passed=passed, output="ok"
    )


def test_an_offer_is_offered_until_its_end_then_expired(redis_client: redis.Redis, keys: Keys) -> None:
    write_incident(redis_client, keys)
    _offer(redis_client, keys)
    [action] = _draft(redis_client, keys, T0 + 600).actions
    assert (action.undo.state, action.undo.until) == ("offered", UNTIL)
    assert f"undo offered until {utc(UNTIL)} · audit" in to_markdown(_draft(redis_client, keys, T0 + 600))
    [expired] = _draft(redis_client, keys, UNTIL + 1).actions
    assert expired.undo.state == "expired"
    assert "expired unused" in to_markdown(_draft(redis_client, keys, UNTIL + 1))


def test_a_change_without_an_offer_has_no_undo(redis_client: redis.Redis, keys: Keys) -> None:
    write_incident(redis_client, keys)
    [action] = _draft(redis_client, keys, T0 + 600).actions
    assert action.undo.state == "none" and "; no undo · audit" in to_markdown(
        _draft(redis_client, keys, T0 + 600)
    )


def test_an_undo_requested_executed_and_checked_is_told_with_who_asked(
    redis_client: redis.Redis, keys: Keys
) -> None:
    write_incident(redis_client, keys)
    _undo_run(_offer(redis_client, keys), "run-undo-1", "o1")
    pm = _draft(redis_client, keys, UNTIL + 60)
    [action] = pm.actions
    assert (action.undo.state, action.undo.requested_by, action.undo.check) == ("executed", "U3", "passed")
    assert action.undo.undo_run == "run-undo-1"
    whats = [(line.actor, line.what.split(":")[0]) for line in pm.timeline]
    assert ("chatops", 'offered the undo logrotate_restore {"unit"') in whats
    assert ("U3", "asked to undo the change") in whats
    assert ("chatops", "ran the undo of the change (run run-undo-1)") in whats
    assert ("chatops", "check after the undo disk_usage passed") in whats
    assert "undo requested by U3, executed (run `run-undo-1`), checked: passed" in to_markdown(pm)


def test_a_hostile_writer_cannot_claim_an_undo_of_an_offer_this_run_never_made(
    redis_client: redis.Redis, keys: Keys
) -> None:
    write_incident(redis_client, keys)
    audit = _offer(redis_client, keys)
    _undo_run(audit, "run-forged", "o-forged")  # names this run, but an offer it never made
    audit.record(AuditKind.CHECK_ENDED, "run-other", call_id="undo_o1", tool="rm", passed="0", output="x")
    pm = _draft(redis_client, keys, T0 + 600)
    assert pm.actions[0].undo.state == "offered"
    forged = {e.id for run in ("run-forged", "run-other") for e in audit.entries(run)}
    assert len(forged) == 4 and not forged & {line.ref for line in pm.timeline}
    assert "U3" not in to_markdown(pm) and len(pm.timeline) == 14  # the 13 facts and the offer


def test_the_timeline_shows_utc_and_the_readers_zone_with_a_non_hour_offset(
    redis_client: redis.Redis, keys: Keys
) -> None:
    write_incident(redis_client, keys)
    pm = _draft(redis_client, keys, T0 + 600)
    zone = Zone.of("Asia/Kathmandu", 20700)
    assert zone is not None
    md = to_markdown(pm, zone)
    assert "## Timeline (UTC, and Asia/Kathmandu)" in md
    local = datetime.fromtimestamp(T0 + 2, timezone(timedelta(hours=5, minutes=45)))
    assert f"- {utc(T0 + 2)} ({local:%Y-%m-%d %H:%M:%S} Asia/Kathmandu) · U1 · run started" in md
    assert local.minute != datetime.fromtimestamp(T0 + 2, UTC).minute  # the 45 minutes are counted
    assert "## Timeline (UTC)" in to_markdown(pm)  # no zone known: UTC only


def test_a_zone_is_what_slack_said_or_nothing() -> None:
    assert Zone.of("Asia/Kolkata", 19800) == Zone("Asia/Kolkata", 19800)
    unknown_name = Zone.of("Mars/Olympus_Mons", -12600)
    assert unknown_name is not None and unknown_name.label == "UTC-03:30"
    assert unknown_name.local(0).startswith("1969-12-31 20:30:00 UTC-03:30")
    for tz, offset in ((f"Etc/UTC {HOSTILE}", "x"), ("../../etc/passwd", None), (None, True), ("", 99_999)):
        assert Zone.of(tz, offset) is None
    utc_zone = Zone.of("Etc/UTC", 0)
    assert utc_zone is not None and utc_zone.utc
