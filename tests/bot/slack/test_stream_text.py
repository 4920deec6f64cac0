"""``inert_markdown``: what a model or tool writes shows as text in a stream, and does nothing else."""

from __future__ import annotations

from bot.slack.rendering.stream_text import inert_markdown, plain_markdown
from tests.bot.slack.test_streaming import HOSTILE


def test_inert_markdown_leaves_nothing_live() -> None:
    text = inert_markdown(HOSTILE + " [a]([b](https://x.example)) <https://y.example>")
    for token in ("<!", "<@", "<http", "](", "]["):
        assert token not in text
    assert "@\u2060here" in text and "#\u2060incident" in text and "@\u2060oncall" in text
    assert "the runbook (https://evil.example/phish)" in text
    assert inert_markdown("a@b.example 5 # items, C# rocks") == "a@b.example 5 # items, C# rocks"
    assert inert_markdown("[x](javascript:alert(1))") == "[x]\u2060(javascript:alert(1))"


def test_only_the_runs_people_are_named_and_only_from_bare_ids() -> None:
    text = inert_markdown("<@U_ALICE> @U_ALICE U_ALICE U_EVE `U_ALICE`", frozenset({"U_ALICE"}))
    assert text == "&lt;@\u2060U_ALICE&gt; @\u2060U_ALICE <@U_ALICE> U_EVE `U_ALICE`"


def test_plain_markdown_is_one_short_line() -> None:
    assert (
        plain_markdown("a\n\n<!here>  " + "b" * 500, 40) == "a &lt;!here&gt; " + "b" * 29 + "…"
    )  # cut before escaping


def test_the_bots_formatting_stays_formatting_as_when_posted() -> None:
    """Emoji codes, emphasis and quotes are Markdown a stream shows as such; only a quote's ``>``
    at a line's start outside code is a raw ``>`` (every other one, and every ``<``, an entity)."""
    text = inert_markdown(
        ":information_source: _simulated_ *really*\n> quoted <!channel> a > b\n```\n> code\n```\n  > again"
    )
    assert text == (
        ":information_source: _simulated_ *really*\n> quoted &lt;!channel&gt; a &gt; b\n"
        "```\n&gt; code\n```\n  > again"
    )
