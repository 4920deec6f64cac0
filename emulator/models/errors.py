"""The scripted models' errors."""

from __future__ import annotations


class ScenarioError(ValueError):
    """The scenario file is not valid; the message names the file and the place."""
