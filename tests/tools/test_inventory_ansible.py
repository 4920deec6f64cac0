"""Ansible inventories (YAML and INI) as targets: groups, children, vars, ranges, defaults, refusals."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tools.errors import InventoryError
from tools.inventory import Inventory, KubeTarget, SshDefaults, Target, load_inventory
from tools.inventory_ansible import MAX_HOSTS_PER_PATTERN, expand_host_pattern
from tools.ssh import SshConfig

DEFAULTS = SshDefaults(user="chatops", key_file=Path("/keys/id"), known_hosts=Path("/keys/known_hosts"))

ANSIBLE_YAML = """\
all:
  vars:
    env: staging
    team: platform
  hosts:
    bastion.example.com:
  children:
    webservers:
      hosts:
        web[01:03].example.com:
          ansible_user: deploy
      vars:
        role: web
    dbservers:
      hosts:
        DB-01:
          ansible_host: 10.0.0.5
          ansible_port: 2222
          ansible_ssh_private_key_file: /etc/chatops/db_key
          role: db
        k8s-eu:
          chatops_via: kubernetes
          chatops_kubernetes_context: prod-eu
          chatops_kubernetes_namespace: shop
    prod:
      children:
        webservers:
        dbservers:
      vars:
        env: prod
    runners:
      hosts:
        build-01: {chatops_via: runner}
        controller: {ansible_connection: local}
"""

ANSIBLE_INI = """\
# hosts before any section are ungrouped
bastion ansible_host=192.0.2.1

[webservers]
web[1:2] ansible_user=deploy   # inline comments are comments
legacy.example.com:2200

[dbservers]
db-01 ansible_host=10.0.0.5 role=db team="data"

[prod:children]
webservers
dbservers

[prod:vars]
env = prod

[all:vars]
env=staging
team=platform
"""


def write(tmp_path: Path, text: str, name: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def load(tmp_path: Path, text: str, name: str = "hosts.yaml", defaults: SshDefaults = DEFAULTS) -> Inventory:
    return load_inventory(write(tmp_path, text, name), ssh_defaults=defaults)


def problems_of(tmp_path: Path, text: str, name: str = "hosts.yaml", defaults: SshDefaults = DEFAULTS) -> str:
    path = write(tmp_path, text, name)
    with pytest.raises(InventoryError) as caught:
        load_inventory(path, ssh_defaults=defaults)
    return str(caught.value).replace(str(path), "FILE")


def target(inventory: Inventory, name: str) -> Target:
    found = inventory.get(name)
    assert found is not None, f"{name} not in {inventory.names()}"
    return found


def test_an_ansible_yaml_inventory_becomes_targets(tmp_path: Path) -> None:
    inventory = load(tmp_path, ANSIBLE_YAML)
    assert inventory.names() == (
        "bastion.example.com",
        "build-01",
        "controller",
        "db-01",
        "k8s-eu",
        "web01.example.com",
        "web02.example.com",
        "web03.example.com",
    )
    db = target(inventory, "db-01")  # the inventory hostname, lowercased
    assert db.ssh == SshConfig(
        "10.0.0.5", "chatops", Path("/etc/chatops/db_key"), Path("/keys/known_hosts"), 2222
    )
    web = target(inventory, "web02.example.com")
    assert web.ssh == SshConfig(
        "web02.example.com", "deploy", Path("/keys/id"), Path("/keys/known_hosts"), 22
    )
    assert target(inventory, "k8s-eu").kubernetes == KubeTarget(context="prod-eu", namespace="shop")
    assert (target(inventory, "build-01").via, target(inventory, "controller").via) == ("runner", "local")


def test_groups_become_labels_and_vars_follow_ansible_precedence(tmp_path: Path) -> None:
    inventory = load(tmp_path, ANSIBLE_YAML)
    # all < prod (a parent) < webservers (its child) < host vars
    assert dict(target(inventory, "web01.example.com").labels) == {
        "webservers": "true",
        "prod": "true",
        "env": "prod",
        "role": "web",
        "team": "platform",
    }
    assert dict(target(inventory, "db-01").labels) == {
        "dbservers": "true",
        "prod": "true",
        "env": "prod",
        "role": "db",
        "team": "platform",
    }
    assert dict(target(inventory, "bastion.example.com").labels) == {"env": "staging", "team": "platform"}
    assert target(inventory, "db-01").production and not target(inventory, "bastion.example.com").production
    assert [t.name for t in inventory.select("webservers=true,env=prod")] == [
        "web01.example.com",
        "web02.example.com",
        "web03.example.com",
    ]


def test_an_ansible_ini_inventory_becomes_the_same_kind_of_targets(tmp_path: Path) -> None:
    inventory = load(tmp_path, ANSIBLE_INI, "hosts.ini")
    assert inventory.names() == ("bastion", "db-01", "legacy.example.com", "web1", "web2")
    assert target(inventory, "bastion").ssh == SshConfig(
        "192.0.2.1", "chatops", Path("/keys/id"), Path("/keys/known_hosts")
    )
    assert target(inventory, "legacy.example.com").ssh.port == 2200  # type: ignore[union-attr]
    assert target(inventory, "web1").ssh.user == "deploy"  # type: ignore[union-attr]
    assert dict(target(inventory, "web1").labels) == {
        "webservers": "true",
        "prod": "true",
        "env": "prod",
        "team": "platform",
    }
    assert dict(target(inventory, "db-01").labels) == {
        "dbservers": "true",
        "prod": "true",
        "env": "prod",
        "role": "db",
        "team": "data",
    }
    assert dict(target(inventory, "bastion").labels) == {"env": "staging", "team": "platform"}


def test_a_host_in_several_groups_is_one_target_with_every_group(tmp_path: Path) -> None:
    text = """\
    [web]
    shared ansible_user=a
    [cache]
    shared ansible_port=2201
    """
    shared = target(load(tmp_path, text, "hosts.ini"), "shared")
    assert dict(shared.labels) == {"cache": "true", "web": "true"}
    assert (shared.ssh.user, shared.ssh.port) == ("a", 2201)  # type: ignore[union-attr]


def test_non_scalar_label_vars_are_ordinary_ansible_vars_and_ignored(tmp_path: Path) -> None:
    text = "all:\n  hosts:\n    web1: {role: [web, cache], env: prod, ansible_python_interpreter: /usr/bin/python3}\n"
    assert dict(target(load(tmp_path, text), "web1").labels) == {"env": "prod"}


def test_without_ansible_user_or_a_default_the_error_names_the_host_and_the_variable(tmp_path: Path) -> None:
    no_user = SshDefaults(key_file=Path("/keys/id"), known_hosts=Path("/keys/known_hosts"))
    message = problems_of(tmp_path, "[web]\nweb1\nweb2 ansible_user=deploy\n", "hosts.ini", no_user)
    assert "FILE: host web1 (line 2): ansible_user: not set, and no default (CHATOPS_SSH_USER)" in message
    assert "web2" not in message


def test_without_any_ssh_defaults_every_missing_setting_is_named(tmp_path: Path) -> None:
    message = problems_of(tmp_path, "all:\n  hosts:\n    web1:\n", defaults=SshDefaults())
    assert "FILE: host web1: ansible_user: not set" in message
    assert "FILE: host web1: ansible_ssh_private_key_file: not set" in message
    assert "FILE: host web1: known_hosts: not set, and no default (CHATOPS_SSH_KNOWN_HOSTS)" in message


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        (
            "all:\n  hosts:\n    'web 01':\n",
            "hosts.yaml",
            "host 'web 01': inventory hostname: 'web 01' must be",
        ),
        ("all:\n  hosts:\n    'web*':\n", "hosts.yaml", "host 'web*': inventory hostname: 'web*' must be"),
        (
            "[web]\nweb1 ansible_port=70000\n",
            "hosts.ini",
            "host web1 (line 2): ansible_port: Input should be less",
        ),
        (
            "[web]\nweb1 ansible_port=ssh\n",
            "hosts.ini",
            "host web1 (line 2): ansible_port: Input should be a valid",
        ),
        (
            "[web]\nweb1 ansible_host='x; rm -rf /'\n",
            "hosts.ini",
            "host web1 (line 2): ansible_host: 'x; rm -rf /' must be a host name",
        ),
        (
            "[web]\nweb1 ansible_user=-oProxyCommand=id\n",
            "hosts.ini",
            "host web1 (line 2): ansible_user: '-oProxyCommand=id' must be a user name",
        ),
        (
            "[web]\nweb1 ansible_ssh_private_key_file=keys/id\n",
            "hosts.ini",
            "host web1 (line 2): ansible_ssh_private_key_file: must be an absolute path",
        ),
        (
            "[web]\nweb1 chatops_via=shh\n",
            "hosts.ini",
            "host web1 (line 2): chatops_via: Input should be 'runner', 'ssh', 'kubernetes' or 'local' "
            "(did you mean 'ssh'?)",
        ),
        (
            "[web]\nweb1 env='prod eu'\n",
            "hosts.ini",
            "host web1 (line 2): labels.env: 'prod eu' must be",
        ),
        (
            "[web]\nweb1 ansible_host='{{ inventory_hostname }}.example.com'\n",
            "hosts.ini",
            "host web1: ansible_host: Jinja templates are not supported",
        ),
        (
            "[web]\nweb1 ansible_port=\u00b2\n",
            "hosts.ini",
            "host web1 (line 2): ansible_port: Input should be a valid",
        ),
        (
            "[web]\nweb1 ansible_port=99999999999999999999\n",
            "hosts.ini",
            "host web1 (line 2): ansible_port: Input should be a valid",
        ),
        ("[web]\nweb1:99999\n", "hosts.ini", "host web1 (line 2): ansible_port: Input should be less than"),
        (
            "[web]\nWeb1\nweb1\n",
            "hosts.ini",
            "target web1: name: used by more than one target (host Web1 (line 2)",
        ),
        (
            "[a]\nhere ansible_connection=local\n[b]\nthere ansible_connection=local\n",
            "hosts.ini",
            "target there: via: at most one target may be via: local (found here, there)",
        ),
    ],
)
def test_a_bad_host_names_the_file_the_host_and_the_ansible_variable(
    tmp_path: Path, text: str, name: str, expected: str
) -> None:
    assert f"FILE: {expected}" in problems_of(tmp_path, text, name)


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("[web:hostvars]\nenv=prod\n", "hosts.ini", "line 1: unknown section [web:hostvars]"),
        ("[web:vars]\njust-a-word\n", "hosts.ini", "line 2: [web:vars] lines are key=value"),
        ("[web]\nweb1 ansible_user\n", "hosts.ini", "line 2: host web1: 'ansible_user' is not key=value"),
        ("[web]\nweb1 team='unclosed\n", "hosts.ini", "line 2: cannot split the line: No closing quotation"),
        (
            "[web]\nweb[\u0661:\u0663]\n",  # Arabic-Indic digits: str.isdigit says yes, we say no
            "hosts.ini",
            "line 2: host pattern 'web[\u0661:\u0663]': [\u0661:\u0663] is not a numeric or alphabetic range",
        ),
        (
            "[web]\nweb[1:100000]\n",
            "hosts.ini",
            f"line 2: host pattern 'web[1:100000]': the range must go up and hold at most {MAX_HOSTS_PER_PATTERN} hosts",
        ),
        ("all:\n  children:\n    web: [a, b]\n", "hosts.yaml", "group web: must be a mapping with hosts:"),
        ("all:\n  children:\n    web:\n      host: {a: }\n", "hosts.yaml", "group web: unknown key 'host'"),
        (
            "all:\n  children:\n    web:\n      hosts: [a, b]\n",
            "hosts.yaml",
            "group web: hosts: must be a mapping",
        ),
        (
            "all:\n  hosts:\n    web1: just-text\n",
            "hosts.yaml",
            "group all: host web1: its variables must be",
        ),
    ],
)
def test_a_malformed_ansible_file_says_where(tmp_path: Path, text: str, name: str, expected: str) -> None:
    assert f"FILE: {expected}" in problems_of(tmp_path, text, name)


def test_a_children_cycle_is_an_error_not_a_hang(tmp_path: Path) -> None:
    text = "[a:children]\nb\n[b:children]\na\n[a]\nweb1\n"
    assert "form a cycle" in problems_of(tmp_path, text, "hosts.ini")


def test_a_self_referencing_yaml_group_is_an_error_not_a_hang(tmp_path: Path) -> None:
    text = "all:\n  children:\n    loop: &loop\n      hosts: {web1: }\n      children: {inner: *loop}\n"
    assert "nested more than" in problems_of(tmp_path, text)


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("plugin: amazon.aws.aws_ec2\n", "aws_ec2.yaml", "'plugin:' names an Ansible inventory plugin"),
        ("#!/bin/sh\necho '{}'\n", "hosts.sh", "a script: dynamic inventories (plugins, scripts) are not"),
    ],
)
def test_dynamic_inventories_are_refused_saying_so(
    tmp_path: Path, text: str, name: str, expected: str
) -> None:
    message = problems_of(tmp_path, text, name)
    assert expected in message
    assert "ansible-inventory --list --yaml" in message  # how to get a static one


def test_an_executable_inventory_is_refused_even_when_it_reads_as_ini(tmp_path: Path) -> None:
    path = write(tmp_path, "[web]\nweb1\n", "hosts")
    path.chmod(0o700)
    with pytest.raises(InventoryError, match="is executable: dynamic inventories"):
        load_inventory(path, ssh_defaults=DEFAULTS)


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("web[01:03].example.com", ["web01.example.com", "web02.example.com", "web03.example.com"]),
        ("web[8:10]", ["web8", "web9", "web10"]),
        ("web[098:100]", ["web098", "web099", "web100"]),
        ("node[0:10:5]", ["node0", "node5", "node10"]),
        ("db-[a:c]", ["db-a", "db-b", "db-c"]),
        ("r[1:2]n[1:2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
        ("plain.example.com", ["plain.example.com"]),
    ],
)
def test_host_ranges_expand_and_keep_zero_padding(pattern: str, expected: list[str]) -> None:
    assert expand_host_pattern(pattern) == expected


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("web[3:1]", "the range must go up"),
        ("web[1:100000]", f"hold at most {MAX_HOSTS_PER_PATTERN} hosts"),
        ("web[01:100]", "START and END of the same length"),
        ("web[a:10]", "is not a numeric or alphabetic range"),
        ("web[1:3:0]", "must be a positive whole number"),
        ("web[1:3:-1]", "must be a positive whole number"),
        ("web[1-3]", "a range is written [START:END]"),
        ("r[1:100]n[1:100]", f"more than {MAX_HOSTS_PER_PATTERN} hosts"),
    ],
)
def test_a_bad_or_huge_range_is_refused(pattern: str, expected: str) -> None:
    with pytest.raises(ValueError, match=expected.replace("[", r"\[")):
        expand_host_pattern(pattern)


def test_a_range_in_an_ini_file_names_the_line(tmp_path: Path) -> None:
    message = problems_of(tmp_path, "[web]\nweb[3:1]\n", "hosts.ini")
    assert "FILE: line 2: host pattern 'web[3:1]': the range must go up" in message


def test_a_one_line_ini_inventory_and_its_comment_styles_are_read(tmp_path: Path) -> None:
    inventory = load(tmp_path, "; a semicolon comment\nlocalhost ansible_connection=local\n", "hosts")
    assert [(t.name, t.via) for t in inventory] == [("localhost", "local")]


def test_an_ini_file_with_groups_but_no_hosts_has_no_targets(tmp_path: Path) -> None:
    assert "FILE: no targets" in problems_of(tmp_path, "[web]\n[db:vars]\nenv=prod\n", "hosts.ini")


def test_a_variable_named_like_a_group_wins_over_the_group_label(tmp_path: Path) -> None:
    text = "[env]\nweb1 env=prod\n"
    assert dict(target(load(tmp_path, text, "hosts.ini"), "web1").labels) == {"env": "prod"}


def test_chatops_watch_names_the_paths_a_hosts_runner_watches(tmp_path: Path) -> None:
    inventory = load(
        tmp_path, "all:\n  hosts:\n    web1: {chatops_via: runner, chatops_watch: [/etc/nginx]}\n"
    )
    assert target(inventory, "web1").watch == (Path("/etc/nginx"),)
