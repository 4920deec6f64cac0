"""The approval card: everything that will execute, complete, or the call is refused.

The card shows the tool, who asked, when the approval expires, the target, why it is asked when
the tool alone would not ask (a read-only network check of a host that is not on the egress
allow list), the exact command or request (when the tool can say it), every argument verbatim
as indented JSON, and for a destructive call its dry run and how old that dry run is. Nothing is ever cut: long text is split
over several sections (``bot.slack.rendering.verbatim``). A call whose card would not fit Slack's limits
(3,000 characters a section, 50 blocks, about 12,000 characters in all) is refused before anyone
is asked: ``approval_card_problem`` says why, in words the model can act on. Should such a card be
drawn anyway, it says it is incomplete and offers no Approve button.

Everything the model or a tool wrote is inert text here (escaped, in code blocks, unshowable
characters as escapes); only the bot's own formatting, dates and the people it names are live.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from agent.arguments import check_depth
from agent.tooling import ToolCategory
from agent.verification import Verification
from bot.policy.file import USER
from bot.policy.rules import Requirement
from bot.runs.approvals import Approval, ApprovalStatus
from bot.slack.rendering.blockkit import (
    ACTION_APPROVE,
    ACTION_DECLINE,
    APPROVAL_CONTROLS,
    CARD_TEXT,
    CONFIRM_BUTTON,
    CONFIRM_TEXT,
    CONFIRM_TITLE,
    MAX_BLOCKS,
    SECTION_FIELD,
    SECTION_TEXT,
    Block,
    actions,
    button,
    context,
    mrkdwn,
    plain,
    section,
    slack_date,
    texts,
)
from bot.slack.rendering.mrkdwn import escape, inert, inline_code, mention, one_line, plural, truncate
from bot.slack.rendering.people import name_people, run_people
from bot.slack.rendering.verbatim import (
    FENCE,
    code_block,
    code_pieces,
    slack_length,
    visible_json,
    visible_text,
)

NOTIFICATION_TEXT = 300
RATIONALE_SHOWN = 300  # characters of the model's words on the card (one line)
DERIVED_VALUE_SHOWN = 80  # characters of each derived value on the card's first line
DERIVED_VALUES_SHOWN = 8
TARGET_ARGUMENT = "target"
_RENDER_DEPTH = 64  # deeper arguments never reach a card (agent.arguments refuses them); shown raw


@dataclass(frozen=True)
class ApprovalCard:
    """The blocks of a card, and why they are not the whole call (``None``: they are)."""

    blocks: list[Block]
    problem: str | None


@dataclass(frozen=True)
class _Part:
    """One text shown verbatim in code blocks: the command, the arguments or the dry run."""

    what: str  # "the arguments are" ...: the start of a sentence for the model
    label: str
    shown: str  # made visible (``verbatim``), not yet escaped for mrkdwn
    advice: str

    def sections(self) -> list[Block]:
        room = SECTION_TEXT - slack_length(self.label) - 1 - 2 * len(FENCE)
        pieces = code_pieces(self.shown, room)
        first = f"{self.label}\n{code_block(pieces[0])}"
        return [_exact_section(first), *(_exact_section(code_block(piece)) for piece in pieces[1:])]


def approval_text(approval: Approval) -> str:
    """The notification fallback for an approval card."""
    pending = approval.status is ApprovalStatus.PENDING
    verb = "Approval needed" if pending else f"Approval {approval.status.value}"
    tool = inert(one_line(approval.tool, 100))
    summary = f"{verb}: {tool} ({approval.category.value}) for {mention(approval.requester)}"
    return truncate(summary, NOTIFICATION_TEXT)


def approval_blocks(approval: Approval) -> list[Block]:
    """The card: the call in full; buttons while pending, the decision once made."""
    return approval_card(approval).blocks


def approval_card_problem(approval: Approval) -> str | None:
    """Why the card cannot show this call completely within Slack's limits, for the model."""
    return approval_card(approval).problem


def approval_card(approval: Approval) -> ApprovalCard:
    derived = derived_line(approval)
    head = [section(derived)] if derived else []  # the card's first line: nobody asked for these values
    head.append(section(_headline(approval)))
    facts, target_problem = _facts(approval)
    head.append(facts)
    others = others_line(approval)
    if others is not None:  # said before anyone clicks: the requester is not told only after confirming
        head.append(context(others))
    why, why_problem = _why(approval)
    if why is not None:
        head.append(why)
    if approval.rationale:
        head.append(context(rationale_line(approval.rationale)))
    parts = _parts(approval)
    part_sections = [part.sections() for part in parts]
    full = [*head, *(block for blocks in part_sections for block in blocks), _footer(approval, True)]
    problem = target_problem or why_problem or _size_problem(full, parts, part_sections)
    if problem is None:
        return ApprovalCard(full, None)
    return ApprovalCard(_incomplete(approval, head, part_sections, problem), problem)


def card_limits_problem(blocks: list[Block]) -> str | None:
    """Why Slack would refuse these blocks as they are (after redaction lengthened them, say)."""
    for block in blocks:
        text = block.get("text")
        if isinstance(text, dict) and slack_length(str(text.get("text", ""))) > SECTION_TEXT:
            size = slack_length(str(text.get("text", "")))
            return f"a section of the approval card is {size:,} characters (at most {SECTION_TEXT:,}): shorten the arguments"
        for field in block.get("fields") or []:
            if slack_length(str(field.get("text", ""))) > SECTION_FIELD:
                return f"a field of the approval card is too long (at most {SECTION_FIELD:,} characters): shorten the arguments"
    total = _text_length(blocks)
    if total > CARD_TEXT:
        return (
            f"the approval card would be {total:,} characters (at most {CARD_TEXT:,}): shorten the arguments"
        )
    if len(blocks) > MAX_BLOCKS:
        return (
            f"the approval card would have {len(blocks)} blocks (at most {MAX_BLOCKS}): shorten the arguments"
        )
    return None


def decision_line(approval: Approval) -> str:
    """``Approved by @x at <time>`` and its relatives."""
    when = f" at {slack_date(approval.decided_at)}" if approval.decided_at else ""
    who = f" by {mention(approval.decided_by)}" if _is_person(approval.decided_by) else ""
    status = approval.status
    if status is ApprovalStatus.APPROVED:
        return f":white_check_mark: Approved{who}{when}"
    if status is ApprovalStatus.DECLINED:
        # The reason may name the approval's own people ("the run was stopped by U_ALICE"): as mentions.
        people = run_people(approval.requester, [approval])
        reason = f": {name_people(inert(one_line(approval.reason, 500)), people)}" if approval.reason else ""
        return f":no_entry: Declined{who}{when}{reason}"
    if status is ApprovalStatus.EXPIRED:
        return f":hourglass: Expired{when}: nobody decided in time"
    if status is ApprovalStatus.SUPERSEDED:
        return f":leftwards_arrow_with_hook: Superseded{when}: a newer message{who} redirected the run"
    return f"Pending since {slack_date(approval.created_at)}"


# -- the parts ----------------------------------------------------------------------------------


def needs_someone_else(approval: Approval) -> bool:
    """Whether the requester (and whoever's thread message led to the call) may not approve it: a
    destructive call always (four-eyes), a call whose sealed policy rule says so."""
    if approval.category is ToolCategory.DESTRUCTIVE:
        return True
    requirement = requirement_of(approval)
    return requirement is not None and not requirement.requester_may_approve


def others_line(approval: Approval) -> str | None:
    """The line "Needs approval by someone other than @alice", on a pending card where that holds."""
    if approval.status is not ApprovalStatus.PENDING or not needs_someone_else(approval):
        return None
    people = list(dict.fromkeys([approval.requester, *approval.involved]))
    names = " or ".join(mention(person) for person in people)
    glass = "" if approval.category is ToolCategory.DESTRUCTIVE else " (or one who declared break-glass)"
    return f":busts_in_silhouette: *Needs approval by someone other than {names}*{glass}"


def derived_line(approval: Approval) -> str:
    """The card's first line for a derived call: "Derived from tool output, not from anyone's
    request: `db-01`, `/`", the evidence ids the values came from (``agent.provenance``); "" when
    every checked value was requested. The values are the model's (from what it read): inline
    code, cut, never live."""
    provenance = approval.derived
    values = list(dict.fromkeys(v.value for v in provenance.derived))
    if not values:
        return ""
    shown = ", ".join(
        inline_code(visible_text(value, keep_newlines=False), DERIVED_VALUE_SHOWN)
        for value in values[:DERIVED_VALUES_SHOWN]
    )
    if len(values) > DERIVED_VALUES_SHOWN:
        shown += f" and {len(values) - DERIVED_VALUES_SHOWN} more (see the arguments)"
    refs = provenance.evidence
    where = (
        f"from {escape(', '.join(refs))}"
        if refs
        else "in no tool output: the model's own or the opening message's"
    )
    needed = approval.approvals_proposed
    more = f" · needs {needed} approvals" if needed > 1 else ""
    return f":warning: Derived from tool output, not from anyone's request: {shown} ({where}){more}"


def _headline(approval: Approval) -> str:
    badge = ":rotating_light:" if approval.category is ToolCategory.DESTRUCTIVE else ":raised_hand:"
    return f"{badge} *Approval needed* · {_tool(approval)}"


def _facts(approval: Approval) -> tuple[Block, str | None]:
    """Tool, category, who asked, expiry, target, dry-run age; and a problem with the target."""
    fields = [
        f"*Tool*\n{_tool(approval)}",
        f"*Category*\n{approval.category.value}",
        f"*Requested by*\n{mention(approval.requester)}",
        f"*Expires*\n{slack_date(approval.expires_at)}",
    ]
    problem = None
    target = approval.target or _target(approval.args_json)
    if target is not None:
        shown = "`" + escape(visible_text(target, keep_newlines=False)).replace("`", "\\x60") + "`"
        shown += _target_details(approval)
        field = f"*Target*\n{shown}"
        room = SECTION_FIELD - len("*Target*\n")
        if slack_length(field) > SECTION_FIELD:
            problem = (
                f"the target is too long to show on an approval card ({slack_length(shown):,} characters; "
                f"at most {room:,}): shorten it"
            )
            field = f"*Target*\n{truncate(shown, room - 1)}"
        fields.append(field)
    if approval.category is ToolCategory.DESTRUCTIVE and approval.plan_created_at is not None:
        age = _age(approval.created_at - approval.plan_created_at)
        fields.append(f"*Dry run made*\n{age} before this request, {slack_date(approval.plan_created_at)}")
    who = approvers_field(approval)  # CHATOPS_POLICY_FILE: who may approve, how many must
    if who is not None:
        fields.append(who)
    return {"type": "section", "fields": [mrkdwn(text, SECTION_FIELD) for text in fields]}, problem


def _target_details(approval: Approval) -> str:
    """How the inventory's target is reached and its labels; a production target stands out."""
    if not approval.target:
        return ""
    labels = ", ".join(f"{key}={value}" for key, value in approval.labels)
    details = f" via {escape(approval.target_via)}" if approval.target_via else ""
    if labels:
        details += f"\n{escape(labels)}"
    if approval.production:
        details += "\n:red_circle: *PRODUCTION*"
    return details


def _why(approval: Approval) -> tuple[Block | None, str | None]:
    """Why a person is asked although the tool alone would not ask, and a problem showing it.

    The tool wrote the sentence, around a host the model chose: shown inert, whole or not at all.
    """
    if not approval.why:
        return None, None
    text = f":globe_with_meridians: *Why approval is needed*\n{inert(visible_text(approval.why, keep_newlines=False))}"
    if slack_length(text) <= SECTION_TEXT:
        return section(text), None
    problem = (
        f"the reason for asking is too long to show on an approval card ({slack_length(text):,} "
        f"characters; at most {SECTION_TEXT:,}): shorten the host name"
    )
    return section(text), problem  # cut by ``section``: this card offers no Approve button


def rationale_line(rationale: str) -> str:
    """One line of the model's own words with the call: the model's text, so nothing in it is live.

    It is shown as inline code (Slack parses no formatting, mention or link inside code; its
    backticks cannot end the span early, ``inline_code``), cut to ``RATIONALE_SHOWN`` characters:
    a reason to read, never an instruction to the approver in the bot's voice."""
    shown = visible_text(" ".join(rationale.split()), keep_newlines=False)
    return f":speech_balloon: *Why, in the model's words:* {inline_code(shown, RATIONALE_SHOWN)}"


def _parts(approval: Approval) -> list[_Part]:
    parts = []
    if approval.command:
        parts.append(
            _Part(
                "the command is",
                "*Command*",
                visible_text(approval.command),
                "shorten the arguments it is built from",
            )
        )
    parts.append(
        _Part("the arguments are", "*Arguments*", _shown_arguments(approval.args_json), "shorten them")
    )
    verification = Verification.from_json(approval.verify)
    for label, text in verification.card_lines() if verification is not None else ():
        parts.append(
            _Part(f"the {label.lower()} line is", f"*{label}*", visible_text(text), "shorten the arguments")
        )
    if approval.category is ToolCategory.DESTRUCTIVE and approval.preview:
        parts.append(
            _Part(
                "the dry run is",
                "*Dry run*",
                visible_text(approval.preview),
                "narrow the call so its dry run lists less (fewer files or items per call)",
            )
        )
    return parts


def _shown_arguments(arguments: str) -> str:
    """Indented JSON of every argument (unshowable characters as JSON escapes); raw text otherwise."""
    try:
        check_depth(arguments, _RENDER_DEPTH)
        return visible_json(json.loads(arguments or "{}"))
    except (ValueError, RecursionError):
        return visible_text(arguments)


def _target(arguments: str) -> str | None:
    try:
        check_depth(arguments, _RENDER_DEPTH)
        parsed = json.loads(arguments or "{}")
    except (ValueError, RecursionError):
        return None
    value = parsed.get(TARGET_ARGUMENT) if isinstance(parsed, dict) else None
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return str(value)
    return None


# -- fitting the card ---------------------------------------------------------------------------


def _size_problem(blocks: list[Block], parts: list[_Part], part_sections: list[list[Block]]) -> str | None:
    total = _text_length(blocks)
    if total <= CARD_TEXT and len(blocks) <= MAX_BLOCKS:
        return None
    sizes = [_text_length(sections) for sections in part_sections]
    worst = max(range(len(parts)), key=lambda index: sizes[index])
    allowed = max(0, CARD_TEXT - (total - sizes[worst]))
    part = parts[worst]
    return (
        f"{part.what} too long to show on an approval card ({sizes[worst]:,} characters; "
        f"at most {allowed:,}): {part.advice}"
    )


def _incomplete(
    approval: Approval, head: list[Block], part_sections: list[list[Block]], problem: str
) -> list[Block]:
    """What fits, then a warning; no Approve button: nobody approves what they could not see."""
    warning = section(f":warning: *Not shown completely:* {inert(problem)}. This card cannot approve it.")
    footer = _footer(approval, False)
    blocks = list(head)
    room = CARD_TEXT - _text_length([*head, warning, footer])
    for sections in part_sections:
        for block in sections:
            size = _text_length([block])
            if size > room or len(blocks) + 3 > MAX_BLOCKS:
                return [*blocks, warning, footer]
            blocks.append(block)
            room -= size
    return [*blocks, warning, footer]


def _text_length(blocks: list[Block]) -> int:
    return sum(slack_length(text) for text in texts(blocks))


def _exact_section(text: str) -> Block:
    # Cut to fit by ``code_pieces``; a section that still did not fit would be cut by Slack's
    # refusal, so it is a bug here, not something to truncate quietly.
    if slack_length(text) > SECTION_TEXT:
        raise AssertionError(f"a verbatim section of {slack_length(text)} characters")
    return {"type": "section", "text": {"type": "mrkdwn", "text": text, "verbatim": True}}


# -- buttons and decisions -----------------------------------------------------------------------


def _footer(approval: Approval, complete: bool) -> Block:
    if approval.status is not ApprovalStatus.PENDING:
        return context(decision_line(approval))
    destructive = approval.category is ToolCategory.DESTRUCTIVE
    elements = [_approve_button(approval, destructive)] if complete else []
    elements.append(button(ACTION_DECLINE, "Decline", approval.id, style="danger"))
    return actions(APPROVAL_CONTROLS, elements)


def _approve_button(approval: Approval, destructive: bool) -> Block:
    approve = button(ACTION_APPROVE, "Approve", approval.id, style="primary")
    if destructive:
        # Slack requires plain_text in a confirm dialog's text.
        approve["confirm"] = {
            "title": plain("Run a destructive tool?", CONFIRM_TITLE),
            "text": plain(
                f"{one_line(approval.tool, 60)} may not be undone. Check the command and the dry run first. "
                "Only someone other than the person who asked for it may approve it.",
                CONFIRM_TEXT,
            ),
            "confirm": plain("Approve", CONFIRM_BUTTON),
            "deny": plain("Cancel", CONFIRM_BUTTON),
            "style": "danger",
        }
    return approve


def _tool(approval: Approval) -> str:
    return inline_code(approval.tool)


def _is_person(user: str) -> bool:
    """Slack user IDs start with U or W; decisions the bot itself makes carry another marker."""
    return user[:1] in ("U", "W")


def _age(seconds: float) -> str:
    minutes = max(0, int(seconds // 60))
    if minutes < 1:
        return "less than a minute"
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours < 24 else plural(hours // 24, "day")


def requirement_of(approval: Approval) -> Requirement | None:
    """The requirement a card shows (posted with, or the one a click was judged by: ``Ruling.requirement``);
    for display only, never for a decision (``Deciders.decide`` computes that from the policy file)."""
    return Requirement.from_json(approval.policy) if approval.policy else None


def approvers_field(approval: Approval) -> str | None:
    """The card's "Who may approve" field: the requirement the card was posted with, or, on a
    redraw after a click, the one the click was judged by (``Judged.shown``)."""
    requirement = requirement_of(approval)
    if requirement is None:
        return None
    who = ", ".join(
        [*(mention(u) for u in requirement.users), *(f"<!subteam^{g}>" for g in requirement.groups)]
    )
    count = f"{requirement.approvals} distinct approvals" if requirement.approvals > 1 else "1 approval"
    others = "" if requirement.requester_may_approve else "; not the requester"
    field = f"*Who may approve*\n{count} from {who or 'any full member'}{others} (rule `{escape(requirement.rule)}`)"
    if approval.approved_by and requirement.approvals > 1:
        done = ", ".join(mention(u) for u in approval.approved_by if USER.fullmatch(u))
        field += f"\nSo far: {done} ({len(approval.approved_by)} of {requirement.approvals})"
    return field
