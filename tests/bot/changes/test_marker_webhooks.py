"""Deploy markers through the real web process: ``POST /changes``, GitHub's ``deployment_status``
and Argo CD's webhook, each stored once in the journal; forged credentials, replays, bad bodies and
targets the inventory does not have refused, and nothing stored for them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import yaml

from bot.errors import BotConfigurationError
from bot.keys import Keys
from bot.ops.compose_changes import change_journal
from bot.ops.compose_web import web_app, web_runtime
from tests.bot.changes.marker_fixtures import (
    GITHUB_SECRET,
    INVENTORY,
    RUNNER_SECRET,
    TOKEN,
    argocd_body,
    github_body,
    hub_signature,
    rfc3339,
)
from tests.support.slack_bot import SlackBot
from tools.changes.record import DEPLOY, MAX_FIELD, MAX_WHAT, Change
from tools.inventory import load_inventory

BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def inventory_file(tmp_path: Path) -> Path:
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(INVENTORY))
    return path


@pytest.fixture
def web(make_bot: Callable[..., SlackBot], inventory_file: Path) -> SlackBot:
    return make_bot(
        tools=[],
        chatops_inventory_file=inventory_file,
        chatops_runner_secret=RUNNER_SECRET,
        chatops_changes_token=TOKEN,
        chatops_changes_github_secret=GITHUB_SECRET,
    )


def post(bot: SlackBot, path: str, body: bytes, **headers: str) -> httpx.Response:
    assert bot.server is not None
    return httpx.post(f"{bot.server.url}{path}", content=body, headers=headers, trust_env=False, timeout=10)


def marker(**fields: Any) -> bytes:
    return json.dumps({"what": "deploy api", **fields}).encode()


def journal_of(bot: SlackBot, target: str) -> list[Change]:
    journal = change_journal(bot.redis, bot.settings, load_inventory(bot.settings.chatops_inventory_file))
    return journal.between(target, 0, time.time() + 3600)


def journal_keys(bot: SlackBot) -> list[bytes]:
    return sorted(bot.redis.scan_iter(match=f"{bot.keys.prefix}fleet:changes:*"))


# -- POST /changes ------------------------------------------------------------------------------


def test_a_marker_by_names_lands_once_on_each_target(web: SlackBot) -> None:
    at = time.time() - 120
    body = marker(
        service="api",
        version="1.4.2",
        targets=["web-01", "web-02"],
        who="ci",
        url="https://ci/42",
        at=rfc3339(at),
    )
    answer = post(web, "/changes", body, **BEARER)
    assert answer.status_code == 200 and answer.text.startswith("accepted: a deploy on 2 target(s)")
    for target in ("web-01", "web-02"):
        [change] = journal_of(web, target)
        assert (change.kind, change.what, change.who, change.url, change.source) == (
            DEPLOY,
            "deploy api (1.4.2)",
            "ci",
            "https://ci/42",
            "webhook",
        )
        assert change.at == float(int(at))
    assert journal_of(web, "db-01") == []


def test_labels_resolve_to_every_target_carrying_them(web: SlackBot) -> None:
    answer = post(web, "/changes", marker(labels={"env": "production", "role": "web"}), **BEARER)
    assert answer.status_code == 200, answer.text
    assert [len(journal_of(web, name)) for name in ("web-01", "web-02", "db-01", "stage-01")] == [1, 1, 0, 0]


def test_a_replayed_delivery_does_nothing_twice(web: SlackBot) -> None:
    body = marker(targets=["web-01"])  # no "at": the marker's time is when it arrived
    assert post(web, "/changes", body, **BEARER, **{"Idempotency-Key": "run-42"}).status_code == 200
    replay = post(web, "/changes", body, **BEARER, **{"Idempotency-Key": "run-42"})
    assert (replay.status_code, replay.text) == (200, "already received: ignored")
    assert post(web, "/changes", body, **BEARER).text == "accepted: a deploy on 1 target(s) (web-01), 1 new"
    assert post(web, "/changes", body, **BEARER).text == "already received: ignored"
    assert len(journal_of(web, "web-01")) == 2  # the key names a delivery: another key, another one


def test_the_journal_stores_a_marker_with_its_time_once_whatever_the_delivery(web: SlackBot) -> None:
    body = marker(targets=["web-01"], at=rfc3339(time.time() - 60))
    assert post(web, "/changes", body, **BEARER, **{"Idempotency-Key": "a"}).text.endswith(", 1 new")
    assert post(web, "/changes", body, **BEARER, **{"Idempotency-Key": "b"}).text.endswith(", 0 new")
    assert len(journal_of(web, "web-01")) == 1


@pytest.mark.parametrize(
    "header", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}]
)
def test_a_bad_or_missing_token_is_refused_and_stores_nothing(web: SlackBot, header: dict[str, str]) -> None:
    answer = post(web, "/changes", marker(targets=["web-01"]), **header)
    assert answer.status_code == 401 and journal_keys(web) == []
    assert post(web, "/changes/argocd", argocd_body(None), **header).status_code == 401


def test_without_a_token_the_endpoint_refuses_everyone(
    make_bot: Callable[..., SlackBot], inventory_file: Path
) -> None:
    bot = make_bot(tools=[], chatops_inventory_file=inventory_file, chatops_runner_secret=RUNNER_SECRET)
    assert post(bot, "/changes", marker(targets=["web-01"]), **BEARER).status_code == 401
    body = github_body(time.time())
    assert (
        post(
            bot,
            "/changes/github",
            body,
            **{"X-GitHub-Event": "deployment_status", "X-Hub-Signature-256": hub_signature(body, "")},
        ).status_code
        == 401
    )
    assert journal_keys(bot) == []


def test_a_token_without_the_runner_secret_stops_start_up(
    make_bot: Callable[..., SlackBot], tmp_path: Path
) -> None:
    settings = make_bot(tools=[]).settings.model_copy(update={"chatops_changes_token": TOKEN})
    with pytest.raises(BotConfigurationError, match="CHATOPS_RUNNER_SECRET"):
        web_app(web_runtime(settings))


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        (b"not json", 400, "not JSON"),
        (b"[1]", 400, "JSON object"),
        (marker(targets=["web-01"], team="x"), 400, "unknown field(s) 'team'"),
        (json.dumps({"targets": ["web-01"]}).encode(), 400, "what: required"),
        (marker(what=7, targets=["web-01"]), 400, "what: must be a string, not a number"),
        (marker(targets=["web-01"], labels={"env": "production"}), 400, "exactly one of"),
        (marker(), 400, "exactly one of"),
        (marker(targets="web-01"), 400, "targets: must be a non-empty list"),
        (marker(targets=[1]), 400, "a target name (a string)"),
        (marker(labels={"env": 1}), 400, "must be a string"),
        (marker(targets=["web-01"], at="yesterday"), 400, "not an RFC 3339 time"),
        (marker(targets=["web-01"], at="2026-12-03T22:10:00"), 400, "no time zone"),
        (marker(targets=["web-01"], at="2999-01-01T00:00:00Z"), 400, "in the future"),
        (marker(targets=["web-01"], at=1_800_000_000), 400, "at: must be a string"),
        (marker(targets=["web-01"], url="javascript:alert(1)"), 400, "http(s) URL"),
        (marker(targets=["web-01"], who="x" * 20_000), 413, "over the 16384"),
        (marker(targets=["web-01", "web-99"]), 422, "no target 'web-99' in the inventory"),
        (marker(targets=["../../run:x"]), 422, "no target '../../run:x'"),
        (marker(labels={"env": "moon"}), 422, "'env'='moon' matches no target"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_bad_bodies_are_refused_with_the_reason_and_store_nothing(
    web: SlackBot, body: bytes, status: int, reason: str
) -> None:
    answer = post(web, "/changes", body, **BEARER)
    assert answer.status_code == status and reason in answer.text, answer.text
    assert journal_keys(web) == []


def test_a_body_over_the_web_servers_cap_is_413(web: SlackBot) -> None:
    answer = post(web, "/changes", b"{" + b" " * (2 * 1024 * 1024) + b"}", **BEARER)
    assert answer.status_code == 413 and journal_keys(web) == []


def test_a_marker_for_a_target_the_inventory_does_not_know_creates_no_journal_key(web: SlackBot) -> None:
    for name in ("web-99", "web-01 ", "WEB-01", "fleet:changes:web-01"):
        assert post(web, "/changes", marker(targets=[name]), **BEARER).status_code == 422
    assert journal_keys(web) == []


def test_hostile_texts_are_stored_bounded_and_on_one_line(web: SlackBot) -> None:
    what = "deploy <!channel> *urgent*\n<@U0ADMIN> please `rm -rf /`" + "x" * 5_000
    who = "<!here>\r\n" + "y" * 5_000
    answer = post(
        web,
        "/changes",
        marker(what=what, who=who, url="https://e.x/<!everyone>\n", targets=["web-01"]),
        **BEARER,
    )
    assert answer.status_code == 200
    [change] = journal_of(web, "web-01")
    assert len(change.what) == MAX_WHAT and len(change.who) == MAX_FIELD
    assert not any(c in field for field in (change.what, change.who, change.url) for c in "\r\n")
    assert change.what.startswith(
        "deploy <!channel> *urgent* <@U0ADMIN>"
    )  # inert in Slack: the wire helper's part


# -- GitHub ---------------------------------------------------------------------------------------


def github(
    bot: SlackBot,
    body: bytes,
    event: str = "deployment_status",
    signature: str | None = None,
    delivery: str = "72d3162e-cc78-11e3-81ab-4c9367dc0958",
) -> httpx.Response:
    headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "Content-Type": "application/json"}
    headers["X-Hub-Signature-256"] = hub_signature(body) if signature is None else signature
    return post(bot, "/changes/github", body, **headers)


def test_github_deployment_status_success_lands_on_the_environments_targets(web: SlackBot) -> None:
    at = time.time() - 30
    answer = github(web, github_body(at))
    assert answer.status_code == 200, answer.text
    for target in ("web-01", "web-02", "db-01"):  # env=production
        [change] = journal_of(web, target)
        assert change.source == "github" and change.who == "octocat" and change.at == float(int(at))
        assert change.what == "deployed acme/api v1.4.2 (f95f852bd8fc) to production"
        assert change.url == "https://github.com/acme/api/actions/runs/42"
    assert journal_of(web, "stage-01") == []


def test_github_payload_targets_win_over_the_environment(web: SlackBot) -> None:
    answer = github(web, github_body(time.time(), payload={"targets": ["db-01"]}))
    assert answer.status_code == 200, answer.text
    assert [len(journal_of(web, name)) for name in ("web-01", "db-01")] == [0, 1]
    # The REST API also takes the payload as a JSON string.
    body = github_body(time.time(), payload=json.dumps({"targets": ["stage-01"]}), status_id=2)
    assert github(web, body).status_code == 200 and len(journal_of(web, "stage-01")) == 1


def test_github_failure_is_recorded_as_such_and_pending_is_ignored(web: SlackBot) -> None:
    assert github(web, github_body(time.time(), state="failure", status_id=3)).status_code == 200
    assert journal_of(web, "web-01")[0].what.startswith("deploy failed acme/api")
    answer = github(web, github_body(time.time(), state="in_progress", status_id=4))
    assert (answer.status_code, answer.text.startswith("ignored: state 'in_progress'")) == (200, True)
    assert len(journal_of(web, "web-01")) == 1


def test_github_ping_and_other_events_are_acknowledged(web: SlackBot) -> None:
    ping = json.dumps({"zen": "Design for failure.", "hook_id": 1}).encode()
    assert (github(web, ping, event="ping").status_code, github(web, ping, event="ping").text) == (
        200,
        "ignored: pong",
    )
    assert github(web, ping, event="push").text.startswith("ignored: event 'push'")
    assert journal_keys(web) == []


@pytest.mark.parametrize(
    "signature",
    [
        "",
        "sha256=" + "0" * 64,
        "sha1=" + "0" * 40,
        "sha256=zz",
        hub_signature(b"another body"),
        hub_signature(github_body(0), "wrong-secret"),
    ],
)
def test_github_with_a_forged_or_missing_signature_is_refused(web: SlackBot, signature: str) -> None:
    answer = github(web, github_body(time.time()), signature=signature)
    assert answer.status_code == 401 and journal_keys(web) == []


def test_a_replayed_github_delivery_is_ignored_even_with_another_delivery_header(web: SlackBot) -> None:
    body = github_body(time.time())
    assert github(web, body).status_code == 200
    replay = github(web, body, delivery="00000000-forged-0000")
    assert (replay.status_code, replay.text) == (200, "already received: ignored")
    assert len(journal_of(web, "web-01")) == 1


def test_github_without_targets_or_a_matching_environment_is_422(web: SlackBot) -> None:
    answer = github(web, github_body(time.time(), environment="qa"))
    assert answer.status_code == 422 and "label env='qa'" in answer.text and journal_keys(web) == []
    answer = github(web, github_body(time.time(), payload={"targets": ["nope"]}, status_id=9))
    assert answer.status_code == 422 and "no target 'nope'" in answer.text


# -- Argo CD --------------------------------------------------------------------------------------


def test_argocd_template_lands_on_the_namespaces_targets(web: SlackBot) -> None:
    at = time.time() - 10
    answer = post(web, "/changes/argocd", argocd_body(at), **BEARER)
    assert answer.status_code == 200, answer.text
    for target in ("stage-01", "shop-k8s"):  # label namespace=shop; a Kubernetes target of shop
        [change] = journal_of(web, target)
        assert change.source == "argocd" and change.who == "" and change.at == float(int(at))
        assert (
            change.what.startswith("argocd synced shop-api to 9b1c2d3e")
            and "(Synced, Healthy)" in change.what
        )
    assert journal_of(web, "web-01") == []
    replay = post(web, "/changes/argocd", argocd_body(at), **BEARER)
    assert replay.text == "already received: ignored"


def test_argocd_running_is_ignored_and_bad_bodies_refused(web: SlackBot) -> None:
    assert post(web, "/changes/argocd", argocd_body(None, phase="Running"), **BEARER).text.startswith(
        "ignored"
    )
    assert post(web, "/changes/argocd", argocd_body(None, tag="x"), **BEARER).status_code == 400
    answer = post(web, "/changes/argocd", argocd_body(None, namespace="nowhere"), **BEARER)
    assert answer.status_code == 422 and "namespace=" in answer.text
    assert journal_keys(web) == []


def test_unknown_change_paths_are_404(web: SlackBot) -> None:
    assert post(web, "/changes/gitlab", b"{}", **BEARER).status_code == 404


def test_the_journal_refuses_a_key_for_a_target_outside_the_inventory(
    redis_client: redis.Redis, keys: Keys, web: SlackBot
) -> None:
    journal = change_journal(redis_client, web.settings, load_inventory(web.settings.chatops_inventory_file))
    with pytest.raises(Exception, match="no target 'ghost'"):
        journal.append([Change(target="ghost", kind=DEPLOY, at=time.time(), what="x")])
    assert list(redis_client.scan_iter(match=f"{keys.prefix}fleet:changes:*")) == []


def test_a_redis_that_cannot_store_the_marker_gets_a_5xx(
    make_bot: Callable[..., SlackBot], inventory_file: Path
) -> None:
    bot = make_bot(
        tools=[],
        chatops_inventory_file=inventory_file,
        chatops_runner_secret=RUNNER_SECRET,
        chatops_changes_token=TOKEN,
        redis_url="redis://127.0.0.1:1/0",
    )
    assert (
        post(bot, "/changes", marker(targets=["web-01"]), **BEARER).status_code == 503
    )  # the sender retries
