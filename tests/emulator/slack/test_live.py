"""What the emulator reports as live in a message: as Slack renders it, or stricter."""

from __future__ import annotations

from emulator.slack.live import live_in_message, live_in_text

WJ = "\u2060"


def kinds(text: str, auto_parse: bool = False) -> list[tuple[str, str, str | None]]:
    return [(p.kind, p.target, p.label) for p in live_in_text(text, auto_parse=auto_parse)]


def test_tokens_are_live_everywhere_even_inside_code() -> None:
    assert kinds("<@U_BOB> `<#C_OTHER|x>` ```<!subteam^S1>``` <!here> <!date^1^{date}|d> <foo>") == [
        ("user", "U_BOB", None),
        ("channel", "C_OTHER", "x"),
        ("usergroup", "S1", None),
        ("broadcast", "here", None),
        ("date", "!date^1^{date}", "d"),
        ("unknown", "foo", None),
    ]


def test_escaped_tokens_are_text() -> None:
    assert kinds("&lt;@U_BOB&gt; &lt;!channel&gt; &lt;https://evil|https://good&gt;") == []


def test_links_are_disguised_when_the_label_is_not_the_url() -> None:
    parts = live_in_text(
        "<https://evil.example|https://grafana.corp> <https://a.example/?x=1&amp;y> "
        "<https://b.example|https://b.example>",
        auto_parse=False,
    )
    assert [p.disguised for p in parts] == [True, False, False]


def test_bare_broadcasts_count_outside_code_unless_defused() -> None:
    assert kinds("@here, @Channel and @everyone!") == [
        ("broadcast", "here", None),
        ("broadcast", "channel", None),
        ("broadcast", "everyone", None),
    ]
    assert kinds(f"@{WJ}here `@here` ```@channel```") == []


def test_bare_names_count_only_under_automatic_parsing() -> None:
    assert kinds("#incident and @oncall") == []
    assert kinds("#incident and @oncall", auto_parse=True) == [
        ("channel", "#incident", None),
        ("usergroup", "@oncall", None),
    ]


def test_a_message_is_read_with_its_blocks_and_their_verbatim_flags() -> None:
    message = {
        "text": "fallback <@U_ALICE>",
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": "#incident", "verbatim": True}},
            {"type": "section", "text": {"type": "mrkdwn", "text": "#incident"}},
            {
                "type": "actions",
                "elements": [{"type": "button", "text": {"type": "plain_text", "text": "<!channel>"}}],
            },
            {
                "type": "rich_text",
                "elements": [
                    {
                        "type": "rich_text_section",
                        "elements": [
                            {"type": "link", "url": "https://evil.example", "text": "https://good.example"}
                        ],
                    }
                ],
            },
        ],
    }
    found = [(p.kind, p.where, p.disguised) for p in live_in_message(message, channels=["incident"])]
    assert found == [
        ("user", "text", False),
        ("channel", "blocks/1/text", False),
        ("broadcast", "blocks/2/elements/0/text", False),
        ("link", "blocks/3/elements/0/elements/0", True),
    ]
