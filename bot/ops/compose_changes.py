"""The deploy markers built from the settings: the journal the web process and ``chatops changes``
write through, and the web process's change webhooks (``bot.web.change_receiver``).

A marker is sealed with its target's key (``bot.fleet.target_keys``), derived from
``CHATOPS_RUNNER_SECRET``: without the secret nothing can be written, so setting the token or the
GitHub secret without it stops start-up with one line. The journal's ``key_of`` knows the
inventory's targets only: a target the inventory does not have gets no key, so no code path can
create a journal for it (the parsers refuse such a marker first, with a 422).
"""

from __future__ import annotations

from collections.abc import Callable

import redis

from bot.alerts.store import AlertStore
from bot.changes.journal import ChangeJournal
from bot.errors import BotConfigurationError, MarkerError
from bot.fleet.target_keys import target_key
from bot.keys import Keys
from bot.settings import Settings
from bot.slack.handlers.runtime import WebRuntime
from bot.web.alert_receiver import WebReceiver
from bot.web.change_receiver import ChangeReceiver
from tools.inventory_types import Inventory


def inventory_key_of(secret: str, inventory: Inventory) -> Callable[[str], bytes]:
    """The key of each inventory target under ``secret``; any other name is refused."""
    master = secret.encode()

    def key_of(target: str) -> bytes:
        if not master:
            raise BotConfigurationError(
                "CHATOPS_RUNNER_SECRET is empty: deploy markers are sealed with their target's key; "
                "fix: set it (the same value as the workers' and runners')"
            )
        if inventory.get(target) is None:
            raise MarkerError(422, f"no target {target[:60]!r} in the inventory")
        return target_key(master, target)

    return key_of


def change_journal(client: redis.Redis, settings: Settings, inventory: Inventory) -> ChangeJournal:
    """The change journal as deploy markers write it (``CHATOPS_RUNNER_SECRET``'s keys)."""
    return ChangeJournal(
        client,
        Keys(settings.chatops_redis_prefix),
        inventory_key_of(settings.chatops_runner_secret, inventory),
    )


def web_changes(runtime: WebRuntime) -> WebReceiver:
    """``POST /changes``, ``/changes/github``, ``/changes/argocd`` on each process's Redis."""
    settings, keys = runtime.settings, runtime.keys
    token, github_secret = settings.chatops_changes_token, settings.chatops_changes_github_secret
    if (token or github_secret) and not settings.chatops_runner_secret:
        raise BotConfigurationError(
            "CHATOPS_CHANGES_TOKEN or CHATOPS_CHANGES_GITHUB_SECRET is set but CHATOPS_RUNNER_SECRET is "
            "empty, and deploy markers are sealed with their target's key; fix: set CHATOPS_RUNNER_SECRET"
        )
    inventory = runtime.targets.inventory

    def receiver_on(client: redis.Redis) -> ChangeReceiver:
        return ChangeReceiver(
            AlertStore(client, keys, runtime.redact),
            change_journal(client, settings, inventory),
            inventory,
            token,
            github_secret,
            runtime.metrics(),
        )

    return WebReceiver(runtime, receiver_on)
