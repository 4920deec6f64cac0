"""Markdown -> Slack mrkdwn, escaping and splitting: pure text, no Slack needed."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from bot.slack.mrkdwn import escape, split_mrkdwn, to_mrkdwn, truncate


def test_emphasis_links_and_headings_become_mrkdwn() -> None:
    source = "# Disk on web-03\n**Fixed**: removed *old* logs, ~~maybe~~. See [runbook](https://wiki.example/x?a=1&b=2)."
    assert to_mrkdwn(source) == (
        "*Disk on web-03*\n"
        "*Fixed*: removed _old_ logs, ~maybe~. See <https://wiki.example/x?a=1&amp;b=2|runbook>."
    )


def test_bullets_rules_and_underscore_bold() -> None:
    assert to_mrkdwn("- one __two__\n* three\n---") == "• one *two*\n• three\n──────────"


def test_reserved_characters_are_escaped_but_mentions_survive() -> None:
    out = to_mrkdwn("if a < b && c > d ping <@U123> in <#C42|ops>")
    assert out == "if a &lt; b &amp;&amp; c &gt; d ping <@U123> in <#C42|ops>"


def test_broadcast_mentions_from_the_model_cannot_page_a_room() -> None:
    assert to_mrkdwn("<!channel> <!here> disk full") == "&lt;!channel&gt; &lt;!here&gt; disk full"


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
