"""Evidence ids: every tool result the model reads begins with ``[E<n>]``, and what may be cited.

``n`` counts the run's tool results from 1 in the order they reach the model (``RunState.
evidence_seq``, stored with the results in the same write: stable across a suspend, a resume on
another worker and a condense, never reused). Refused and failed calls get an id too: the model
reads them. The id is stored in the result's ``meta["evidence"]`` and put before its text where
the history is put on the wire (``model_text``: every client, and the condenser, send what it
returns), so the stored output, the run card and loop detection see the output without it.

A result may be **cited** only if the call ran (``meta["refused"]`` unset: a refusal is the
runtime's own text, and may repeat what the model sent) and is not ``update_findings``' (which
repeats the model's own claims). A quote **occurs** in a result when, with whitespace runs
collapsed on both sides, it is a non-empty substring of the output as the model read it (the
label excluded) and not of the call's own arguments (a tool that echoes what it was sent, such
as ``echo``, would otherwise verify anything the model wrote).

The index is updated from the messages appended since it last looked, so checking a quote costs
the cited output's length, never the run's; and since an indexed result never changes, a quote is
checked against it once, and a hypothesis resent unchanged is verified once (``remember``). Looking
at a result costs a dictionary entry: its ``Source`` (the output as the model read it, its call's
tool and arguments) is built from the stored message only when a citation names it.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from agent.findings import Checked
from agent.types import Message

FINDINGS_TOOL = "update_findings"
REF = re.compile(r"E[1-9][0-9]{0,6}")
_WIRE_LABEL = re.compile(r"\[(E[1-9][0-9]{0,6})\] ")


def evidence_ref(seq: int) -> str:
    return f"E{seq}"


def labelled(ref: str, text: str) -> str:
    """The result as the model reads it."""
    return f"[{ref}] {text}"


def model_text(message: Message, empty: str = "") -> str:
    """A tool result's text as the model reads it: its evidence label first, when it has one."""
    text = message.content or empty
    ref = message.meta.get("evidence")
    return f"[{ref}] {text}" if ref else text


def split_label(text: str) -> tuple[str | None, str]:
    """``model_text``'s inverse, for whoever reads the wire (a scripted model): ``("E3", "output")``
    for ``"[E3] output"``, ``(None, text)`` without a label; exactly one label is taken off."""
    match = _WIRE_LABEL.match(text)
    return (match.group(1), text[match.end() :]) if match else (None, text)


def collapsed(text: str) -> str:
    """Whitespace runs collapsed to one space, ends stripped (what a quote is matched on)."""
    return " ".join(text.split())


@dataclass(frozen=True)
class Source:
    """One tool result of the run, as the model read it."""

    ref: str
    output: str  # as the model read it, without the label
    tool: str
    call_id: str
    arguments: str
    citable: bool
    target: str | None = None

    def problem_with(self, quote: str) -> str | None:
        """Why ``quote`` does not verify against this result (``None``: it does)."""
        if not self.citable:
            why = "nothing ran" if self.tool != FINDINGS_TOOL else "it repeats your own findings"
            return f"{self.ref} cannot be cited ({why})"
        wanted = collapsed(quote)
        if not wanted:
            return "the quote is empty"
        if wanted not in collapsed(self.output):
            return f"the quote does not occur in {self.ref}'s output"
        if wanted in collapsed(self.arguments):
            return f"the quote repeats the arguments of the call that produced {self.ref}"
        return None


@dataclass(frozen=True, slots=True)
class _Entry:
    """An indexed result, kept until a citation names it: its message and its call's tool and arguments."""

    message: Message
    tool: str
    arguments: str
    is_check: bool  # the approved change's check after the change's own output (``agent.checks``)

    def source(self, ref: str) -> Source:
        message = self.message
        meta = message.meta
        content = message.content or ""
        check = meta.get("check")
        target = meta.get("target")
        if self.is_check and check is not None:
            return Source(
                ref,
                content[check["at"] :],
                self.tool,
                message.tool_call_id or "",
                self.arguments,
                True,
                target,
            )
        if check is not None and check.get("evidence"):
            # The change's own output ends where its check's "\n\n[E<n>] " begins.
            content = content[: max(0, check["at"] - len(check["evidence"]) - 5)]
        citable = not meta.get("refused") and self.tool != FINDINGS_TOOL
        return Source(ref, content, self.tool, message.tool_call_id or "", self.arguments, citable, target)


class EvidenceIndex:
    """The run's tool results by evidence id, kept up to date as the history grows."""

    def __init__(self) -> None:
        self._messages: Sequence[Message] | None = None
        self._seen = 0
        self._entries: dict[str, _Entry] = {}  # every result by id, as indexed
        self._sources: dict[str, Source] = {}  # those a citation named, built then
        self._calls: dict[str, tuple[str, str]] = {}  # call id -> (tool, arguments)
        # What a "no fault found" update lists as checked, in id order: the citable results, kept as
        # they arrive, and their ``Checked`` built once each, only when an update asks (most
        # updates never do; none pays per update for the run's length).
        self._citable: list[str] = []
        self._checked: list[Checked] = []
        self._last_citable = 0  # the number of the last citable id indexed: ids arrive in order
        self._verdicts: dict[Hashable, object] = {}  # what ``remember`` kept
        self._problems: dict[tuple[str, str], str | None] = {}  # ``problem_with``'s, by (ref, quote)

    def sync(self, messages: Sequence[Message]) -> EvidenceIndex:
        """Index what was appended to ``messages`` since the last look (all of it for a new list:
        a condensed or reloaded history)."""
        if messages is not self._messages or len(messages) < self._seen:
            self._messages, self._seen = messages, 0
            self._entries.clear()
            self._sources.clear()
            self._calls.clear()
            self._citable.clear()
            self._checked.clear()
            self._last_citable = 0
            self._verdicts.clear()
            self._problems.clear()
        for message in messages[self._seen :]:
            self._add(message)
        self._seen = len(messages)
        return self

    def _add(self, message: Message) -> None:
        if message.role == "assistant":
            for call in message.tool_calls:
                self._calls[call.id] = (call.name, call.arguments)
            return
        meta = message.meta
        ref = meta.get("evidence") if message.role == "tool" else None
        if not ref:
            return
        # Only what the result's ``Source`` needs from the run as it is now (the call it answers,
        # looked up once: a later turn reusing the call id changes nothing); the ``Source`` itself
        # is built when a citation names it (``source``): most results are never cited.
        call_id = message.tool_call_id or ""
        known = self._calls.get(call_id)
        tool, arguments = known if known is not None else (meta.get("tool", ""), "")
        check = meta.get("check")
        self._index(
            ref, _Entry(message, tool, arguments, False), not meta.get("refused") and tool != FINDINGS_TOOL
        )
        if check is not None and check.get("evidence"):
            # An approved change's check, in the change's message under its own id (``agent.checks``).
            self._index(check["evidence"], _Entry(message, check["tool"], check["arguments"], True), True)

    def _index(self, ref: str, entry: _Entry, citable: bool) -> None:
        if ref in self._entries:  # never seen (ids are never reused): nothing remembered of it holds
            self._verdicts.clear()
            self._problems.clear()
            self._sources.pop(ref, None)
        self._entries[ref] = entry
        if citable:
            self._citable.append(ref)
            number = _number(ref)
            if number < self._last_citable:
                # Never seen (ids reach the history in order); built again from the sorted list.
                self._citable.sort(key=_number)
                self._checked.clear()
            self._last_citable = max(self._last_citable, number)

    def source(self, ref: str) -> Source | None:
        source = self._sources.get(ref)
        if source is None:
            entry = self._entries.get(ref)
            if entry is None:
                return None
            source = self._sources[ref] = entry.source(ref)
        return source

    def citable(self) -> list[Source]:
        """Every result that may be cited, in id order."""
        return [self._source(ref) for ref in self._citable]

    def checked(self) -> tuple[Checked, ...]:
        """Every result that may be cited, in id order, as findings list what was checked."""
        for ref in self._citable[len(self._checked) :]:
            source = self._source(ref)
            self._checked.append(Checked(ref=source.ref, tool=source.tool, target=source.target))
        return tuple(self._checked)

    def _source(self, ref: str) -> Source:
        source = self.source(ref)
        assert source is not None  # every listed ref is indexed
        return source

    def recall(self, key: Hashable) -> object | None:
        """What ``remember`` kept for ``key`` (``None``: nothing)."""
        return self._verdicts.get(key)

    def remember(self, key: Hashable, refs: Iterable[str], verdict: object) -> None:
        """Keep ``verdict``, a judgment of a claim citing ``refs`` against this index, for ``key``,
        when every one of ``refs`` names an indexed result: an indexed output never changes, so the
        same claim against it gets the same verdict (the model resends its hypotheses unchanged
        with every update). A claim citing an id not indexed (yet) is not kept: judged afresh each
        time. Forgotten when the index starts over (a condensed or reloaded history)."""
        if self._entries.keys() >= set(refs):
            if len(self._verdicts) >= _VERDICTS_KEPT:
                self._verdicts.clear()
            self._verdicts[key] = verdict

    def problem_with(self, ref: str, quote: str) -> str | None:
        """Why a claim of ``quote`` from ``ref`` is not verified (``None``: it is)."""
        if not REF.fullmatch(ref):
            return f"{ref!r} is not an evidence id (E1, E2, ...)"
        source = self.source(ref)
        if source is None:
            return f"{ref} names no tool result of this run"
        # An indexed result never changes: a quote is checked against it once (the check costs the
        # output's length; the model quotes the same lines again as its findings grow).
        key = (ref, quote)
        if key in self._problems:
            return self._problems[key]
        problem = self._problems[key] = source.problem_with(quote)
        if len(self._problems) > _VERDICTS_KEPT:
            self._problems.clear()
        return problem


_VERDICTS_KEPT = 1024  # hypotheses, and quotes, remembered per run (an update holds at most 12 of 8)


def _number(ref: str) -> int:
    return int(ref[1:])
