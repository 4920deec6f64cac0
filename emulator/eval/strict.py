"""The base of every part of a scenario file: frozen, and strict about keys.

A key the format does not know is refused with the keys it does know, so a typo (``servcies:``)
stops the load at its place instead of leaving a host without its services.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator


class Strict(BaseModel):
    """A part of a scenario file: unknown keys are errors that list the known ones."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            allowed = sorted(field.alias or name for name, field in cls.model_fields.items())
            unknown = sorted(str(key) for key in data if key not in allowed)
            if unknown:
                raise ValueError(f"unknown key {unknown[0]!r}; fix: use one of {', '.join(allowed)}")
        return data
