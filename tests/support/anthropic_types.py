"""Checks against the official ``anthropic`` package's own types, strictly.

* ``check_request(body)``: a ``POST /v1/messages`` body against ``MessageCreateParams`` (the
  SDK's ``TypedDict``s, walked here with no unknown key allowed anywhere: the SDK itself would
  send anything, the API would not accept it);
* ``check_message(data)`` / ``check_event(data)``: an answer against ``anthropic.types.Message``
  and a stream event against ``RawMessageStreamEvent`` (plus ``ping`` and ``ErrorResponse``),
  with no field the SDK does not define.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin

import typing_extensions
from anthropic.types import ErrorResponse, Message, RawMessageStreamEvent
from anthropic.types.message_create_params import (
    MessageCreateParamsNonStreaming,
    MessageCreateParamsStreaming,
)
from pydantic import BaseModel, TypeAdapter

_EVENT = TypeAdapter(RawMessageStreamEvent)


class TypeMismatch(AssertionError):
    pass


def check_request(body: Mapping[str, Any]) -> None:
    """Raise ``TypeMismatch`` unless ``body`` is a valid ``MessageCreateParams``."""
    params = MessageCreateParamsStreaming if body.get("stream") else MessageCreateParamsNonStreaming
    _check(body, params, "body")


def check_message(data: Any) -> Message:
    message = Message.model_validate(data)
    _no_extras(message, "message")
    return message


def check_event(data: Mapping[str, Any]) -> None:
    if data.get("type") == "ping":
        assert dict(data) == {"type": "ping"}, data
        return
    if data.get("type") == "error":
        _no_extras(ErrorResponse.model_validate(data), "error")
        return
    event = _EVENT.validate_python(data)
    assert isinstance(event, BaseModel)
    _no_extras(event, str(data.get("type")))


def _no_extras(model: BaseModel, where: str) -> None:
    extra = model.model_extra or {}
    if extra:
        raise TypeMismatch(f"{where}: fields the SDK does not define: {sorted(extra)}")
    for name in type(model).model_fields:
        _no_extras_in(getattr(model, name), f"{where}.{name}")


def _no_extras_in(value: Any, where: str) -> None:
    if isinstance(value, BaseModel):
        _no_extras(value, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _no_extras_in(item, f"{where}[{index}]")


# --- a strict walk over the SDK's TypedDicts ---------------------------------------------------


def _check(value: Any, expected: Any, where: str) -> None:
    errors = _errors(value, expected, where)
    if errors:
        raise TypeMismatch("; ".join(errors[:5]))


def _errors(value: Any, expected: Any, where: str) -> list[str]:
    origin = get_origin(expected)
    if expected is Any or expected is object:
        return []
    if origin in (typing.Annotated, typing_extensions.Annotated):
        return _errors(value, get_args(expected)[0], where)
    if origin in (
        typing.Required,
        typing.NotRequired,
        typing_extensions.Required,
        typing_extensions.NotRequired,
    ):
        return _errors(value, get_args(expected)[0], where)
    if origin is Union or origin is types.UnionType:
        options = get_args(expected)
        found = [_errors(value, option, where) for option in options]
        if any(not errors for errors in found):
            return []
        return min(found, key=len)
    if origin in (Literal, typing_extensions.Literal):
        return (
            [] if value in get_args(expected) else [f"{where}: {value!r} is not one of {get_args(expected)}"]
        )
    if expected is type(None):
        return [] if value is None else [f"{where}: expected null"]
    if typing_extensions.is_typeddict(expected):
        return _typeddict_errors(value, expected, where)
    if origin in (list, Iterable, Sequence) or expected in (list,):
        if not isinstance(value, list):
            return [f"{where}: expected a list, got {type(value).__name__}"]
        (item,) = get_args(expected) or (Any,)
        return [
            error
            for index, element in enumerate(value)
            for error in _errors(element, item, f"{where}[{index}]")
        ]
    if origin in (dict, Mapping) or expected is dict:
        return [] if isinstance(value, dict) else [f"{where}: expected an object"]
    if isinstance(expected, type) and getattr(expected, "__name__", "") == "SequenceNotStr":
        return [] if isinstance(value, list) else [f"{where}: expected a list"]
    if origin is not None and getattr(origin, "__name__", "") == "SequenceNotStr":
        (item,) = get_args(expected)
        if not isinstance(value, list):
            return [f"{where}: expected a list"]
        return [
            error
            for index, element in enumerate(value)
            for error in _errors(element, item, f"{where}[{index}]")
        ]
    if expected is bool:
        return [] if isinstance(value, bool) else [f"{where}: expected a boolean"]
    if expected is int:
        return (
            []
            if isinstance(value, int) and not isinstance(value, bool)
            else [f"{where}: expected an integer"]
        )
    if expected is float:
        return (
            []
            if isinstance(value, int | float) and not isinstance(value, bool)
            else [f"{where}: expected a number"]
        )
    if expected is str:
        return [] if isinstance(value, str) else [f"{where}: expected a string"]
    if isinstance(expected, type) and issubclass(expected, BaseModel):
        return [f"{where}: an SDK response model is not a request field"]
    return [f"{where}: cannot check against {expected!r}"]


def _required(expected: Any, hints: dict[str, Any]) -> list[str]:
    """The required keys: marked ``Required`` in the annotations, or required by their class's
    totality and not marked ``NotRequired`` (``__required_keys__`` alone misses ``Required`` when
    the SDK's modules use postponed annotations)."""
    required = []
    for key, annotation in hints.items():
        origin = get_origin(annotation)
        marked = origin in (typing.Required, typing_extensions.Required)
        by_totality = (
            origin not in (typing.NotRequired, typing_extensions.NotRequired)
            and key in expected.__required_keys__
        )
        if marked or by_totality:
            required.append(key)
    return required


def _typeddict_errors(value: Any, expected: Any, where: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{where}: expected an object ({expected.__name__})"]
    hints = typing_extensions.get_type_hints(expected, include_extras=True)
    errors = [f"{where}.{key}: not a field of {expected.__name__}" for key in value if key not in hints]
    errors += [
        f"{where}.{key}: required by {expected.__name__}"
        for key in _required(expected, hints)
        if key not in value
    ]
    for key, item in value.items():
        if key in hints:
            errors += _errors(item, hints[key], f"{where}.{key}")
    return errors
