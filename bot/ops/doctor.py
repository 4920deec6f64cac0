"""``chatops doctor``: is this installation able to work? One PASS / WARN / FAIL line per piece.

Checks, in order (each independent of the others, so one broken piece does not hide the next):

* ``settings``: every value is accepted and every name is a setting (``bot.settings_load``: a
  malformed value or a mistyped name FAILs here, a deprecated name or a stranger in the environment
  WARNs), the Slack token and signing secret are set, the runtime factory imports, the redaction
  patterns compile; a check that needs a refused setting (``REDIS_URL`` for ``redis``) FAILs in one
  line saying so, and every other check still runs;
* ``redis``: ``REDIS_URL`` answers, is new enough for streams, and some worker listens on the queue;
* ``sentinel`` (with ``REDIS_SENTINELS`` only): what each sentinel says about the master and its
  replicas, and whether ``WAIT 1`` is possible (``bot.ops.doctor_sentinel``);
* ``persist``: the server's persistence keeps an approval and an executing mark across a crash
  (AOF with ``appendfsync always``, or WAITAOF on 7.2+) and never evicts them (``noeviction``);
  a warning names the window a crash can lose (a failure under ``CHATOPS_DURABILITY=strict``,
  where mutating tools would be refused);
* ``slack``: ``auth.test`` accepts ``SLACK_BOT_TOKEN``, and the scopes Slack reports for it
  (the ``x-oauth-scopes`` response header) include every bot scope in ``manifest.json``;
* ``llm``: each model of the chain (``LLM_MODEL``, then ``LLM_FALLBACKS``) answers a small request
  every model family accepts, at its own endpoint;
* ``tools``: the built-ins and the catalog (``CHATOPS_TOOLS_FILE``) load;
* ``targets``, ``mcp``, ``policy``: the inventory and its runners, the MCP servers, the policy file;
* ``runbooks`` (with ``CHATOPS_RUNBOOKS_DIR`` only): the folder, and each runbook the index skips
  (malformed front matter, ...) named with what is wrong (``bot.ops.doctor_runbooks``);
* ``approve``: who may approve; an empty ``CHATOPS_APPROVERS`` (and no policy file) in a workspace
  of more than a handful of full members WARNs, with their number (``bot.ops.doctor_approvers``).

The exit status is 1 when any check fails (warnings do not count), so ``chatops doctor`` can
gate a deploy. Nothing is changed anywhere; the Slack call is ``auth.test`` only.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TextIO

import redis
from rq import Queue, Worker
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from agent.errors import ConfigurationError, EmptyResponseError, LLMError, RetriesExhaustedError
from agent.models.endpoints import ClientOptions, ModelEndpoint, build_model
from agent.types import Message, Request
from bot.errors import BotConfigurationError
from bot.models import client_options, model_keys
from bot.observability.logs import redactor_for
from bot.ops.compose import load_runtime_factory
from bot.ops.doctor_approvers import check_approvers
from bot.ops.doctor_changes import check_changes
from bot.ops.doctor_check import TIMEOUT, Check, Outcome
from bot.ops.doctor_mcp import check_mcp
from bot.ops.doctor_runbooks import check_runbooks
from bot.ops.doctor_sentinel import check_sentinel
from bot.ops.doctor_targets import check_targets
from bot.ops.runs_cli import Progress
from bot.ops.tools_cli import BUILT_IN, tool_rows
from bot.redis_connection import RedisTarget, open_redis
from bot.runs.durability import DurabilityMode, findings, read_persistence
from bot.settings import Settings
from bot.settings_load import SettingProblem
from bot.slack.delivery.client import api_base_url
from tools.errors import ToolConfigError
from tools.safety import Redactor

MIN_REDIS = (5, 0)  # streams (the audit log)
REPORTS_SETTINGS = True  # bot.ops.cli: the settings' errors are this command's first check, not a stop


def default_manifest() -> Path | None:
    """``./manifest.json``, else the one next to the code (a source checkout)."""
    for candidate in (Path.cwd() / "manifest.json", Path(__file__).resolve().parents[2] / "manifest.json"):
        if candidate.is_file():
            return candidate
    return None


def manifest_scopes(path: Path) -> list[str]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return list(data.get("oauth_config", {}).get("scopes", {}).get("bot", []))


# -- the checks ----------------------------------------------------------------------------------------


def check_settings(settings: Settings, found: Sequence[SettingProblem] = ()) -> Check:
    problems = [problem.line() for problem in found if problem.fatal]
    warnings = [problem.line() for problem in found if not problem.fatal]
    if not settings.slack_bot_token:
        problems.append("SLACK_BOT_TOKEN is empty (the Bot User OAuth Token, xoxb-...)")
    elif not settings.slack_bot_token.startswith("xoxb-"):
        warnings.append("SLACK_BOT_TOKEN does not start with xoxb- (is it the bot token?)")
    if not settings.slack_signing_secret and not settings.slack_app_token:
        problems.append("SLACK_SIGNING_SECRET is empty (needed to verify Slack's requests over HTTP)")
    if not settings.llm_api_key:
        warnings.append("LLM_API_KEY is empty (fine only for endpoints without authentication)")
    try:
        load_runtime_factory(settings.chatops_runtime)
    except BotConfigurationError as error:
        problems.append(f"CHATOPS_RUNTIME: {error}")
    try:
        Redactor.from_settings(settings)
    except ToolConfigError as error:
        problems.append(f"CHATOPS_REDACT_PATTERNS: {error}")
    if problems:
        return Check(
            "settings", Outcome.FAIL, "\n".join(problems + warnings), "set them in .env or the environment"
        )
    if warnings and found:
        return Check("settings", Outcome.WARN, "\n".join(warnings), "rename or remove the names above")
    if warnings:
        return Check("settings", Outcome.WARN, "\n".join(warnings))
    return Check("settings", Outcome.PASS, "Slack, LLM and runtime settings are complete")


def _where(settings: Settings, redact: Callable[[str], str]) -> str:
    """REDIS_URL, or behind sentinels the master they name (the URL's host is not used then)."""
    return (
        RedisTarget.from_settings(settings).describe()
        if settings.redis_sentinels
        else redact(settings.redis_url)
    )


def check_redis(settings: Settings, redact: Callable[[str], str]) -> Check:
    where = _where(settings, redact)
    client = open_redis(settings)
    try:
        client.ping()
        version_text = str(client.info("server").get("redis_version", "0"))
        queue = Queue(settings.chatops_queue, connection=client)
        workers = Worker.count(connection=client, queue=queue)
    except redis.RedisError as error:
        return Check(
            "redis", Outcome.FAIL, f"cannot reach Redis at {where}: {error}", "start Redis or fix REDIS_URL"
        )
    finally:
        client.close()
    version = tuple(int(part) for part in version_text.split(".")[:2] if part.isdigit())
    if version < MIN_REDIS:
        return Check("redis", Outcome.FAIL, f"{where} runs Redis {version_text}; chatops needs 5.0 or newer")
    summary = (
        f"{where} answers (Redis {version_text}); {workers} worker(s) on queue {settings.chatops_queue!r}"
    )
    if workers == 0:
        return Check(
            "redis", Outcome.WARN, summary, "start one with `chatops worker` (runs wait in the queue)"
        )
    return Check("redis", Outcome.PASS, summary)


PERSISTENCE_FIX = (
    "set appendonly yes, appendfsync always and maxmemory-policy noeviction "
    "(docs/OPERATIONS.md, Redis persistence)"
)


def check_persistence(settings: Settings, redact: Callable[[str], str]) -> Check:
    """Can a Redis crash or eviction lose an executing mark (and let an approved call run twice)?"""
    where = _where(settings, redact)
    client = open_redis(settings)
    try:
        persistence = read_persistence(client)
    except redis.RedisError as error:
        return Check("persist", Outcome.WARN, f"skipped: cannot read the persistence of {where}: {error}")
    finally:
        client.close()
    found = findings(persistence)
    if not found:
        return Check("persist", Outcome.PASS, f"{persistence.summary()}: a crash keeps every executing mark")
    strict = settings.chatops_durability == DurabilityMode.STRICT
    if strict and persistence.crash_loss() is not None:
        found.append("CHATOPS_DURABILITY=strict: every mutating tool is refused until this is fixed")
        return Check("persist", Outcome.FAIL, "\n".join(found), PERSISTENCE_FIX)
    return Check("persist", Outcome.WARN, "\n".join(found), PERSISTENCE_FIX)


def check_slack(settings: Settings, manifest: Path | None) -> Check:
    if not settings.slack_bot_token:
        return Check("slack", Outcome.FAIL, "skipped: SLACK_BOT_TOKEN is empty")
    client = WebClient(
        token=settings.slack_bot_token,
        base_url=api_base_url(settings.slack_api_url),
        timeout=int(TIMEOUT),
        retry_handlers=[],
    )
    try:
        with _quiet("slack_sdk"):  # its own ERROR line would repeat the check's
            response = client.auth_test()
    except SlackApiError as error:
        code = error.response.get("error") if error.response is not None else str(error)
        return Check(
            "slack",
            Outcome.FAIL,
            f"Slack rejected SLACK_BOT_TOKEN (auth.test answered {code})",
            "copy the Bot User OAuth Token (xoxb-...) from the app's OAuth & Permissions page",
        )
    except OSError as error:
        return Check(
            "slack",
            Outcome.FAIL,
            f"cannot reach Slack at {settings.slack_api_url}: {error}",
            "check SLACK_API_URL",
        )
    who = f"@{response.get('user')} in {response.get('team')} ({response.get('team_id')})"
    headers = {name.lower(): value for name, value in (response.headers or {}).items()}
    granted = {s.strip() for s in str(headers.get("x-oauth-scopes", "")).split(",") if s.strip()}
    if manifest is None:
        return Check(
            "slack", Outcome.WARN, f"token works for {who}; manifest.json not found, scopes not compared"
        )
    needed = manifest_scopes(manifest)
    if not granted:
        return Check("slack", Outcome.WARN, f"token works for {who}; Slack did not report the token's scopes")
    missing = [scope for scope in needed if scope not in granted]
    if missing:
        return Check(
            "slack",
            Outcome.FAIL,
            f"token works for {who} but lacks scopes from {manifest.name}: {', '.join(missing)}",
            "add them under OAuth & Permissions (or update the app from manifest.json), then reinstall the app",
        )
    return Check(
        "slack", Outcome.PASS, f"token works for {who}; it has all {len(needed)} scopes of {manifest.name}"
    )


@contextmanager
def _quiet(logger_name: str) -> Iterator[None]:
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


# Every model family accepts this: no max_tokens (o-series and gpt-5 refuse it, and a one-token
# limit makes reasoning models answer nothing), no temperature (gpt-5 accepts only the default);
# the Anthropic client adds the max_tokens its API requires.
PROBE_TEXT = "Reply with the single word OK."


def check_llm(settings: Settings) -> Check:
    try:
        chain = settings.model_endpoints()
    except ConfigurationError as error:
        return Check("llm", Outcome.FAIL, f"LLM_FALLBACKS: {error}", "fix LLM_FALLBACKS (.env.example)")
    keys = model_keys(settings)
    options = client_options(settings)
    options = replace(
        options,
        connect_timeout=min(options.connect_timeout, TIMEOUT),
        read_timeout=min(settings.llm_read_timeout, 30.0),
        max_attempts=1,
    )
    lines, failed = [], False
    for endpoint in chain:
        ok, line = _ask(endpoint, keys, options)
        failed = failed or not ok
        lines.append(line)
    if failed:
        return Check(
            "llm",
            Outcome.FAIL,
            "\n".join(lines),
            "check LLM_BASE_URL, LLM_API_KEY and the model names (and LLM_PROVIDER, LLM_FALLBACKS' endpoints and keys)",
        )
    return Check("llm", Outcome.PASS, "\n".join(lines))


def _ask(endpoint: ModelEndpoint, keys: Mapping[str, str], options: ClientOptions) -> tuple[bool, str]:
    """One small request: (answered, what happened)."""
    model = endpoint.model
    try:
        where = endpoint.url()
        client = build_model(endpoint, keys, options)
    except ConfigurationError as error:
        return False, f"model {model} ({endpoint.provider}): {error}"
    started = time.monotonic()
    try:
        response = client.complete(Request(model=model, messages=[Message.user(PROBE_TEXT)]))
    except LLMError as error:
        cause = error.last if isinstance(error, RetriesExhaustedError) and error.last is not None else error
        took = time.monotonic() - started
        if isinstance(cause, EmptyResponseError):
            return True, f"model {model} answered at {where} in {took:.1f}s (an empty answer)"
        return False, f"model {model} at {where}: {_describe(cause, endpoint.api_key_env)}"
    finally:
        close = getattr(client, "close", None)
        if close is not None:
            close()
    took = time.monotonic() - started
    return True, f"model {model} answered at {where} in {took:.1f}s ({response.model or model})"


def _describe(error: LLMError, key_variable: str = "LLM_API_KEY") -> str:
    if error.status_code == 401:
        return f"the endpoint rejected {key_variable or 'the (missing) key'} (401): {error.message}"
    if error.status_code in (403, 404):
        return f"the endpoint refused the request ({error.status_code}): {error.message}"
    if error.status_code is None:
        return f"cannot reach the endpoint: {error.message}"
    return f"HTTP {error.status_code}: {error.message}"


def check_tools(settings: Settings) -> Check:
    try:
        rows = tool_rows(settings)
    except ToolConfigError as error:
        return Check(
            "tools",
            Outcome.FAIL,
            f"the tools cannot be loaded: {error}",
            "fix CHATOPS_TOOLS_FILE (docs/TOOLS.md)",
        )
    builtin = sum(1 for row in rows if row.origin == BUILT_IN)
    catalog = (
        f", {len(rows) - builtin} from {settings.chatops_tools_file}" if settings.chatops_tools_file else ""
    )
    return Check("tools", Outcome.PASS, f"{len(rows)} tools ({builtin} built-in{catalog})")


def _check_policy(settings: Settings) -> Check:
    """``CHATOPS_POLICY_FILE`` reads without a mistake (each one names the rule and field)."""
    from bot.errors import PolicyConfigError
    from bot.policy.file import load_policy
    from bot.runs.approval_seal import NEEDS_SECRET

    if not settings.chatops_runner_secret:
        return Check("policy", Outcome.FAIL, NEEDS_SECRET, "set CHATOPS_RUNNER_SECRET to a long random value")
    try:
        policy = load_policy(settings.chatops_policy_file, tuple(settings.chatops_approvers))
    except PolicyConfigError as error:
        return Check("policy", Outcome.FAIL, str(error), "chatops policy check shows the same list")
    glass = f"; break-glass {policy.break_glass.minutes} min" if policy.break_glass else ""
    return Check("policy", Outcome.PASS, f"{policy.source}: {len(policy.rules)} rule(s){glass}")


# A check that reads settings with these prefixes is not run when one of them was refused: it would
# check the default in its place (127.0.0.1:6379 for a malformed REDIS_URL) and mislead.
NEEDS: dict[str, str] = {
    "redis": "redis_",
    "persist": "redis_",
    "sentinel": "redis_",
    "targets": "redis_",
    "slack": "slack_",
    "approve": "slack_",
    "llm": "llm_",
}


def _guarded(name: str, check: Callable[[], Check], invalid: frozenset[str]) -> Callable[[], Check]:
    refused = sorted(field.upper() for field in invalid if field.startswith(NEEDS.get(name, "\0")))
    if not refused:
        return check
    summary = f"skipped: {', '.join(refused)} {'is' if len(refused) == 1 else 'are'} invalid (see settings)"
    return lambda: Check(name, Outcome.FAIL, summary)


def run_checks(
    settings: Settings,
    manifest: Path | None,
    out: TextIO,
    progress: Progress | None = None,
    problems: Sequence[SettingProblem] = (),
    invalid: frozenset[str] = frozenset(),
) -> list[Check]:
    """Run every check, printing each line as soon as it is known. ``problems`` are the settings'
    (``bot.settings_load``); a check that needs one of the ``invalid`` settings is not run."""
    redact = redactor_for(settings).redact
    progress = progress or Progress()
    steps: list[tuple[str, Callable[[], Check]]] = [
        ("settings", lambda: check_settings(settings, problems)),
        ("redis", lambda: check_redis(settings, redact)),
        ("persist", lambda: check_persistence(settings, redact)),
        *([("sentinel", lambda: check_sentinel(settings))] if settings.redis_sentinels else []),
        ("slack", lambda: check_slack(settings, manifest)),
        ("llm", lambda: check_llm(settings)),
        ("tools", lambda: check_tools(settings)),
        ("targets", lambda: check_targets(settings)),
        ("mcp", lambda: check_mcp(settings)),
        *([("runbooks", lambda: check_runbooks(settings))] if settings.chatops_runbooks_dir else []),
        *([("policy", lambda: _check_policy(settings))] if settings.chatops_policy_file else []),
        ("approve", lambda: check_approvers(settings)),
        ("changes", lambda: check_changes(settings)),
    ]
    results = []
    for number, (name, check) in enumerate(steps, 1):
        progress.update(f"[{number}/{len(steps)}] checking {name}…")
        result = _guarded(name, check, invalid)()
        progress.done()
        out.write("\n".join(redact(line) for line in result.lines()) + "\n")
        out.flush()
        results.append(result)
    return results


# -- ``chatops doctor`` ------------------------------------------------------------------------------


def configure_cli(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--manifest", type=Path, help="the Slack app manifest to compare scopes with")


def run_cli(args: argparse.Namespace, settings: Settings) -> int:
    manifest = args.manifest or default_manifest()
    problems: list[SettingProblem] = getattr(args, "settings_problems", [])
    invalid: frozenset[str] = getattr(args, "invalid_settings", frozenset())
    results = run_checks(settings, manifest, sys.stdout, problems=problems, invalid=invalid)
    failed = [r.name for r in results if r.outcome is Outcome.FAIL]
    warned = [r.name for r in results if r.outcome is Outcome.WARN]
    if failed:
        print(f"\n{len(failed)} check(s) failed: {', '.join(failed)}.")
        return 1
    print(f"\nAll checks passed{f' ({len(warned)} warning(s))' if warned else ''}.")
    return 0
