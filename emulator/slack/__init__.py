"""A local Slack for demos and end-to-end tests: Web API, Events API delivery, a web page, a control API.

It talks to the bot only over HTTP, as Slack does; production code never imports it::

    with SlackEmulator(WorkspaceConfig(signing_secret="s")) as slack:
        slack.set_events_url("http://127.0.0.1:3000/slack/events")
        client = SlackEmulatorClient(slack.url)
        client.post_message("#incident", "alice", "@ops restart api")
"""

from emulator.slack.client import ControlApiError, SlackEmulatorClient
from emulator.slack.config import UserGroupSpec, UserSpec, WorkspaceConfig
from emulator.slack.delivery import signature
from emulator.slack.server import SlackEmulator

__all__ = [
    "ControlApiError",
    "SlackEmulator",
    "SlackEmulatorClient",
    "UserGroupSpec",
    "UserSpec",
    "WorkspaceConfig",
    "signature",
]
