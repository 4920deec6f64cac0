"""``${NAME}`` references: found, and replaced in one pass by their values (never expanded twice)."""

from __future__ import annotations

import pytest

from tools.catalog.templates import expand_env_in_template, placeholders
from tools.env_references import env_references, expand_env


def test_references_are_found_and_replaced_and_nothing_else_is_interpreted() -> None:
    text = "Bearer ${TOKEN} $TOKEN ${not-a-name} ${TOKEN}"
    assert env_references(text) == ["TOKEN", "TOKEN"]
    assert expand_env(text, {"TOKEN": "t0k"}) == "Bearer t0k $TOKEN ${not-a-name} t0k"
    with pytest.raises(KeyError):
        expand_env("${UNSET}", {})


def test_a_value_that_looks_like_a_reference_is_never_expanded_again() -> None:
    # The operator's environment is not a template: ${SECRET} inside a value stays text.
    env = {"USER_NAME": "${SECRET}", "SECRET": "hunter2"}
    assert expand_env("${USER_NAME}:${SECRET}", env) == "${SECRET}:hunter2"


def test_in_a_catalog_template_a_value_never_becomes_a_parameter() -> None:
    expanded = expand_env_in_template("Bearer ${TOKEN} {service}", {"TOKEN": "{service}"})
    assert placeholders(expanded) == ["service"]  # the value's braces are escaped
