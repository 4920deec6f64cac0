"""The system prompt: ``CHATOPS_SYSTEM_PROMPT_FILE``, or the one shipped in ``bot/ops/prompts/``.

A prompt file is plain text; ``{{targets}}`` in it is replaced by the targets the run may act on
(the inventory's names), and nothing else is interpreted, so a prompt may hold braces, JSON or
code freely. The prompt is rendered once when a run starts and stored as the first message of
its history: every request of the run, a resumed one's too, sends the same bytes (the cacheable
prefix), even if the file changes meanwhile.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bot.errors import BotConfigurationError

DEFAULT_PROMPT_FILE = Path(__file__).resolve().parent / "prompts" / "system_prompt.md"
TARGETS_PLACEHOLDER = "{{targets}}"
NO_TARGETS = "only the systems your tools reach (this deployment names no inventory)"
MAX_PROMPT_CHARS = 100_000  # a prompt this long is a mistake (the wrong file), not a prompt


def load_template(path: Path | None) -> str:
    """The prompt template at ``path`` (default: the shipped one)."""
    source = path or DEFAULT_PROMPT_FILE
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise BotConfigurationError(f"cannot read CHATOPS_SYSTEM_PROMPT_FILE {source}: {error}") from error
    text = text.strip()
    if not text:
        raise BotConfigurationError(f"CHATOPS_SYSTEM_PROMPT_FILE {source} is empty")
    if len(text) > MAX_PROMPT_CHARS:
        raise BotConfigurationError(
            f"CHATOPS_SYSTEM_PROMPT_FILE {source} has over {MAX_PROMPT_CHARS} characters"
        )
    return text


def render(template: str, targets: Sequence[str] = ()) -> str:
    """``template`` with the targets listed (sorted, so the prompt does not depend on their order)."""
    listed = ", ".join(sorted(dict.fromkeys(targets))) if targets else NO_TARGETS
    return template.replace(TARGETS_PLACEHOLDER, listed)


def system_prompt(path: Path | None, targets: Sequence[str] = ()) -> str:
    return render(load_template(path), targets)
