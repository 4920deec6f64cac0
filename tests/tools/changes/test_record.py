"""The change record: bounded, stable ids, and a hostile writer's records refused."""

from __future__ import annotations

import json

import pytest

from tools.changes.record import MAX_DIFF, MAX_WHAT, Change, cut_diff
from tools.errors import MalformedChange


def _change(**fields: object) -> Change:
    base: dict[str, object] = {
        "target": "web-03",
        "kind": "package",
        "at": 1_700_000_000.0,
        "what": "upgrade nginx",
    }
    return Change(**{**base, **fields})  # type: ignore[arg-type]


def test_a_change_round_trips_through_json() -> None:
    change = _change(who="alice", diff="--- a\n+++ b\n", source="runner", url="https://ci/1", seen=True)
    assert Change.from_json(change.to_json()) == change


def test_the_id_is_stable_and_tells_changes_apart() -> None:
    assert _change().id == _change().id
    assert _change().id != _change(what="upgrade openssl").id
    assert _change().id != _change(at=1_700_000_001.0).id


def test_bounded_cuts_every_text_and_folds_lines() -> None:
    change = _change(
        what="x" * (MAX_WHAT + 50) + "\n<!channel>", who="a\nb", diff="d" * (MAX_DIFF * 3)
    ).bounded()
    assert len(change.what) == MAX_WHAT and "\n" not in change.what
    assert change.who == "a b"
    assert len(change.diff) <= MAX_DIFF and change.diff.endswith("more characters]")
    assert change.bounded() == change  # cutting twice changes nothing


def test_cut_diff_keeps_a_short_diff_whole() -> None:
    assert cut_diff("--- a\n+++ b\n") == "--- a\n+++ b\n"


@pytest.mark.parametrize(
    "raw",
    [
        "[]",
        "not json",
        json.dumps({"target": "web-03", "kind": "rm -rf", "at": 1.0, "what": "x"}),
        json.dumps({"target": "web-03", "kind": "package", "at": "soon", "what": "x"}),
        json.dumps({"target": "web-03", "kind": "package", "at": True, "what": "x"}),
        json.dumps({"target": "web-03", "kind": "package", "at": -1, "what": "x"}),
        json.dumps({"target": "web-03", "kind": "package", "at": 1.0, "what": 7}),
        json.dumps({"target": "web-03", "kind": "package", "at": 1.0, "what": "x", "admin": True}),
        json.dumps({"target": "web-03", "kind": "package", "at": 1.0, "what": "x", "seen": "yes"}),
        json.dumps({"target": "web-03", "kind": "package", "at": 1.0, "what": "x" * (MAX_WHAT + 1)}),
        json.dumps({"target": "web-03", "kind": "package", "at": 1.0, "what": "two\nlines"}),
        json.dumps({"kind": "package", "at": 1.0, "what": "x"}),
    ],
)
def test_a_record_chatops_did_not_write_is_refused(raw: str) -> None:
    with pytest.raises(MalformedChange):
        Change.from_json(raw)


def test_an_unknown_kind_is_refused_when_built() -> None:
    with pytest.raises(MalformedChange):
        _change(kind="anything")
