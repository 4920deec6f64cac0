"""Loading chatops' inventory format: good files load; every mistake names file, target and field."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from tools.errors import InventoryError, ToolConfigError
from tools.inventory import Inventory, KubeTarget, SshDefaults, load_inventory
from tools.ssh import SshConfig

# The format exactly as the issue publishes it.
ISSUE_EXAMPLE = """\
targets:
  - name: web-03
    via: runner                 # runner | ssh | kubernetes | local
    labels: {env: prod, role: web, team: payments}
  - name: db-01
    via: ssh
    ssh: {host: 10.0.0.5, port: 22, user: chatops, key_file: /etc/chatops/id_ed25519, known_hosts: /etc/chatops/known_hosts}
    labels: {env: prod, role: db}
  - name: staging
    via: kubernetes
    kubernetes: {context: staging, namespace: default}
    labels: {env: staging}
"""

DEFAULTS = SshDefaults(user="chatops", key_file=Path("/keys/id"), known_hosts=Path("/keys/known_hosts"))


def write(tmp_path: Path, text: str, name: str = "inventory.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def problems_of(path: Path, *, ssh_defaults: SshDefaults | None = None) -> str:
    with pytest.raises(InventoryError) as caught:
        load_inventory(path, ssh_defaults=ssh_defaults)
    return str(caught.value)


def test_the_issue_example_loads_every_target_sorted_by_name(tmp_path: Path) -> None:
    inventory = load_inventory(write(tmp_path, ISSUE_EXAMPLE))

    assert not inventory.implicit
    assert inventory.names() == ("db-01", "staging", "web-03")
    db, staging, web = inventory
    assert (web.via, dict(web.labels)) == ("runner", {"env": "prod", "role": "web", "team": "payments"})
    assert db.ssh == SshConfig(
        host="10.0.0.5",
        user="chatops",
        key_file=Path("/etc/chatops/id_ed25519"),
        known_hosts=Path("/etc/chatops/known_hosts"),
        port=22,
    )
    assert staging.kubernetes == KubeTarget(context="staging", namespace="default")
    assert (web.ssh, web.kubernetes, staging.ssh, db.kubernetes) == (None, None, None, None)


def test_targets_describe_themselves_and_say_whether_they_are_production(tmp_path: Path) -> None:
    inventory = load_inventory(write(tmp_path, ISSUE_EXAMPLE))
    web, staging = inventory.get("web-03"), inventory.get("staging")
    assert web is not None and staging is not None
    assert web.describe() == "web-03 (env=prod, role=web, team=payments)"
    assert (web.production, staging.production) == (True, False)


def test_a_loaded_targets_labels_cannot_be_changed(tmp_path: Path) -> None:
    target = load_inventory(write(tmp_path, ISSUE_EXAMPLE)).get("web-03")
    assert target is not None
    with pytest.raises(TypeError):
        target.labels["env"] = "staging"  # type: ignore[index]
    assert target.production


def test_without_a_file_there_is_one_implicit_local_target() -> None:
    inventory = load_inventory(None)
    assert inventory.implicit
    assert [(target.name, target.via) for target in inventory] == [("local", "local")]
    assert inventory.select("local") == list(inventory)
    assert inventory == Inventory.implicit_local()


def test_numbers_and_booleans_in_labels_become_text(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        targets:
          - {name: web-1, via: runner, labels: {tier: 3, canary: true, ratio: 0.5, quoted: "007"}}
        """,
    )
    target = load_inventory(path).get("web-1")
    assert target is not None
    assert dict(target.labels) == {"tier": "3", "canary": "true", "ratio": "0.5", "quoted": "007"}


def test_ssh_defaults_fill_what_an_ssh_block_leaves_out(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        targets:
          - {name: db-01, via: ssh, ssh: {host: db.internal}}
          - {name: db-02, via: ssh, ssh: {host: 10.0.0.6, port: 2222, user: ops, key_file: /k/ops}}
        """,
    )
    inventory = load_inventory(path, ssh_defaults=DEFAULTS)
    db1, db2 = inventory
    assert db1.ssh == SshConfig("db.internal", "chatops", Path("/keys/id"), Path("/keys/known_hosts"), 22)
    assert db2.ssh == SshConfig("10.0.0.6", "ops", Path("/k/ops"), Path("/keys/known_hosts"), 2222)


def test_an_ssh_target_without_user_or_key_and_no_defaults_names_each_missing_field(tmp_path: Path) -> None:
    path = write(tmp_path, "targets: [{name: db-01, via: ssh, ssh: {host: db.internal}}]\n")
    message = problems_of(path)
    for field, setting in [
        ("ssh.user", "CHATOPS_SSH_USER"),
        ("ssh.key_file", "CHATOPS_SSH_KEY_FILE"),
        ("ssh.known_hosts", "CHATOPS_SSH_KNOWN_HOSTS"),
    ]:
        assert f"{path}: target db-01: {field}: not set, and no default ({setting})" in message


def test_a_hostile_default_user_from_the_settings_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "targets: [{name: db-01, via: ssh, ssh: {host: db.internal}}]\n")
    hostile = SshDefaults(user="-oProxyCommand=touch /tmp/pwned", key_file=Path("/k"), known_hosts=Path("/h"))
    assert "target db-01: ssh.user: the default user" in problems_of(path, ssh_defaults=hostile)


TARGET_MISTAKES = [
    pytest.param(
        "- {name: web-03, via: runner, lables: {env: prod}}",
        "target web-03: lables: unknown key (did you mean 'labels'?)",
        id="typo-in-a-field",
    ),
    pytest.param(
        "- {name: db-01, via: ssh, labels: {env: prod}}",
        "target db-01: ssh: required when via is ssh",
        id="no-ssh",
    ),
    pytest.param(
        "- {name: db-01, via: ssh, ssh: {host: a, port: 70000}}",
        "target db-01: ssh.port: Input should be less than or equal to 65535",
        id="port-too-big",
    ),
    pytest.param(
        "- {name: db-01, via: ssh, ssh: {host: a, port: 0}}",
        "target db-01: ssh.port: Input should be greater than or equal to 1",
        id="port-zero",
    ),
    pytest.param(
        "- {name: db-01, via: ssh, ssh: {host: a, port: '22'}}",
        "target db-01: ssh.port: Input should be a valid integer",
        id="port-as-text",
    ),
    pytest.param(
        "- {name: db-01, via: ssh, ssh: {host: a, port: true}}",
        "target db-01: ssh.port: Input should be a valid integer",
        id="port-as-bool",
    ),
    pytest.param(
        "- {name: db-01, via: ssh, ssh: {host: a, prot: 22}}",
        "target db-01: ssh.prot: unknown key (did you mean 'port'?)",
        id="typo-in-ssh",
    ),
    pytest.param(
        "- {name: db-01, via: shh, ssh: {host: a}}",
        "target db-01: via: Input should be 'runner', 'ssh', 'kubernetes' or 'local' (did you mean 'ssh'?)",
        id="via-typo",
    ),
    pytest.param("- {name: web-03}", "target web-03: via: required key is missing", id="no-via"),
    pytest.param(
        "- {name: Web-03, via: runner}",
        "target Web-03: name: 'Web-03' must be 1-63 lowercase letters",
        id="uppercase-name",
    ),
    pytest.param(
        "- {name: web 03, via: runner}", "target 'web 03': name: 'web 03' must be 1-63", id="name-with-space"
    ),
    pytest.param(
        "- {name: 'web-*', via: runner}", "target 'web-*': name: 'web-*' must be", id="name-with-star"
    ),
    pytest.param("- {name: '-web', via: runner}", "target -web: name: '-web' must be", id="leading-dash"),
    pytest.param(f"- {{name: {'a' * 64}, via: runner}}", f"target {'a' * 64}: name:", id="name-too-long"),
    pytest.param(
        "- {name: 3, via: runner}",
        "target targets[0] (line 2): name: Input should be a valid string",
        id="name-a-number",
    ),
    pytest.param(
        "- {name: web-03, via: runner, labels: {env: {region: eu}}}",
        "target web-03: labels.env: must be a single value (text, number or true/false), not a list or mapping",
        id="nested-label-value",
    ),
    pytest.param(
        "- {name: web-03, via: runner, labels: {roles: [web, db]}}",
        "target web-03: labels.roles: must be a single value",
        id="list-label-value",
    ),
    pytest.param(
        "- {name: web-03, via: runner, labels: {env: }}",
        "target web-03: labels.env: is empty: give a value",
        id="empty-label-value",
    ),
    pytest.param(
        "- {name: web-03, via: runner, labels: {'bad key': x}}",
        "target web-03: labels.'bad key': the label key 'bad key' must be",
        id="label-key-with-space",
    ),
    pytest.param(
        "- {name: web-03, via: runner, labels: {env: 'prod; rm -rf /'}}",
        "target web-03: labels.env: 'prod; rm -rf /' must be",
        id="label-value-with-metacharacters",
    ),
    pytest.param(
        "- {name: web-03, via: runner, ssh: {host: a}}",
        "target web-03: ssh: only allowed with via: ssh (this target is via: runner)",
        id="ssh-on-a-runner",
    ),
    pytest.param(
        "- {name: db-01, via: ssh, ssh: {host: a}, kubernetes: {namespace: x}}",
        "target db-01: kubernetes: only allowed with via: kubernetes (this target is via: ssh)",
        id="kubernetes-on-ssh",
    ),
    pytest.param(
        "- {name: k8s, via: kubernetes}",
        "target k8s: kubernetes: required when via is kubernetes",
        id="no-kube",
    ),
    pytest.param(
        "- {name: k8s, via: kubernetes, kubernetes: {namespace: Default}}",
        "target k8s: kubernetes.namespace: 'Default' must be a namespace",
        id="bad-namespace",
    ),
    pytest.param(
        "- {name: db-01, via: ssh, ssh: {host: a, key_file: id_ed25519}}",
        "target db-01: ssh.key_file: must be an absolute path",
        id="relative-key-file",
    ),
    pytest.param(
        "- {name: db-01, via: ssh, ssh: {host: a, known_hosts: ../known_hosts}}",
        "target db-01: ssh.known_hosts: must be an absolute path",
        id="relative-known-hosts",
    ),
    pytest.param(
        "- {name: db-01, via: ssh, ssh: {host: '-oProxyCommand=touch /tmp/pwned'}}",
        "target db-01: ssh.host: '-oProxyCommand=touch /tmp/pwned' must be a host name or IP address",
        id="host-is-an-option",
    ),
    pytest.param(
        "- {name: db-01, via: ssh, ssh: {host: 'db; rm -rf /'}}",
        "target db-01: ssh.host: 'db; rm -rf /' must be a host name",
        id="host-with-metacharacters",
    ),
    pytest.param(
        "- {name: db-01, via: ssh, ssh: {host: a, user: '$(id)'}}",
        "target db-01: ssh.user: '$(id)' must be a user name",
        id="user-with-metacharacters",
    ),
    pytest.param("- just-a-name", "target targets[0] (line 2): must be a mapping", id="target-not-a-mapping"),
    pytest.param(
        "- {via: runner}", "target targets[0] (line 2): name: required key is missing", id="no-name"
    ),
]


@pytest.mark.parametrize(("targets", "expected"), TARGET_MISTAKES)
def test_each_mistake_names_the_file_the_target_and_the_field(
    tmp_path: Path, targets: str, expected: str
) -> None:
    path = write(tmp_path, "targets:\n" + textwrap.indent(targets, "  ") + "\n")
    assert f"{path}: {expected}" in problems_of(path, ssh_defaults=DEFAULTS)


def test_a_name_with_a_newline_cannot_forge_a_line_of_the_error(tmp_path: Path) -> None:
    path = write(tmp_path, 'targets:\n  - {name: "web\\n  - all good", via: runner}\n')
    message = problems_of(path)
    assert "target 'web\\n  - all good': name:" in message
    assert all(line.startswith(("the inventory", f"  - {path}: ")) for line in message.splitlines())


def test_every_problem_of_the_file_is_listed_at_once(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        targets:
          - name: web-03
            via: runner
            lables: {env: prod}
          - name: db-01
            via: ssh
            ssh: {host: 10.0.0.5, port: 70000}
          - via: local
        """,
    )
    with pytest.raises(InventoryError) as caught:
        load_inventory(path, ssh_defaults=DEFAULTS)
    assert isinstance(caught.value, ToolConfigError)
    assert caught.value.problems == [
        "target web-03: lables: unknown key (did you mean 'labels'?)",
        "target db-01: ssh.port: Input should be less than or equal to 65535",
        "target targets[2] (line 9): name: required key is missing",
    ]


def test_a_duplicate_name_names_both_entries(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        targets:
          - {name: web-03, via: runner}
          - {name: db-01, via: runner}
          - {name: web-03, via: local}
        """,
    )
    assert (
        f"{path}: target web-03: name: used by more than one target "
        "(targets[0] (line 3) and targets[2] (line 5))"
    ) in problems_of(path)


def test_at_most_one_target_is_local(tmp_path: Path) -> None:
    path = write(tmp_path, "targets: [{name: here, via: local}, {name: there, via: local}]\n")
    assert "target there: via: at most one target may be via: local (found here, there)" in problems_of(path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "no targets: the file is empty"),
        ("# only a comment\n", "no targets: the file is empty"),
        ("targets: []\n", "no targets: 'targets:' is empty"),
        ("targets:\n", "no targets: 'targets:' is empty"),
        ("targets: {name: web}\n", "targets: must be a list of targets"),
        ("- name: web-03\n  via: runner\n", "the top level must be a mapping with a 'targets:' list"),
        ("[1, 2]\n", "the top level must be a mapping"),
        ("targts:\n  - name: web-03\n", "unknown format: expected a top-level 'targets:' list"),
        ("targets: [{name: a, via: local}]\nextra: 1\n", "extra: unknown top-level key (only 'targets')"),
        (
            "plugin: amazon.aws.aws_ec2\nregions: [eu-west-1]\n",
            "'plugin:' names an Ansible inventory plugin: dynamic",
        ),
    ],
)
def test_a_file_of_the_wrong_shape_says_what_was_expected(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    assert f"{path}: {expected}" in problems_of(path)


def test_a_misspelt_top_level_key_gets_a_suggestion(tmp_path: Path) -> None:
    assert "(did you mean 'targets'?)" in problems_of(write(tmp_path, "targts:\n  - name: web-03\n"))


def test_a_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        targets:
          - name: web-03
            via: runner
            labels: {env: prod, role: web
          - name: db-01
        """,
    )
    message = problems_of(path)
    assert f"{path}: invalid YAML at line 5" in message
    assert "(in what opens at line 4)" in message


def test_deeply_nested_yaml_is_an_error_not_a_crash(tmp_path: Path) -> None:
    path = write(tmp_path, "targets: " + "[" * 5000 + "]" * 5000 + "\n")
    assert f"{path}: " in problems_of(path)


@pytest.mark.parametrize(
    ("prepare", "expected"),
    [
        (lambda path: path.mkdir(), "is a directory"),
        (lambda path: None, "cannot read the file: No such file or directory"),
        (lambda path: path.write_bytes(b"targets: \xff\xfe\n"), "is not UTF-8 text"),
        (
            lambda path: path.write_text("#!/usr/bin/env python3\nprint('{}')\n"),
            "starts with '#!', a script: dynamic",
        ),
        (lambda path: path.write_bytes(b"#" * (4 * 1024 * 1024 + 1)), "is larger than 4 MiB"),
    ],
    ids=["directory", "missing", "not-utf8", "shebang", "too-large"],
)
def test_a_file_that_cannot_be_an_inventory_is_refused_before_parsing(
    tmp_path: Path, prepare: object, expected: str
) -> None:
    path = tmp_path / "inventory"
    prepare(path)  # type: ignore[operator]
    assert f"{path}: {expected}" in problems_of(path)


def test_a_device_or_fifo_is_refused_instead_of_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "inventory.fifo"
    os.mkfifo(fifo)
    assert f"{fifo}: is not a regular file" in problems_of(fifo)
    assert "/dev/zero: is not a regular file" in problems_of(Path("/dev/zero"))


def test_an_executable_file_is_refused_as_a_dynamic_inventory_script(tmp_path: Path) -> None:
    path = write(tmp_path, "targets: [{name: a, via: local}]\n", name="inventory.py")
    path.chmod(0o755)
    assert f"{path}: is executable: dynamic inventories (plugins, scripts) are not supported" in problems_of(
        path
    )


def test_a_target_names_the_paths_its_runner_watches(tmp_path: Path) -> None:
    inventory = load_inventory(
        write(
            tmp_path,
            """\
            targets:
              - name: web-03
                via: runner
                watch: [/etc/nginx, /etc/myapp/config.yaml]
            """,
        )
    )
    assert inventory.targets[0].watch == (Path("/etc/nginx"), Path("/etc/myapp/config.yaml"))


@pytest.mark.parametrize(
    ("watch", "expected"),
    [
        ("[etc/nginx]", "target web-03: watch.0: must be an absolute path without '..'"),
        ("[/etc/../root/.ssh]", "target web-03: watch.0: must be an absolute path without '..'"),
        ("/etc/nginx", "watch: Input should be a valid list"),
        (f"[{', '.join(f'/etc/f{n}' for n in range(65))}]", "watch: List should have at most 64 items"),
    ],
)
def test_a_bad_watch_list_is_refused_naming_the_field(tmp_path: Path, watch: str, expected: str) -> None:
    path = write(tmp_path, f"targets:\n  - name: web-03\n    via: runner\n    watch: {watch}\n")
    assert expected in problems_of(path)


def test_a_misspelt_watch_key_is_still_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "targets:\n  - name: web-03\n    via: runner\n    wacth: [/etc/nginx]\n")
    assert "target web-03: wacth: unknown key (did you mean 'watch'?)" in problems_of(path)
