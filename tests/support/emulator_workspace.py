"""The emulator's own tests' workspace: its token and signing secret, and a config with fast
event timeouts and retries."""

from __future__ import annotations

from emulator.slack import WorkspaceConfig

SECRET = "test-signing-secret"
TOKEN = "xoxb-test-token"


def make_config(**overrides: object) -> WorkspaceConfig:
    """A config with fast event timeouts and retries, so retry tests take well under a second."""
    config = WorkspaceConfig(
        bot_token=TOKEN, signing_secret=SECRET, event_timeout=0.5, retry_delays=(0.0, 0.05, 0.05)
    )
    for key, value in overrides.items():
        setattr(config, key, value)
    return config
