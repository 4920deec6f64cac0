"""Rate tiers (429 + ``Retry-After``) and ``chat.postMessage``'s pace per channel, on by default."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from emulator.slack import SlackEmulator, SlackEmulatorClient
from emulator.slack.config import WorkspaceConfig
from emulator.slack.ratelimits import METHOD_TIERS, PER_MINUTE, POST_BURST, RateLimiter
from tests.support.emulator_workspace import TOKEN


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_rate_limits_are_on_by_default() -> None:
    assert WorkspaceConfig().rate_limits is True


def test_a_tier_allows_its_per_minute_floor_then_waits_for_the_next_token() -> None:
    clock = FakeClock()
    limiter = RateLimiter(clock=clock)
    assert METHOD_TIERS["usergroups.list"] == 2
    for _ in range(PER_MINUTE[2]):
        assert limiter.retry_after("usergroups.list") is None
    assert limiter.retry_after("usergroups.list") == 3  # 20/min: a token every 3 s
    clock.now += 3.0
    assert limiter.retry_after("usergroups.list") is None
    assert limiter.retry_after("users.info") is None  # budgets are per method


def test_post_message_allows_a_short_burst_per_channel_then_one_a_second() -> None:
    clock = FakeClock()
    limiter = RateLimiter(clock=clock)
    for _ in range(POST_BURST):
        assert limiter.retry_after("chat.postMessage", "C1") is None
    assert limiter.retry_after("chat.postMessage", "C1") == 1
    assert limiter.retry_after("chat.postMessage", "C2") is None  # another channel has its own pace
    clock.now += 1.0
    assert limiter.retry_after("chat.postMessage", "C1") is None
    assert limiter.retry_after("chat.postMessage", "C1") == 1


def test_refused_posts_do_not_use_up_the_workspace_budget() -> None:
    limiter = RateLimiter(clock=FakeClock())
    for _ in range(POST_BURST):
        limiter.retry_after("chat.postMessage", "C1")
    for _ in range(500):  # hammering one channel: every call refused...
        assert limiter.retry_after("chat.postMessage", "C1") == 1
    assert limiter.retry_after("chat.postMessage", "C2") is None  # ...and the others still post


def test_an_unknown_method_gets_a_stingy_tier() -> None:
    limiter = RateLimiter(clock=FakeClock())
    answers = [limiter.retry_after("something.new") for _ in range(PER_MINUTE[2] + 1)]
    assert answers[-1] is not None and answers[:-1] == [None] * PER_MINUTE[2]


def test_over_the_pace_slack_answers_429_ratelimited_with_retry_after(
    web: WebClient, control: SlackEmulatorClient
) -> None:
    for i in range(POST_BURST):
        web.chat_postMessage(channel="C_INCIDENT", text=f"m{i}")
    with pytest.raises(SlackApiError) as info:
        web.chat_postMessage(channel="C_INCIDENT", text="one too many")
    response = info.value.response
    assert (response.status_code, response["error"], response.headers["Retry-After"]) == (
        429,
        "ratelimited",
        "1",
    )
    assert [m["text"] for m in control.messages("incident")] == [f"m{i}" for i in range(POST_BURST)]
    assert [c["status"] for c in control.calls("chat.postMessage")][-1] == 429


def test_slack_sdks_handler_waits_out_the_pace(emulator: SlackEmulator, control: SlackEmulatorClient) -> None:
    web = WebClient(
        token=TOKEN, base_url=emulator.api_url, retry_handlers=[RateLimitErrorRetryHandler(max_retry_count=3)]
    )
    started = time.monotonic()
    for i in range(POST_BURST + 1):
        web.chat_postMessage(channel="C_INCIDENT", text=f"m{i}")
    assert time.monotonic() - started >= 1.0
    assert len(control.messages("incident")) == POST_BURST + 1


def test_turning_limits_off_is_explicit_and_reset_refills_the_budgets(
    web: WebClient, control: SlackEmulatorClient
) -> None:
    control.set_rate_limits(False)
    assert control.state()["rate_limits"] is False
    for i in range(POST_BURST * 3):
        web.chat_postMessage(channel="C_INCIDENT", text=f"m{i}")
    control.set_rate_limits(True)
    for i in range(POST_BURST):
        web.chat_postMessage(channel="C_INCIDENT", text=f"again {i}")
    with pytest.raises(SlackApiError):
        web.chat_postMessage(channel="C_INCIDENT", text="over")
    control.reset()
    assert web.chat_postMessage(channel="C_INCIDENT", text="after reset")["ok"]


def test_rate_limits_must_be_a_boolean(emulator: SlackEmulator) -> None:
    request = urllib.request.Request(
        emulator.url + "/control/config",
        data=json.dumps({"rate_limits": "no"}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=5)
    assert info.value.code == 400
    assert emulator.core.ws.config.rate_limits is True


def test_the_command_line_turns_limits_off_only_when_asked() -> None:
    from emulator.slack.__main__ import build_config, parse_args

    assert build_config(parse_args([])).rate_limits is True
    relaxed = build_config(parse_args(["--no-rate-limits", "--enterprise-id", "E_GRID"]))
    assert (relaxed.rate_limits, relaxed.enterprise_id) == (False, "E_GRID")


def test_sharing_a_file_counts_as_a_post_in_its_channel() -> None:
    limiter = RateLimiter(clock=FakeClock())
    for _ in range(POST_BURST):
        assert limiter.retry_after("chat.postMessage", "C1") is None
    assert limiter.retry_after("files.completeUploadExternal", "C1") == 1
    assert limiter.retry_after("files.completeUploadExternal", "C2") is None
