"""The catalog's ``targets:`` field, and tools rebuilt for a target through an injected command runner."""

from __future__ import annotations

import json
import shlex
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tools.catalog import load_catalog
from tools.errors import CatalogError, SshConnectionError
from tools.placement import WORKER, Placement
from tools.process import CommandResult

CATALOG = """
tools:
  - name: uptime
    description: Uptime.
    category: read_only
    run: ["uptime"]
  - name: purge_queue
    description: Purge a queue.
    category: destructive
    targets: [ssh, runner]
    params:
      queue: {type: string, enum: [emails, webhooks]}
      note: {type: string, required: false}
    dry_run: ["queuectl", "count", "{queue}"]
    run: ["queuectl", "purge", "{queue}", "--note={note}", "--by={confirmed_by}"]
  - name: health
    description: Health.
    category: read_only
    targets: [kubernetes]
    http: {url: "https://status.example.com/health"}
"""


@dataclass
class RecordingRunner:
    """A command runner that records each call and answers with canned output."""

    stdout: str = "ok\n"
    calls: list[tuple[list[str], float, Mapping[str, str] | None]] = field(default_factory=list)

    def __call__(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> CommandResult:
        self.calls.append((list(argv), timeout, env))
        return CommandResult(tuple(argv), 0, self.stdout, "", timed_out=False, duration=0.1, timeout=timeout)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tools.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_targets_default_to_the_runner_and_local_and_are_listed_by_kind(tmp_path: Path) -> None:
    catalog = load_catalog(write(tmp_path, CATALOG), env={})
    assert catalog.specs["uptime"].targets == ["runner", "local"]
    assert [spec.name for spec in catalog.specs_for("ssh")] == ["purge_queue"]
    assert [spec.name for spec in catalog.specs_for("runner")] == ["uptime", "purge_queue"]
    assert [spec.name for spec in catalog.specs_for("kubernetes")] == ["health"]


def test_a_tool_built_for_a_runner_runs_its_dry_run_and_command_through_it(tmp_path: Path) -> None:
    catalog = load_catalog(write(tmp_path, CATALOG), env={"PATH": "/usr/bin"})
    runner = RecordingRunner(stdout="12 messages\n")
    tool = catalog.build_for_runner(catalog.specs["purge_queue"], runner)
    assert (tool.name, tool.category) == (catalog.tools[1].name, catalog.tools[1].category)
    assert tool.definition == catalog.tools[1].definition

    preview = tool.preview(json.dumps({"queue": "emails"}), timeout=10)
    assert preview is not None and "12 messages" in preview.output
    described = tool.describe(json.dumps({"queue": "emails", "note": "x; $(reboot)"}))
    result = tool.execute(
        json.dumps({"queue": "emails", "note": "x; $(reboot)", "confirmed_by": "U7"}), timeout=10
    )
    assert not result.is_error, result.output

    (dry_argv, _, env), (argv, timeout, _) = runner.calls
    assert dry_argv == ["queuectl", "count", "emails"]
    assert argv == ["queuectl", "purge", "emails", "--note=x; $(reboot)", "--by=U7"]
    assert described is not None
    assert described.splitlines()[0] == shlex.join([*argv[:-1], "--by=<approver>"])
    assert 0 < timeout <= 10 and env == {"PATH": "/usr/bin"}


def test_an_unreachable_target_is_an_error_the_model_reads(tmp_path: Path) -> None:
    catalog = load_catalog(write(tmp_path, CATALOG), env={})

    def unreachable(
        argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None, cwd: str | None = None
    ) -> CommandResult:
        raise SshConnectionError("db-1", "SSH target 'db-1' (10.0.0.9:22): connection refused")

    tool = catalog.build_for_runner(catalog.specs["uptime"], unreachable)
    result = tool.execute("{}", timeout=5)
    assert result.is_error
    assert result.output == "Error: SSH target 'db-1' (10.0.0.9:22): connection refused"


def assert_problem(tmp_path: Path, tool_yaml: str, *fragments: str) -> None:
    path = write(tmp_path, "tools:\n" + textwrap.indent(textwrap.dedent(tool_yaml), "  "))
    with pytest.raises(CatalogError) as caught:
        load_catalog(path, env={})
    message = str(caught.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, message


def test_an_http_tool_cannot_target_ssh(tmp_path: Path) -> None:
    assert_problem(
        tmp_path,
        """
        - name: health
          description: d
          category: read_only
          targets: [runner, ssh]
          http: {url: "https://status.example.com/health"}
        """,
        "tool 'health', field 'targets': ssh runs argv commands: only a run: tool can target ssh (not http)",
    )


@pytest.mark.parametrize(
    ("targets", "expected"),
    [
        (
            "[shh]",
            "field 'targets[0]': Input should be 'runner', 'local', 'ssh' or 'kubernetes' (did you mean 'ssh'?)",
        ),
        ("[runner, kubernets]", "field 'targets[1]': Input should be 'runner'"),
        ("[SSH]", "field 'targets[0]': Input should be"),
        ("['ssh; rm -rf /']", "field 'targets[0]': Input should be"),
        ("[ssh, ssh]", "field 'targets': Value error, 'ssh' listed more than once"),
        ("[]", "field 'targets': List should have at least 1 item"),
        ("ssh", "field 'targets': Input should be a valid list"),
    ],
)
def test_a_bad_targets_list_names_the_tool_and_field(tmp_path: Path, targets: str, expected: str) -> None:
    assert_problem(
        tmp_path,
        f"""
        - name: restart
          description: d
          category: mutating
          targets: {targets}
          run: ["systemctl", "restart", "nginx"]
        """,
        f"tool 'restart', {expected}",
    )


def test_a_misspelt_targets_key_is_named_with_a_suggestion(tmp_path: Path) -> None:
    assert_problem(
        tmp_path,
        """
        - name: restart
          description: d
          category: mutating
          target: [ssh]
          run: ["systemctl", "restart", "nginx"]
        """,
        "tool 'restart', field 'target': unknown key 'target' (did you mean 'targets'?)",
    )


def test_the_documented_ssh_example_loads(tmp_path: Path) -> None:
    docs = (Path(__file__).resolve().parents[3] / "docs" / "TOOLS.md").read_text()
    section = docs.split("### Targets and SSH", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    catalog = load_catalog(write(tmp_path, "tools:\n" + example), env={})
    assert [spec.name for spec in catalog.specs_for("ssh")] == ["disk_report"]


def test_where_a_catalog_tool_runs_follows_from_what_it_does(tmp_path: Path) -> None:
    catalog = load_catalog(write(tmp_path, CATALOG), env={})
    placed = {tool.name: tool.placement for tool in catalog.tools}
    assert placed == {
        "uptime": Placement.target("runner", "local"),
        "purge_queue": Placement.target("ssh", "runner"),
        "health": WORKER,  # its request leaves from the worker, whatever its targets say
    }
    rebuilt = catalog.build_for_runner(catalog.specs["purge_queue"], RecordingRunner())
    assert rebuilt.placement == placed["purge_queue"]


def test_a_command_tool_cannot_claim_to_run_in_the_worker(tmp_path: Path) -> None:
    # A catalog author (or whoever edits the file) claims the worker for a command: a call would
    # then run it on the bot's own host whatever target the model named. Refused at start-up.
    assert_problem(
        tmp_path,
        """
        - name: wipe
          description: d
          category: read_only
          placement: worker
          run: ["rm", "-rf", "/var/spool/mail"]
        """,
        "tool 'wipe', field 'placement': a run: tool runs its command on the call's target",
    )
    assert_problem(
        tmp_path,
        """
        - name: health
          description: d
          category: read_only
          placement: target
          http: {url: "https://status.example.com/health"}
        """,
        "tool 'health', field 'placement': an http: tool's request leaves from the worker",
    )
    assert_problem(
        tmp_path,
        """
        - name: wipe
          description: d
          category: read_only
          placement: anywhere
          run: ["rm", "-rf", "/var/spool/mail"]
        """,
        "tool 'wipe', field 'placement': Input should be 'target' or 'worker'",
    )


def test_saying_what_a_tool_does_anyway_is_accepted(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        tools:
          - {name: up, description: d, category: read_only, placement: target, run: ["uptime"]}
          - {name: ping, description: d, category: read_only, placement: worker, http: {url: "https://a.example/"}}
        """,
    )
    placed = {tool.name: tool.placement for tool in load_catalog(path, env={}).tools}
    assert placed == {"up": Placement.target("runner", "local"), "ping": WORKER}
