"""What the demo prints once the bot can take a mention: the page, what to try, and the variables
that point the CLI at the demo from another terminal."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

TRY_THESE = (
    "@ops web-03 is out of disk, deal with it",
    "@ops the api on web-03 is burning CPU, restart it",
    "@ops restart the api on web-03",
    "@ops check db-01's load",
    "@ops what about web-99?",
)
"""What to try with a real model (``LLM_BASE_URL``); the scripted one lists its own examples."""

CLI_VARIABLES = ("REDIS_URL", "CHATOPS_REDIS_PREFIX", "CHATOPS_QUEUE", "CHATOPS_INVENTORY_FILE")
"""The settings ``chatops runs list``, ``audit tail`` and ``targets`` need to read the demo's data."""


def instructions(page_url: str, examples: Sequence[str], scripted: bool) -> str:
    lines = [
        "",
        f"Ready: the bot takes mentions. Open {page_url} and try, in #incident:",
        *(f"    {text}" for text in examples),
        *(
            ["  The scripted model knows only these; anything else is answered with this list."]
            if scripted
            else []
        ),
        '  Click Approve, or reply in the thread ("don\'t restart it, show me the logs first") while',
        "  the approval card waits. A clean-up must be approved by someone other than who asked:",
        "  switch between alice and bob at the top. A restart may be approved by anyone, the asker too.",
        "  Fire an alert (the button on the left): it starts db-01's incident (a report query; db-01 is",
        "  healthy until then) and an Alertmanager webhook about it starts a thread and a run.",
        "  Edit web-03's nginx config (the other button): its runner records the change with its diff",
        "  within seconds; ask what changed on web-03.",
        "  The bot keeps its Findings in the thread and cites the tool output it rests on.",
        "web-03 and db-01 are simulated (their files, disks, processes and load are the demo's, in the",
        "demo folder), each served by a runner of its own; the bot, the runners, their tools and Redis",
        "are real. Ctrl-C stops everything.",
        "",
    ]
    return "\n".join(lines)


def cli_variables(env: Mapping[str, str]) -> str:
    """The ``export`` line (and an example) that points ``chatops`` at the demo's Redis and keys."""
    assignments = " ".join(f"{name}={shlex.quote(env[name])}" for name in CLI_VARIABLES if name in env)
    return "\n".join(
        [
            "The CLI, from another terminal (the demo's runs, audit and targets):",
            f"    export {assignments}",
            "    chatops runs list",
            "",
        ]
    )
