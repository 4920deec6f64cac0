"""Markdown -> Slack mrkdwn, escaping and splitting: pure text, no Slack needed."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from bot.slack.rendering.mrkdwn import (
    WORD_JOINER,
    escape,
    inert,
    link,
    mention,
    split_mrkdwn,
    to_mrkdwn,
    truncate,
)
from emulator.slack.live import live_in_text


def test_emphasis_links_and_headings_become_mrkdwn() -> None:
    source = "# Disk on web-03\n**Fixed**: removed *old* logs, ~~maybe~~. See [runbook](https://wiki.example/x?a=1&b=2)."
    assert to_mrkdwn(source) == (
        "*Disk on web-03*\n"
        "*Fixed*: removed _old_ logs, ~maybe~. See runbook (<https://wiki.example/x?a=1&amp;b=2>)."
    )


def test_a_link_is_shown_as_its_real_url_never_under_another_label() -> None:
    assert to_mrkdwn("[https://grafana.corp/d/1](https://evil.example)") == (
        "https://grafana.corp/d/1 (<https://evil.example>)"
    )
    assert to_mrkdwn("[https://wiki.example/x](https://wiki.example/x)") == "<https://wiki.example/x>"
    assert to_mrkdwn("see <https://wiki.example/x>") == "see <https://wiki.example/x>"
    # A Slack-style labelled link written by the model is text, not a link.
    assert to_mrkdwn("<https://evil.example|https://grafana.corp>") == (
        "&lt;https://evil.example|https://grafana.corp&gt;"
    )
    # A ``|`` in a URL cannot start a label.
    assert to_mrkdwn("[x](https://evil.example|https://grafana.corp)") == (
        "x (<https://evil.example%7Chttps://grafana.corp>)"
    )
    assert link("https://a.example/?q=<b>&c") == "<https://a.example/?q=&lt;b&gt;&amp;c>"


def test_bullets_rules_and_underscore_bold() -> None:
    assert to_mrkdwn("- one __two__\n* three\n---") == "• one *two*\n• three\n──────────"


def test_mentions_written_by_the_model_are_escaped_text() -> None:
    out = to_mrkdwn("if a < b && c > d ping <@U123> in <#C42|ops> and <!subteam^S1>")
    assert (
        out
        == "if a &lt; b &amp;&amp; c &gt; d ping &lt;@U123&gt; in &lt;#C42|ops&gt; and &lt;!subteam^S1&gt;"
    )
    assert live_in_text(out, auto_parse=False) == []


def test_broadcast_mentions_from_the_model_cannot_page_a_room() -> None:
    assert to_mrkdwn("<!channel> <!here> disk full") == "&lt;!channel&gt; &lt;!here&gt; disk full"
    bare = to_mrkdwn("@here @Channel and @everyone: disk full")
    assert bare == f"@{WORD_JOINER}here @{WORD_JOINER}Channel and @{WORD_JOINER}everyone: disk full"
    assert live_in_text(bare, auto_parse=False) == []


def test_the_rule_holds_inside_the_models_code_too() -> None:
    out = to_mrkdwn("`<@U_BOB> @here` and\n```\n<!channel> @here\n```")
    assert out == f"`&lt;@U_BOB&gt; @{WORD_JOINER}here` and\n```\n&lt;!channel&gt; @{WORD_JOINER}here\n```"
    # The model's backticks can move where Slack sees code end: still nothing live.
    moved = to_mrkdwn("``x`@here`` and ```\nnot a fence ``` @channel\n```")
    assert live_in_text(moved, auto_parse=False) == []


def test_the_bot_names_people_by_id_and_nothing_else() -> None:
    assert mention("U_ALICE") == "<@U_ALICE>"
    assert mention("<!channel>") == "&lt;!channel&gt;"
    assert mention("chatops") == "chatops"
    assert inert("a <@U1> & @here") == f"a &lt;@U1&gt; &amp; @{WORD_JOINER}here"


def test_code_is_kept_verbatim_apart_from_escaping() -> None:
    source = "run `rm *.log` then:\n```bash\necho **not bold** <x>\n```"
    assert to_mrkdwn(source) == "run `rm *.log` then:\n```\necho **not bold** &lt;x&gt;\n```"


def test_an_unclosed_fence_is_closed() -> None:
    assert to_mrkdwn("```\nls").endswith("\n```")


def test_truncate_marks_the_cut_and_never_splits_an_entity() -> None:
    assert truncate("short", 10) == "short"
    assert truncate("abc &amp; def", 7) == "abc…"
    assert len(truncate("x" * 5000, 3000)) == 3000


def test_split_keeps_code_blocks_renderable_on_each_side() -> None:
    text = "intro\n\n```\n" + "line of code\n" * 400 + "```\nafter"
    chunks = split_mrkdwn(text, 1000)
    assert len(chunks) > 4
    for chunk in chunks:
        assert len(chunk) <= 1000
        assert chunk.count("```") % 2 == 0, chunk[:60]
    assert chunks[-1].endswith("after")


def test_split_never_cuts_inside_a_link() -> None:
    link = "<https://example.com/" + "a" * 50 + "|label>"
    text = " ".join([link] * 200)
    for chunk in split_mrkdwn(text, 500):
        assert chunk.count("<") == chunk.count(">"), chunk


@given(st.text(alphabet=st.sampled_from("ab <>&*_`~\n#-[]()|:/"), max_size=3000), st.integers(40, 800))
def test_split_respects_the_limit_and_loses_no_words(text: str, limit: int) -> None:
    converted = to_mrkdwn(text)
    chunks = split_mrkdwn(converted, limit)
    assert all(len(chunk) <= limit for chunk in chunks)
    words = re.findall(r"[a-z]+", converted)
    assert re.findall(r"[a-z]+", "".join(chunks)) == words


@given(st.text(max_size=500))
def test_escape_leaves_no_raw_angle_brackets(text: str) -> None:
    escaped = escape(text)
    assert "<" not in escaped and ">" not in escaped
