"""How typed text becomes Slack text and rich_text blocks."""

from __future__ import annotations

from emulator.slack.text import escape_user_text, mentioned_users, rich_text_block, translate_mentions

NAMES = {"ops": "U_OPS", "alice": "U_ALICE"}
GROUPS = {"oncall": "S_ONCALL"}


def test_raw_text_is_escaped_but_slack_tokens_survive() -> None:
    assert escape_user_text("a < b & c > d") == "a &lt; b &amp; c &gt; d"
    assert escape_user_text("<@U_OPS> see <https://x.test/a?b=1|the page> &amp; more") == (
        "<@U_OPS> see <https://x.test/a?b=1|the page> &amp; more"
    )


def test_at_names_become_mentions_like_the_client_autocompletes() -> None:
    text = translate_mentions("@ops, ask @oncall and @here; @nobody stays", NAMES, GROUPS)
    assert text == "<@U_OPS>, ask <!subteam^S_ONCALL> and <!here>; @nobody stays"
    assert translate_mentions("mail ops@example.com", NAMES, GROUPS) == "mail ops@example.com"
    assert mentioned_users("<@U_OPS> and <@U_ALICE|alice> and <@U_OPS>") == ["U_OPS", "U_ALICE"]


def test_rich_text_has_mentions_links_and_styles() -> None:
    block = rich_text_block("<@U_OPS> restart *api* _now_, see <https://x.test|docs> &amp; `a &lt; b`")
    assert block["type"] == "rich_text"
    assert block["elements"][0]["elements"] == [
        {"type": "user", "user_id": "U_OPS"},
        {"type": "text", "text": " restart "},
        {"type": "text", "text": "api", "style": {"bold": True}},
        {"type": "text", "text": " "},
        {"type": "text", "text": "now", "style": {"italic": True}},
        {"type": "text", "text": ", see "},
        {"type": "link", "url": "https://x.test", "text": "docs"},
        {"type": "text", "text": " & "},
        {"type": "text", "text": "a < b", "style": {"code": True}},
    ]
