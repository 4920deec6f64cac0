"""Loading the YAML catalog: valid files load; every mistake names file, tool and field; nothing half-loads."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from agent.tooling import ToolCategory
from tools.catalog import load_catalog
from tools.config import ToolsConfig
from tools.errors import CatalogError
from tools.registry import build_registry

ROOT = Path(__file__).resolve().parents[3]

# The format exactly as the issue and docs/TOOLS.md publish it.
CONTRACT_EXAMPLE = """\
tools:
  - name: restart_service
    description: Restart a systemd unit on this host.
    category: mutating        # read_only | mutating | destructive
    parallel: false           # read_only tools only
    timeout: 30               # seconds, default 30
    params:
      service: {type: string, description: unit name, pattern: "^[a-z0-9@._-]+$"}
    run: ["systemctl", "restart", "{service}"]
  - name: check_health
    description: GET a URL and report its status.
    category: read_only
    parallel: true
    params:
      url: {type: string}
    http: {method: GET, url: "{url}", expect_status: 200}
"""


@pytest.mark.parametrize("document", ["docs/TOOLS.md", "README.md"])
def test_the_docs_publish_the_same_example(document: str) -> None:
    docs = (ROOT / document).read_text()
    first_yaml_block = docs.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert first_yaml_block == CONTRACT_EXAMPLE


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tools.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_the_published_example_loads_with_its_categories_and_schema(tmp_path: Path) -> None:
    catalog = load_catalog(write(tmp_path, CONTRACT_EXAMPLE), env={})
    restart, health = catalog.tools
    assert (restart.name, restart.category, restart.parallel, restart.timeout) == (
        "restart_service",
        ToolCategory.MUTATING,
        False,
        30.0,
    )
    assert restart.definition.description == "Restart a systemd unit on this host."
    assert restart.definition.parameters == {
        "type": "object",
        "properties": {
            "service": {"type": "string", "description": "unit name", "pattern": "^[a-z0-9@._-]+$"}
        },
        "required": ["service"],
        "additionalProperties": False,
    }
    assert (health.category, health.parallel) == (ToolCategory.READ_ONLY, True)


def test_the_example_catalog_in_the_repository_loads_next_to_the_built_ins(tmp_path: Path) -> None:
    registry = build_registry(
        ToolsConfig(tools_file=ROOT / "examples" / "tools.yaml", log_dirs=(tmp_path,), env={})
    )
    for name in ("restart_service", "check_health", "journal_errors", "scale_deployment", "drain_node"):
        assert name in registry
    assert registry["drain_node"].category is ToolCategory.DESTRUCTIVE
    assert "disk_usage" in registry


def assert_problem(path: Path, text: str, *fragments: str) -> str:
    with pytest.raises(CatalogError) as caught:
        load_catalog(write(path, text), env={})
    message = str(caught.value)
    assert str(path / "tools.yaml") in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_an_unknown_category_names_file_tool_and_field(tmp_path: Path) -> None:
    assert_problem(
        tmp_path,
        """
        tools:
          - name: nuke
            description: x
            category: dangerous
            run: ["true"]
        """,
        "tool 'nuke', field 'category'",
        "Input should be 'read_only', 'mutating' or 'destructive'",
    )


def test_a_bad_pattern_names_the_parameter(tmp_path: Path) -> None:
    assert_problem(
        tmp_path,
        """
        tools:
          - name: restart
            description: x
            category: mutating
            params:
              service: {type: string, pattern: "^[a-z+$"}
            run: ["systemctl", "restart", "{service}"]
        """,
        "tool 'restart', field 'params.service.pattern': not a valid regular expression",
    )


def test_a_placeholder_without_a_parameter_names_the_argv_element(tmp_path: Path) -> None:
    assert_problem(
        tmp_path,
        """
        tools:
          - name: restart
            description: x
            category: mutating
            params:
              service: {type: string}
            run: ["systemctl", "restart", "{unit}"]
        """,
        "tool 'restart', field 'run[2]': {unit} is not a declared parameter (declared: service)",
    )


def test_an_unknown_key_is_named_with_a_suggestion(tmp_path: Path) -> None:
    assert_problem(
        tmp_path,
        """
        tools:
          - name: restart
            description: x
            category: mutating
            params:
              service: {type: string, patern: "^[a-z]+$"}
            run: ["systemctl", "restart", "{service}"]
            timeout_seconds: 10
        """,
        "tool 'restart', field 'params.service.patern': unknown key 'patern' (did you mean 'pattern'?)",
        "tool 'restart', field 'timeout_seconds': unknown key",
    )


def test_bad_yaml_names_the_line_the_tool_and_the_field(tmp_path: Path) -> None:
    assert_problem(
        tmp_path,
        """
        tools:
          - name: restart
            description: x
            category: mutating
            run: ["systemctl", "restart", "{service}"
          - name: other
        """,
        "invalid YAML at line",
        "tool 'restart', field 'run'",
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "category: destructive\n    run: [rm, x]",
            "tool 't', field 'dry_run': a destructive tool needs a dry_run",
        ),
        ("category: mutating\n    parallel: true\n    run: [x]", "field 'parallel': only read_only tools"),
        ("category: read_only\n    run: [x]\n    dry_run: [y]", "field 'dry_run': only destructive tools"),
        ("category: read_only", "field 'run': give exactly one of run (an argv list) or http"),
        ("category: read_only\n    run: []", "field 'run': List should have at least 1 item"),
        (
            "category: read_only\n    params: {prog: {type: string}}\n    run: ['{prog}']",
            "field 'run[0]': the program must be fixed text",
        ),
        (
            "category: read_only\n    run: [logger, '{confirmed_by}']",
            "{confirmed_by} is only set for approved calls",
        ),
        (
            "category: mutating\n    params: {confirmed_by: {type: string}}\n    run: [x]",
            "field 'params.confirmed_by': confirmed_by is reserved",
        ),
        (
            "category: read_only\n    params: {n: {type: integer, pattern: '^1$'}}\n    run: [x]",
            "field 'params.n.pattern': pattern is only for string parameters",
        ),
        (
            "category: read_only\n    params: {n: {type: integer, minimum: 5, maximum: 1}}\n    run: [x]",
            "field 'params.n.minimum': minimum is greater than maximum",
        ),
        (
            "category: read_only\n    params: {n: {type: integer, default: many}}\n    run: [x]",
            "field 'params.n.default'",
        ),
        (
            "category: read_only\n    params: {s: {type: string, enum: [a, 1]}}\n    run: [x]",
            "field 'params.s.enum': 1 is not a string",
        ),
        ("category: read_only\n    run: [x, '{a.__class__}']", "field 'run[1]': placeholder {a.__class__}"),
        ("category: read_only\n    run: [x, '{']", "field 'run[1]': bad template"),
        ("category: read_only\n    http: {url: 'ftp://x/{a}'}", "field 'http.url'"),
        (
            "category: read_only\n    http: {url: 'http://x', headers: {Authorization: 'Bearer ${NO_SUCH_VAR}'}}",
            "field 'http.headers.Authorization': environment variable NO_SUCH_VAR is not set",
        ),
        (
            "category: read_only\n    timeout: 0\n    run: [x]",
            "field 'timeout': Input should be greater than 0",
        ),
    ],
)
def test_each_rule_names_its_field(tmp_path: Path, body: str, expected: str) -> None:
    assert_problem(tmp_path, f"tools:\n  - name: t\n    description: d\n    {body}\n", expected)


def test_every_problem_is_reported_and_no_tool_loads(tmp_path: Path) -> None:
    text = """
    tools:
      - name: good
        description: fine
        category: read_only
        run: ["uptime"]
      - name: bad_one
        description: x
        category: sometimes
        run: ["x"]
      - name: bad_two
        description: x
        category: read_only
        run: ["x", "{missing}"]
    """
    message = assert_problem(
        tmp_path, text, "tool 'bad_one', field 'category'", "tool 'bad_two', field 'run[1]'"
    )
    assert "'good'" not in message
    config = ToolsConfig(tools_file=tmp_path / "tools.yaml", log_dirs=(tmp_path,), env={})
    with pytest.raises(CatalogError):
        build_registry(config)


def test_duplicate_names_in_the_catalog_are_an_error(tmp_path: Path) -> None:
    assert_problem(
        tmp_path,
        """
        tools:
          - {name: twice, description: a, category: read_only, run: [x]}
          - {name: twice, description: b, category: read_only, run: [y]}
        """,
        "tool 'twice', field 'name': tool #2 has the same name as tool #1",
    )


def test_a_clash_with_a_built_in_names_both_unless_override_is_set(tmp_path: Path) -> None:
    path = write(
        tmp_path, "tools:\n  - {name: disk_usage, description: df, category: read_only, run: [df, -h]}\n"
    )
    config = ToolsConfig(tools_file=path, log_dirs=(tmp_path,), env={})
    with pytest.raises(CatalogError) as caught:
        build_registry(config)
    assert "catalog tool 'disk_usage' (" in str(caught.value)
    assert "clashes with the built-in tool 'disk_usage'" in str(caught.value)
    assert "override: true" in str(caught.value)

    path.write_text(
        "tools:\n  - {name: disk_usage, description: df, category: read_only, run: [df, -h], override: true}\n"
    )
    registry = build_registry(config)
    assert registry["disk_usage"].definition.description == "df"


def test_override_without_a_built_in_of_that_name_is_an_error(tmp_path: Path) -> None:
    assert_problem(
        tmp_path,
        "tools:\n  - {name: mine, description: d, category: read_only, run: [x], override: true}\n",
        "tool 'mine', field 'override': there is no built-in tool named 'mine'",
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the file is empty"),
        ("- just a list\n", "the top level must be a mapping"),
        ("tools: {name: x}\n", "field 'tools': must be a list"),
        ("tools: []\nextra: 1\n", "field 'extra': unknown top-level key"),
        ("tools:\n  - just a string\n", "tool #1: must be a mapping"),
    ],
)
def test_the_file_shape_is_checked(tmp_path: Path, text: str, expected: str) -> None:
    assert_problem(tmp_path, text, expected)


def test_a_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="cannot read the file"):
        load_catalog(tmp_path / "absent.yaml", env={})
