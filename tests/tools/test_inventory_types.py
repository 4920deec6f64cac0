"""Targets, selectors and the inventory as a collection: what a caller holding them can rely on."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.errors import InventoryError, TargetSelectorError, ToolArgumentError
from tools.inventory import Inventory, KubeTarget, Selector, Target, parse_selector
from tools.ssh import SshConfig

SSH = SshConfig(host="10.0.0.5", user="chatops", key_file=Path("/k"), known_hosts=Path("/h"))


def fleet() -> Inventory:
    return Inventory(
        targets=(
            Target("web-03", "runner", {"env": "prod", "role": "web", "team": "payments"}),
            Target("web-01", "runner", {"env": "prod", "role": "web"}),
            Target("db-01", "ssh", {"env": "prod", "role": "db"}, ssh=SSH),
            Target("staging", "kubernetes", {"env": "staging", "role": "web"}, kubernetes=KubeTarget("stg")),
        )
    )


def names(targets: list[Target]) -> list[str]:
    return [target.name for target in targets]


def test_the_inventory_is_sorted_by_name_and_found_by_name() -> None:
    inventory = fleet()
    assert inventory.names() == ("db-01", "staging", "web-01", "web-03")
    assert len(inventory) == 4
    assert [target.name for target in inventory] == list(inventory.names())
    assert inventory.get("db-01") is not None and inventory.get("db-01").ssh == SSH  # type: ignore[union-attr]
    assert inventory.get("web-04") is None


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("web-03", ["web-03"]),
        ("  WEB-03 ", ["web-03"]),  # typed in Slack: names are lowercase, any case finds them
        ("env=prod", ["db-01", "web-01", "web-03"]),
        ("env=prod,role=web", ["web-01", "web-03"]),
        (" env = prod , role = web ", ["web-01", "web-03"]),
        ("role=web,team=payments", ["web-03"]),
        ("env=prod,env=prod", ["db-01", "web-01", "web-03"]),
        ("env=Prod", []),  # label values are exact
        ("env=prod,role=cache", []),
        ("web-04", []),
    ],
)
def test_a_selector_picks_a_name_or_the_targets_carrying_every_label(
    selector: str, expected: list[str]
) -> None:
    assert names(fleet().select(selector)) == expected


def test_a_parsed_selector_can_be_reused_and_printed() -> None:
    selector = parse_selector("env=prod,role=web")
    assert selector == Selector(labels={"env": "prod", "role": "web"})
    assert str(selector) == "env=prod,role=web"
    assert names(fleet().select(selector)) == ["web-01", "web-03"]
    assert parse_selector("db-01") == Selector(name="db-01")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the target is empty"),
        ("   ", "the target is empty"),
        ("*", "'*' is not a target name"),
        ("web 03", "'web 03' is not a target name"),
        ("web-03; rm -rf /", "is not a target name"),
        ("$(reboot)", "is not a target name"),
        ("env=", "'env=' is not a label key=value"),
        ("=prod", "'=prod' is not a label key=value"),
        ("env=prod,", "'' is not a label key=value"),
        ("env=prod;rm -rf /", "is not a label key=value"),
        ("env=prod,role", "'role' is not a label key=value"),
        ("env==prod", "is not a label key=value"),
        ("env=prod,env=staging", "label 'env' is given twice with different values"),
        ("x" * 600, "longer than 512 characters"),
    ],
)
def test_a_malformed_selector_is_an_error_the_model_can_read(text: str, expected: str) -> None:
    with pytest.raises(TargetSelectorError) as caught:
        parse_selector(text)
    assert isinstance(caught.value, ToolArgumentError)  # shown to the model as an Error: result
    assert expected in str(caught.value)


def test_a_selector_that_would_match_everything_cannot_be_built() -> None:
    with pytest.raises(TargetSelectorError):
        Selector()
    with pytest.raises(TargetSelectorError):
        Selector(name="web-03", labels={"env": "prod"})


def test_describe_lists_the_labels_sorted_and_a_bare_name_without_labels() -> None:
    assert (
        Target("web-03", "runner", {"role": "web", "env": "prod"}).describe() == "web-03 (env=prod, role=web)"
    )
    assert Target("local", "local").describe() == "local"


@pytest.mark.parametrize(
    ("env", "production"), [("prod", True), ("production", True), ("prod-eu", False), ("staging", False)]
)
def test_production_is_env_prod_or_production(env: str, production: bool) -> None:
    assert Target("web-03", "runner", {"env": env}).production is production
    assert Target("web-04", "runner").production is False


def test_labels_are_a_read_only_copy() -> None:
    given = {"env": "staging"}
    target = Target("web-03", "runner", given)
    given["env"] = "prod"
    assert target.labels["env"] == "staging"
    with pytest.raises(TypeError):
        target.labels["env"] = "prod"  # type: ignore[index]
    assert hash(target) == hash(Target("web-03", "runner", {"env": "staging"}))


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda: Target("Web 03", "runner"), "name: 'Web 03' must be"),
        (lambda: Target("web-03", "shh"), "via: 'shh' is not one of"),  # type: ignore[arg-type]
        (lambda: Target("web-03", "runner", {"env": "prod\nforged"}), "labels: 'prod\\nforged' must be"),
        (lambda: Target("db-01", "ssh"), "ssh: required when via is ssh"),
        (lambda: Target("web-03", "runner", ssh=SSH), "ssh: only allowed with via: ssh"),
        (lambda: Target("k8s", "kubernetes"), "kubernetes: required when via is kubernetes"),
    ],
)
def test_a_target_built_in_code_obeys_the_files_rules(build: object, expected: str) -> None:
    with pytest.raises(InventoryError) as caught:
        build()  # type: ignore[operator]
    assert expected in str(caught.value)


def test_an_inventory_built_in_code_refuses_two_targets_with_one_name() -> None:
    with pytest.raises(InventoryError, match="two targets share a name"):
        Inventory(targets=(Target("web-03", "runner"), Target("web-03", "local")))


def test_a_target_built_in_code_obeys_the_watch_rules() -> None:
    assert Target("web-03", "runner", watch=(Path("/etc/nginx"),)).watch == (Path("/etc/nginx"),)
    for watch in [(Path("etc/nginx"),), (Path("/etc/../root"),), tuple(Path(f"/f{n}") for n in range(65))]:
        with pytest.raises(InventoryError, match="watch: must be a list of at most 64 absolute paths"):
            Target("web-03", "runner", watch=watch)
