"""The alert root message: what an alert's sender wrote is shown inert, links as their real URL."""

from __future__ import annotations

from dataclasses import replace

from slack_sdk.models.blocks import Block as SdkBlock

from bot.runs.presenter import AlertView
from bot.slack.delivery.alert_presenter import alert_blocks
from emulator.slack.blocks import block_errors
from emulator.slack.live import live_in_message

HOSTILE = AlertView(
    group_id="g" * 32,
    source="alertmanager",
    status="firing",
    title="<!channel> DiskFull <https://evil.example|grafana>",
    severity="critical",
    target="web-03",
    labels=(("instance", "web-03:9100"), ("team", "<@U0BOSS>")),
    summary="see [the runbook](https://evil.example) @here",
    links=(("source", "http://prometheus.example/graph?g0.expr=up"),),
    investigate_button=True,
)


def test_the_root_message_shows_the_alert_inert_and_offers_investigate() -> None:
    blocks = alert_blocks(HOSTILE)
    assert block_errors(blocks) == []
    for block in blocks:
        SdkBlock.parse(block)  # slack_sdk's own models accept every block
    message = {"text": "FIRING", "blocks": blocks}
    live = live_in_message(message)
    assert [item for item in live if item.kind != "link"] == []  # no mention, no broadcast
    assert all("evil.example" not in item.target or "|" not in item.target for item in live)
    actions = [block for block in blocks if block["type"] == "actions"]
    assert actions and actions[0]["elements"][0]["value"] == "g" * 32


def test_a_resolved_alert_offers_no_button() -> None:
    resolved = AlertView(
        group_id="g" * 32, source="grafana", status="resolved", title="x", investigate_button=True
    )
    assert not [block for block in alert_blocks(resolved) if block["type"] == "actions"]


def test_the_clicker_who_started_the_investigation_is_the_only_live_mention() -> None:
    clicked = replace(HOSTILE, investigate_button=False, investigated_by="U_BOB")
    blocks = alert_blocks(clicked)
    assert block_errors(blocks) == [] and not [b for b in blocks if b["type"] == "actions"]
    live = live_in_message({"text": "FIRING", "blocks": blocks})
    assert [(item.kind, item.target) for item in live if item.kind != "link"] == [("user", "U_BOB")]
    # A value that is no Slack user ID (it never is: Slack's signed click names the clicker) is inert.
    forged = alert_blocks(replace(clicked, investigated_by="<!channel>"))
    assert [item for item in live_in_message({"text": "x", "blocks": forged}) if item.kind != "link"] == []


def test_the_investigations_answer_on_the_root_reads_as_formatted_and_stays_inert() -> None:
    answered = replace(
        HOSTILE, answer="**Root cause**: the api's logs. See [grafana](https://evil.example/d) <!here>"
    )
    blocks = alert_blocks(answered)
    shown = next(b["text"]["text"] for b in blocks if "What the investigation found" in str(b))
    assert "**" not in shown and "*Root cause*" in shown  # Markdown bold became Slack's bold
    live = live_in_message({"text": "x", "blocks": blocks})
    assert [item for item in live if item.kind != "link"] == [] and not [i for i in live if i.disguised]


def test_the_root_shows_no_citation_so_none_can_look_checked_there() -> None:
    # The thread's answer shows each citation with code's verdict; the root's shortened copy cannot
    # (its cut may separate a citation from its check), so it shows none, forged or real.
    answered = replace(
        HOSTILE,
        answer='The disk is full of api rotations [E2: "api.log.9"]. Also [E9: "rm -rf / done"] '
        "and [\uff25\uff13 verified] and [E 4: ok].",
    )
    shown = next(
        b["text"]["text"] for b in alert_blocks(answered) if "What the investigation found" in str(b)
    )
    assert "[E" not in shown and "\uff25" not in shown and "E9" not in shown and "E 4" not in shown
    assert "The disk is full of api rotations." in shown and "Also and and." in shown
    assert any("checked against the tool output: in the thread" in str(b) for b in alert_blocks(answered))
