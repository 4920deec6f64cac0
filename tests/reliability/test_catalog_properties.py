"""Property tests of the catalog's argument substitution: a value is text in its slot, nothing more.

Whatever the model passes (quotes, ``;``, ``$(...)``, braces, spaces, unicode), a ``{param}`` in
an argv element becomes exactly that one element, is never re-expanded as a template, and inside
a URL cannot add a path segment, a query, a fragment or a host. Values that would be read as an
option (a leading ``-``) or smuggle control characters are refused before anything runs.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.arguments import unshowable_character
from tests.tools.fakes import FakeCommands
from tools.base import FunctionTool
from tools.catalog import load_catalog
from tools.catalog.build import render_argv
from tools.catalog.templates import placeholders, render

pytestmark = pytest.mark.reliability

NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
ANY_TEXT = st.text(max_size=40)
HOSTILE = st.sampled_from(
    ["; rm -rf /", "$(reboot)", "`id`", "{path}", "{{x}}", "a b", "'\"", "../..", "%2F", "?q=1#f"]
)
VALUES = ANY_TEXT | HOSTILE


@settings(max_examples=300, deadline=None)
@given(
    literals=st.lists(
        st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=6), min_size=3, max_size=3
    ),
    first=VALUES,
    second=VALUES,
)
def test_a_value_fills_its_slot_literally_and_is_never_expanded_again(
    literals: list[str], first: str, second: str
) -> None:
    template = f"{literals[0]}{{a}}{literals[1]}{{b}}{literals[2]}"
    assert placeholders(template) == ["a", "b"]
    assert (
        render(template, {"a": first, "b": second})
        == literals[0] + first + literals[1] + second + literals[2]
    )


@settings(max_examples=300, deadline=None)
@given(names=st.lists(NAMES, min_size=1, max_size=4, unique=True), data=st.data())
def test_each_argv_element_stays_one_element(names: list[str], data: st.DataObject) -> None:
    template = ["prog", *(f"--{name}={{{name}}}" for name in names), "--", f"{{{names[0]}}}"]
    given_names = data.draw(st.lists(st.sampled_from(names), unique=True))
    values = {name: data.draw(VALUES) for name in given_names}
    argv = render_argv(template, values)
    # An element whose parameter was not given is left out; every other one is exactly one element.
    expected = ["prog", *(f"--{n}={values[n]}" for n in names if n in values), "--"]
    if names[0] in values:
        expected.append(values[names[0]])
    assert argv == expected


@settings(max_examples=300, deadline=None)
@given(name=VALUES, query=VALUES)
def test_a_value_in_a_url_cannot_change_its_host_path_or_query(name: str, query: str) -> None:
    url = render(
        "https://api.internal/v1/services/{name}/status?verbose={q}", {"name": name, "q": query}, encode=True
    )
    parts = urllib.parse.urlsplit(url)
    assert parts.scheme == "https" and parts.netloc == "api.internal" and parts.fragment == ""
    segments = parts.path.split("/")
    assert segments[:4] == ["", "v1", "services", urllib.parse.quote(name, safe="")] and segments[4:] == [
        "status"
    ]
    assert urllib.parse.unquote(segments[3]) == name
    assert urllib.parse.parse_qs(parts.query, keep_blank_values=True) == (
        {"verbose": [query]} if query else {"verbose": [""]}
    )


CATALOG = """
tools:
  - name: show_unit
    description: Show a unit's log lines matching a text.
    category: read_only
    params:
      unit: {type: string, pattern: "^[a-z0-9@._-]+$"}
      text: {type: string}
      note: {type: string, required: false}
    run: ["journal", "--unit={unit}", "--", "{text}", "note: {note}"]
"""
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _refused_text(value: str) -> bool:
    """A control character the catalog refuses, or one no approval card could show (agent.arguments)."""
    return bool(_CONTROL.search(value)) or unshowable_character(value) is not None


@pytest.fixture(scope="module")
def catalog_tool(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[FunctionTool[Any], FakeCommands]]:
    directory = tmp_path_factory.mktemp("catalog")
    fakes = FakeCommands(directory / "bin")
    fakes.add("journal", stdout="ok\n")
    path = directory / "tools.yaml"
    path.write_text(CATALOG)
    [loaded] = load_catalog(path, env=fakes.env).tools
    assert isinstance(loaded, FunctionTool)
    yield loaded, fakes


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=VALUES, note=st.none() | VALUES, unit=st.sampled_from(["api", "web@3", "-rf", "a b", "x\n"]))
def test_the_command_receives_each_value_as_one_argument_or_nothing_runs(
    catalog_tool: tuple[FunctionTool[Any], FakeCommands], text: str, note: str | None, unit: str
) -> None:
    tool, fakes = catalog_tool
    before = len(fakes.calls("journal"))
    arguments = {"unit": unit, "text": text, **({"note": note} if note is not None else {})}
    result = tool.execute(json.dumps(arguments), timeout=10)
    valid = (
        re.fullmatch(r"[a-z0-9@._-]+", unit) is not None
        and not unit.startswith("-")
        and not text.startswith("-")
        and not _refused_text(text)
        and (note is None or (not note.startswith("-") and not _refused_text(note)))
    )
    calls = fakes.calls("journal")
    if not valid:
        # Refused with the reason: a bad value, or a character an approval card could not show.
        reasons = ("invalid arguments", "cannot be shown on an approval card")
        assert result.is_error and any(r in result.output for r in reasons), result.output
        assert len(calls) == before  # refused before anything ran
        return
    assert not result.is_error, result.output
    expected = [f"--unit={unit}", "--", text, *([f"note: {note}"] if note is not None else [])]
    assert calls[-1] == expected and len(calls) == before + 1


def test_the_catalog_fixture_really_runs_the_command(
    catalog_tool: tuple[FunctionTool[Any], FakeCommands],
) -> None:
    tool, fakes = catalog_tool
    result = tool.execute(json.dumps({"unit": "api", "text": "$(reboot); echo pwned"}), timeout=10)
    assert not result.is_error and fakes.calls("journal")[-1] == ["--unit=api", "--", "$(reboot); echo pwned"]
