"""Turn a checked ``ToolSpec`` into a ``FunctionTool`` that runs its argv or HTTP request.

Where an argv runs is the ``command_runner``'s business: ``tools.process.run_command`` on this
host by default, or an ``SshRunner``'s ``run`` for a target reached over SSH. The same spec builds
either, and the approval card's command is the same ``render_argv`` output in both.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import httpx
from pydantic import BaseModel

from agent.tooling import CallCategory, ToolResult
from tools import http_client
from tools.base import CONFIRMED_BY, CategorizeFunction, FunctionTool, ToolContext, error_result
from tools.catalog.params import arguments_model, parameters_schema, value_text
from tools.catalog.spec import HttpSpec, ToolSpec
from tools.catalog.templates import expand_env_in_template, is_single_placeholder, placeholders, render
from tools.egress import EgressPolicy, fixed_url_entry
from tools.egress_approval import policy_for, unlisted_category
from tools.env_references import env_references
from tools.placement import WORKER, Placement
from tools.process import CommandRunner, run_command
from tools.text import shorten
from tools.verification import Before, Check, Declared, NoUndo, Undo

_BODY_EXCERPT_CHARS = 2000
Step = Callable[[BaseModel, ToolContext], ToolResult]
Describe = Callable[[BaseModel], str]
# Stands for the approver's Slack user ID in a described command: it is known only at the click.
APPROVER = "<approver>"


def build_tool(
    spec: ToolSpec,
    *,
    env: Mapping[str, str],
    command_env: Mapping[str, str],
    egress: EgressPolicy | None = None,
    command_runner: CommandRunner | None = None,
    show_elapsed: bool = True,
) -> FunctionTool[Any]:
    """The tool for ``spec`` (already checked by ``checks.check_tool``).

    ``egress``: what its ``http`` requests may reach besides their own fixed host (default: nothing).
    ``command_runner`` runs its ``run`` and ``dry_run`` argv (default: ``run_command``, this host).
    ``show_elapsed``: a command's result says how long it ran (``CHATOPS_TOOL_ELAPSED``).
    """
    argv_params = _argv_params(spec)
    model = arguments_model(spec.name, spec.params, argv_params)
    policy = egress or EgressPolicy()
    runner = command_runner or run_command
    main = _step(spec.run, spec.http, env, command_env, policy, runner, show_elapsed)
    preview = (
        _step(spec.dry_run, None, env, command_env, policy, runner, show_elapsed)
        if spec.dry_run is not None
        else None
    )
    return FunctionTool(
        main,
        model,
        name=spec.name,
        description=spec.description,
        category=spec.category,
        parallel=spec.parallel,
        timeout=spec.timeout,
        preview=preview,
        parameters=parameters_schema(spec.params),
        command=_describer(spec.run, spec.http, env),
        categorize=_categorizer(spec.http, env, policy),
        # A local argv is killed with its process group at the timeout; an HTTP request's timeouts
        # are per read, and an SSH session's connect and auth steps each have their own: those go
        # to the loop's pool, which stops waiting at the timeout.
        enforces_timeout=spec.run is not None and runner is run_command,
        placement=placement_of_spec(spec),
        verification=declared_of_spec(spec),
    )


def declared_of_spec(spec: ToolSpec) -> Declared | None:
    """Its ``before:``, ``check:`` and ``undo:``/``no_undo:`` (``tools.verification``), if any."""
    if spec.before is None and spec.check is None and spec.undo is None and spec.no_undo is None:
        return None
    undo: Undo | NoUndo | None = None
    if spec.undo is not None:
        undo = Undo(spec.undo.tool, spec.undo.args)
    elif spec.no_undo is not None:
        undo = NoUndo(spec.no_undo)
    return Declared(
        check=Check(spec.check.tool, spec.check.args, expect=spec.check.expect) if spec.check else None,
        before=Before(spec.before.tool, spec.before.args) if spec.before else None,
        undo=undo,
    )


def placement_of_spec(spec: ToolSpec) -> Placement:
    """Where the tool of ``spec`` runs: a command on the call's target (of its ``targets`` kinds),
    a request in the worker. From what it does, never from its ``placement:`` claim (checked)."""
    return Placement.target(*spec.targets) if spec.run is not None else WORKER


def secret_values(spec: ToolSpec, env: Mapping[str, str]) -> list[str]:
    """Values of the environment variables its headers use: redacted from every output."""
    blocks = [block for block in (spec.http, spec.dry_run) if isinstance(block, HttpSpec)]
    names = {name for block in blocks for value in block.headers.values() for name in env_references(value)}
    return [env[name] for name in sorted(names) if env.get(name)]


def _argv_params(spec: ToolSpec) -> set[str]:
    argv = [*(spec.run or []), *(spec.dry_run if isinstance(spec.dry_run, list) else [])]
    return {name for element in argv for name in placeholders(element)}


def _step(
    argv: list[str] | HttpSpec | None,
    http: HttpSpec | None,
    env: Mapping[str, str],
    command_env: Mapping[str, str],
    egress: EgressPolicy,
    runner: CommandRunner,
    show_elapsed: bool = True,
) -> Step:
    if isinstance(argv, list):
        return _run_step(argv, command_env, runner, show_elapsed)
    block = argv if isinstance(argv, HttpSpec) else http
    assert block is not None, "checked: a tool has run or http"
    return _http_step(block, env, egress)


def _values(args: BaseModel, ctx: ToolContext) -> dict[str, str]:
    return _filled(args, ctx.confirmed_by)


def _filled(args: BaseModel, confirmed_by: str | None) -> dict[str, str]:
    values = {name: value_text(value) for name, value in args.model_dump().items() if value is not None}
    if confirmed_by is not None:
        values[CONFIRMED_BY] = confirmed_by
    return values


def _describer(argv: list[str] | None, http: HttpSpec | None, env: Mapping[str, str]) -> Describe:
    """The approval card's exact command (``shlex.join`` of the argv) or request, for the main step.

    Built by the same functions the step runs (``render_argv``, ``_build_request``), so what the
    card shows is what executes; header values are never shown (they may hold secrets).
    """
    if argv is not None:
        template = argv

        def command(args: BaseModel) -> str:
            return _with_approver_note(shlex.join(render_argv(template, _filled(args, APPROVER))))

        return command
    assert http is not None, "checked: a tool has run or http"
    block, headers = http, _env_headers(http, env)

    def request(args: BaseModel) -> str:
        return _with_approver_note(_build_request(block, headers, _filled(args, APPROVER), args).describe())

    return request


def _with_approver_note(text: str) -> str:
    return f"{text}\n({APPROVER} is the Slack ID of whoever approves)" if APPROVER in text else text


def render_argv(template: list[str], values: Mapping[str, str]) -> list[str]:
    """One argv element per template element; an element using an omitted optional parameter is left out."""
    argv = []
    for element in template:
        if all(name in values for name in placeholders(element)):
            argv.append(render(element, values))
    return argv


def _run_step(
    template: list[str], command_env: Mapping[str, str], runner: CommandRunner, show_elapsed: bool = True
) -> Step:
    def run(args: BaseModel, ctx: ToolContext) -> ToolResult:
        result = runner(render_argv(template, _values(args, ctx)), timeout=ctx.remaining(), env=command_env)
        if not result.ok:
            return error_result(result.failure_message())
        # The elapsed time is decoration: loop detection hashes the command and its output only.
        # Without it (CHATOPS_TOOL_ELAPSED=false) the result is the same bytes every time, which a
        # recorded model run needs to replay (chatops eval --replay, docs/EVAL.md).
        stable = f"`{result.command_line}` succeeded\n{result.output_text()}"
        if not show_elapsed:
            return ToolResult(output=stable, stable_output=stable)
        return ToolResult(
            output=f"`{result.command_line}` succeeded in {result.duration:.1f} s\n{result.output_text()}",
            stable_output=stable,
        )

    return run


def _http_policy(block: HttpSpec, egress: EgressPolicy) -> EgressPolicy:
    # A host the operator wrote into the URL is allowed by writing it there; a URL that comes
    # from the model ("{url}") or has a placeholder in its host reaches only what egress allows.
    own_host = fixed_url_entry(block.url)
    return egress.allowing([own_host]) if own_host is not None else egress


def _categorizer(
    http: HttpSpec | None, env: Mapping[str, str], egress: EgressPolicy
) -> CategorizeFunction[BaseModel] | None:
    """A read-only ``http`` tool's call to a host the policy does not list needs a card under
    ``CHATOPS_EGRESS_UNLISTED=approve`` (a mutating tool's card is asked for anyway, and opens
    no host: ``policy_for`` opens one only for a call raised for that reason)."""
    if http is None:
        return None
    block, headers, policy = http, _env_headers(http, env), _http_policy(http, egress)

    def categorize(args: BaseModel) -> CallCategory | None:
        url = _build_request(block, headers, _filled(args, None), args).url
        return unlisted_category(policy, http_client.url_destination(url))

    return categorize


def _http_step(block: HttpSpec, env: Mapping[str, str], egress: EgressPolicy) -> Step:
    headers = _env_headers(block, env)
    policy = _http_policy(block, egress)

    def call(args: BaseModel, ctx: ToolContext) -> ToolResult:
        request = _build_request(block, headers, _values(args, ctx), args)  # the card shows this request
        url, sent_headers, body = request.url, request.headers, request.body
        timeout = max(0.1, ctx.remaining())
        try:
            response = http_client.request(
                block.method,
                url,
                timeout=timeout,
                egress=policy_for(policy, http_client.url_destination(url), ctx),
                headers=sent_headers,
                body=body,
                follow_redirects=block.follow_redirects,
            )
        except httpx.HTTPError as exc:
            return error_result(f"{block.method} {url}: {http_client.describe_http_error(exc, ctx.timeout)}")
        return _describe_response(block, url, response)

    return call


@dataclass(frozen=True)
class _Request:
    """One HTTP request of a catalog tool, fully rendered."""

    method: str
    url: str
    headers: dict[str, str]
    body: str | None

    def describe(self) -> str:
        """Method, final URL, header names (never their values: they may hold secrets), body."""
        lines = [f"{self.method} {self.url}"]
        if self.headers:
            lines.append(f"headers: {', '.join(self.headers)} (values not shown)")
        if self.body is not None:
            lines.append(f"body: {self.body}")
        return "\n".join(lines)


def _env_headers(block: HttpSpec, env: Mapping[str, str]) -> dict[str, str]:
    # ${NAME} is read once, at start-up; the values are also handed to the redactor.
    return {name: expand_env_in_template(value, env) for name, value in block.headers.items()}


def _build_request(
    block: HttpSpec, headers: Mapping[str, str], values: Mapping[str, str], args: BaseModel
) -> _Request:
    """The request ``block`` makes for these values: what runs, and what the approval card shows."""
    sent_headers = {
        name: render(value, values)
        for name, value in headers.items()
        if all(placeholder in values for placeholder in placeholders(value))
    }
    body = None
    if block.json_body is not None:
        body = json.dumps(_render_json(block.json_body, values, args.model_dump()))
        sent_headers.setdefault("Content-Type", "application/json")
    return _Request(block.method, _render_url(block.url, values), sent_headers, body)


def _render_url(template: str, values: Mapping[str, str]) -> str:
    whole = is_single_placeholder(template)
    if whole is not None:
        return values.get(whole, "")
    # A value inside a URL is percent-encoded: it cannot add path segments, a query or a host.
    return render(template, {name: values.get(name, "") for name in placeholders(template)}, encode=True)


def _render_json(node: Any, values: Mapping[str, str], typed: Mapping[str, Any]) -> Any:
    """Strings that are exactly ``{param}`` take the typed value; other strings are filled as text."""
    if isinstance(node, str):
        whole = is_single_placeholder(node)
        if whole is not None:
            return typed.get(whole, values.get(whole))
        return render(node, {name: values.get(name, "") for name in placeholders(node)})
    if isinstance(node, dict):
        return {key: _render_json(item, values, typed) for key, item in node.items()}
    if isinstance(node, list):
        return [_render_json(item, values, typed) for item in node]
    return node


def _describe_response(block: HttpSpec, url: str, response: http_client.HttpResponse) -> ToolResult:
    outcome = f"{block.method} {url} -> {response.status} {response.reason}"
    summary = f"{outcome} in {response.elapsed * 1000:.0f} ms"
    if isinstance(block.expect_status, list):
        status_ok = response.status in block.expect_status
    elif block.expect_status is not None:
        status_ok = response.status == block.expect_status
    else:
        status_ok = response.status < 400
    problems = [] if status_ok else [f"expected status {block.expect_status or 'below 400'}"]
    if block.expect_text is not None and block.expect_text not in response.body:
        problems.append(f"body does not contain {block.expect_text!r}")
    body = shorten(response.body.strip(), _BODY_EXCERPT_CHARS)
    text = f"{summary}\n{body}" if body else summary
    stable = f"{outcome}\n{body}" if body else outcome  # the latency is decoration
    if problems:
        reason = "; ".join(problems)
        return replace(error_result(f"{reason}: {text}"), stable_output=f"Error: {reason}: {stable}")
    return ToolResult(output=text, stable_output=stable)
