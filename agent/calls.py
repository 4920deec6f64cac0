"""A model turn's tool calls as the runtime stores them: numbered with its own ids, bounded.

Every call gets a run-unique id (``runtime_call_id``) before the assistant message is stored:
that id is one execution, and what an approval is bound to. Calls the runtime will not run at
all (past the per-turn cap; arguments too large or too deeply nested to keep) are stored as
bounded copies marked ``refused``, so nothing downstream parses a 3 MB or 30,000-deep argument.

With a ``redact`` function (the run's redactor: known secrets in every encoding, secret-looking
values), the model's text is stored redacted, and a call whose arguments carry a secret is stored
with the redacted arguments and refused: history never holds the secret, and no tool receives one
the model copied out of a log or a prompt (an exfiltration path, never a legitimate argument:
tools get their own credentials from the configuration).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from agent.arguments import MAX_ARGUMENTS_BYTES, MAX_ARGUMENTS_DEPTH, check_depth, checked_arguments
from agent.errors import ArgumentsRejected
from agent.types import Message, RunState, revised, runtime_call_id

SECRET_REFUSAL = (
    "the arguments contained a secret value (it was redacted); nothing ran: never pass secrets "
    "to tools, they have their own credentials"
)


def number_calls(
    message: Message,
    state: RunState,
    cap: int,
    redact: Callable[[str], str] | None = None,
    update: dict[str, object] | None = None,
) -> Message:
    """Give every tool call the runtime's own run-unique id before the message is stored.

    The id is the identity of one execution (approvals are bound to it); the model's id is
    kept as ``provider_id`` only. A model repeating an approved call's id, or sending five
    calls under one id, gets five executions that each need their own approval. Calls past
    the per-turn cap, and arguments too large to keep, are stored as bounded copies marked
    ``refused``: history never holds a 3 MB argument, and nothing runs for them. ``update``: other
    fields of the stored message, set in the same copy.
    """
    # Copies without validating again: every value below is a string or a list of calls built
    # from the model's already validated message (``agent.types.revised``).
    changes = dict(update or {})
    if redact is not None and message.content:
        changes["content"] = redact(message.content)
    if not message.tool_calls:
        return revised(message, changes) if changes else message
    calls = []
    for position, call in enumerate(message.tool_calls, 1):
        state.call_seq += 1
        fields: dict[str, object] = {
            "id": runtime_call_id(state.call_seq),
            "provider_id": call.id[:64],
        }
        unkeepable = _unkeepable(call.arguments)
        if unkeepable is not None:
            fields["arguments"] = "{}"
            fields["refused"] = unkeepable
        elif redact is not None and (redacted := redact(call.arguments)) != call.arguments:
            fields["arguments"] = redacted if _is_json(redacted) else "{}"
            fields["refused"] = SECRET_REFUSAL
        elif position > cap:
            fields["refused"] = (
                f"at most {cap} tool calls are run per turn (this was call {position}); "
                "nothing ran: call it again in the next turn if it is still needed"
            )
        calls.append(revised(call, fields))
    changes["tool_calls"] = calls
    return revised(message, changes)


def _unkeepable(arguments: str) -> str | None:
    """Why these arguments must not even be stored (over the size or nesting cap), else ``None``.

    Everything downstream (history, cards, audit, the next request) may then parse a call's
    arguments without a size or recursion hazard.
    """
    size = len(arguments.encode())
    if size > MAX_ARGUMENTS_BYTES:
        return (
            f"the arguments are {size:,} bytes, over the {MAX_ARGUMENTS_BYTES:,}-byte limit; "
            "nothing ran: send smaller arguments"
        )
    try:
        checked_arguments(arguments)  # the usual case: valid, and its parse kept for the gate to read
    except ArgumentsRejected:
        pass  # refused later for what is wrong with it, unless too deep to keep at all:
    else:
        return None
    try:
        check_depth(arguments, MAX_ARGUMENTS_DEPTH)
    except ArgumentsRejected as error:
        return f"{error}; nothing ran"
    return None


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
