"""``FunctionTool``: a Python function with a pydantic argument model, shaped as ``agent.tooling.Tool``.

The function receives its validated arguments and a ``ToolContext`` (effective timeout, deadline,
and the approver's Slack user ID for approved calls) and returns text or a ``ToolResult``::

    class DiskArgs(BaseModel):
        path: str | None = None

    @tool(category=ToolCategory.READ_ONLY, parallel=True, timeout=10, placement=HOST)
    def disk_usage(args: DiskArgs, ctx: ToolContext) -> str:
        \"\"\"Disk usage per mount.\"\"\"

The JSON schema the model sees is derived from the argument model; ``confirmed_by`` is never in
it, but is accepted in the arguments of mutating and destructive calls (the loop writes it there
after a person approved). Without it such a call is refused: approval cannot be skipped.

A tool whose calls differ in risk by their arguments gives a ``categorize`` function: it sees the
validated arguments and may raise one call above the tool's category (a read-only network check
of a host the egress policy does not list becomes a mutating call). ``category_for`` answers the
loop with it, and ``execute`` holds the call to the same answer: a raised call without
``confirmed_by`` is refused, and an approved one runs with ``ToolContext.escalated`` set.

Where a tool runs is declared with it (``placement=``, ``tools.placement``): ``HOST`` for a tool
that reads or changes the machine it runs on, ``WORKER`` for one that touches none. The registry
refuses a tool without one.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from agent.arguments import CONFIRMED_BY as CONFIRMED_BY  # re-exported: the catalog fills it in
from agent.arguments import checked_arguments
from agent.errors import ArgumentsRejected
from agent.tooling import APPROVAL_GRANT, APPROVED_PLAN, CallCategory, ToolCategory, ToolResult
from agent.types import ToolDef
from agent.verification import Verification
from tools.errors import ToolArgumentError, ToolCallError, ToolConfigError
from tools.placement import Placement

if TYPE_CHECKING:
    from tools.verification import Declared

log = logging.getLogger(__name__)

# A Slack user ID in practice; kept strict because catalog commands may put it into argv.
_CONFIRMED_BY_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
_TOOL_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")

ArgsT = TypeVar("ArgsT", bound=BaseModel)
ToolFunction = Callable[[ArgsT, "ToolContext"], "str | ToolResult"]
CommandFunction = Callable[[ArgsT], "str | None"]
"""The exact command or request a call would execute, built by the code path that executes it."""
CategorizeFunction = Callable[[ArgsT], CallCategory | None]
"""One call's category when its arguments raise it above the tool's (``None``: the tool's own)."""


@dataclass(frozen=True)
class ToolContext:
    """What a tool function knows about its call besides the arguments."""

    timeout: float
    """The most this call may take, in seconds (the smaller of the tool's and the loop's)."""
    deadline: float
    """``time.monotonic()`` value after which the call should stop and report what it has."""
    confirmed_by: str | None = None
    """The Slack user ID that approved this call (mutating and destructive tools only)."""
    plan: str | None = None
    """The plan of the dry run the approver saw (approved destructive calls only): do exactly it."""
    escalated: bool = False
    """A person approved this call because its arguments raised it above the tool's category
    (``categorize``): the approval covers what raised it (for a network check, reaching exactly
    the unlisted destination the card named), for this one execution."""

    @classmethod
    def starting_now(
        cls,
        timeout: float,
        confirmed_by: str | None = None,
        plan: str | None = None,
        *,
        escalated: bool = False,
    ) -> ToolContext:
        return cls(
            timeout=timeout,
            deadline=time.monotonic() + timeout,
            confirmed_by=confirmed_by,
            plan=plan,
            escalated=escalated,
        )

    def remaining(self) -> float:
        """Seconds left before the deadline (never negative)."""
        return max(0.0, self.deadline - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline


def error_result(message: str) -> ToolResult:
    """A failed result in the form the model expects: ``Error: ...``."""
    return ToolResult(output=f"Error: {message}", is_error=True)


class FunctionTool(Generic[ArgsT]):
    """A ``Tool`` made of a function and its pydantic argument model."""

    def __init__(
        self,
        func: ToolFunction[ArgsT],
        args_model: type[ArgsT],
        *,
        name: str | None = None,
        description: str | None = None,
        category: ToolCategory = ToolCategory.READ_ONLY,
        parallel: bool = False,
        timeout: float = 30.0,
        preview: ToolFunction[ArgsT] | None = None,
        parameters: dict[str, Any] | None = None,
        command: CommandFunction[ArgsT] | None = None,
        categorize: CategorizeFunction[ArgsT] | None = None,
        enforces_timeout: bool = False,
        placement: Placement | None = None,
        verification: Declared | None = None,
    ) -> None:
        self.name = name or func.__name__
        if not _TOOL_NAME_RE.fullmatch(self.name):
            raise ToolConfigError(f"tool name {self.name!r} must be 1-64 letters, digits, '_' or '-'")
        if parallel and category is not ToolCategory.READ_ONLY:
            raise ToolConfigError(f"tool {self.name}: only read_only tools may run in parallel")
        if category is ToolCategory.DESTRUCTIVE and preview is None:
            raise ToolConfigError(f"tool {self.name}: a destructive tool needs a dry run (preview)")
        if preview is not None and category is not ToolCategory.DESTRUCTIVE:
            raise ToolConfigError(f"tool {self.name}: only destructive tools have a dry run")
        if timeout <= 0:
            raise ToolConfigError(f"tool {self.name}: timeout must be positive")
        self._func = func
        self._preview = preview
        self._command = command
        self._categorize = categorize
        self._args_model = args_model
        self._category = category
        self._parallel = parallel
        self._timeout = float(timeout)
        self._enforces_timeout = enforces_timeout
        self._placement = placement
        self._declared = verification
        text = description if description is not None else _docstring_summary(func)
        if not text:
            raise ToolConfigError(f"tool {self.name}: a description (or docstring) is required")
        schema = parameters if parameters is not None else model_schema(args_model)
        self._definition = ToolDef(name=self.name, description=text, parameters=schema)

    @property
    def definition(self) -> ToolDef:
        return self._definition

    @property
    def category(self) -> ToolCategory:
        return self._category

    @property
    def parallel(self) -> bool:
        return self._parallel

    @property
    def timeout(self) -> float:
        return self._timeout

    @property
    def enforces_timeout(self) -> bool:
        """Said by whoever builds it: ``func`` returns by its timeout (a command run through
        ``tools.process``, killed with its process group at the deadline). The loop then runs it
        on its own thread (``agent.tooling.enforces_own_timeout``)."""
        return self._enforces_timeout

    @property
    def placement(self) -> Placement | None:
        """Where it runs (``tools.placement``), as whoever defines it declares; ``None``: undeclared,
        which the registry refuses."""
        return self._placement

    @property
    def declared(self) -> Declared | None:
        """Its declared check, before-read and undo (``tools.verification``), if any."""
        return self._declared

    def verification_of(self, arguments: str) -> Verification | None:
        """The check, before-read and undo of this call (``agent.tooling.call_verification``);
        ``None`` without a declaration or for arguments that do not validate."""
        if self._declared is None:
            return None
        try:
            args, _, _ = self._parse(arguments)
        except ToolCallError:
            return None
        return self._declared.derive(args.model_dump())

    def category_for(self, arguments: str) -> CallCategory:
        """This call's category (``agent.tooling.call_category``): the tool's, unless ``categorize``
        raises it. Arguments that do not validate get the tool's own: the call fails on them anyway."""
        try:
            args, _, _ = self._parse(arguments)
        except ToolCallError:
            return CallCategory(self._category)
        return self._call_category(args)

    def _call_category(self, args: ArgsT) -> CallCategory:
        if self._categorize is None:
            return CallCategory(self._category)
        try:
            found = self._categorize(args)
        except Exception:
            # The tool's own checks still hold at execution (the egress policy refuses an unlisted
            # host); a broken categorizer only means nobody is asked to open anything.
            log.exception("tool %s: categorizing a call failed", self.name)
            return CallCategory(self._category)
        if found is None or found.category.rank <= self._category.rank:
            return CallCategory(self._category)
        return found

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        """Validate the arguments and run the tool; every failure is an ``Error: ...`` result."""
        try:
            args, confirmed_by, plan = self._parse(arguments)
        except ToolCallError as exc:
            return error_result(str(exc))
        category = self._call_category(args).category  # what the loop's gate was told
        if category is not ToolCategory.DESTRUCTIVE:
            plan = None  # only a destructive call's approval carries a plan
        if not category.requires_confirmation:
            confirmed_by = None  # nobody approves a read-only call; ignore a value the model made up
        elif confirmed_by is None:
            what = (
                "changes the system" if category is self._category else "needs approval for these arguments"
            )
            return error_result(
                f"{self.name} {what} and runs only after a person approves it (no confirmed_by in the arguments)"
            )
        escalated = confirmed_by is not None and category is not self._category
        ctx = ToolContext.starting_now(
            self._effective_timeout(timeout), confirmed_by, plan, escalated=escalated
        )
        result = self._call(self._func, args, ctx)
        if confirmed_by is not None:
            # The note is decoration: loop detection keeps hashing what the tool itself returned.
            result = dataclasses.replace(
                result,
                output=f"{result.output}\n(approved by {confirmed_by})",
                stable_output=result.output if result.stable_output is None else result.stable_output,
            )
        return result

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        """The dry run of a destructive call, shown to the approver; ``None`` for other tools."""
        if self._preview is None:
            return None
        try:
            args, _, _ = self._parse(arguments)
        except ToolCallError as exc:
            return error_result(str(exc))
        ctx = ToolContext.starting_now(self._effective_timeout(timeout))
        return self._call(self._preview, args, ctx)

    def describe(self, arguments: str) -> str | None:
        """The exact command or request ``execute(arguments)`` would run, for the approval card.

        ``None`` when the tool cannot say (no ``command`` given) or the arguments are invalid (the
        call will fail with that error; there is nothing to describe).
        """
        if self._command is None:
            return None
        try:
            args, _, _ = self._parse(arguments)
            return self._command(args) or None
        except ToolCallError:
            return None
        except Exception:  # a bug in a describer must not kill the run: the card shows the arguments
            log.exception("tool %s: describing a call failed", self.name)
            return None

    def _effective_timeout(self, timeout: float) -> float:
        return max(0.001, min(self._timeout, timeout))

    def _parse(self, arguments: str) -> tuple[ArgsT, str | None, str | None]:
        payload = _load_arguments(arguments)
        confirmed_by = _pop_confirmed_by(payload)
        plan = payload.pop(APPROVED_PLAN, None)
        # The grant is for a runner or a route that checks it (``bot.fleet``); a tool the worker
        # runs itself after the approval has nothing to check it against, and never takes it.
        payload.pop(APPROVAL_GRANT, None)
        if plan is not None and not isinstance(plan, str):
            raise ToolArgumentError(f"{APPROVED_PLAN} must be the dry run's plan")
        try:
            return self._args_model.model_validate(payload), confirmed_by, plan
        except ValidationError as exc:
            raise ToolArgumentError(
                f"invalid arguments for {self.name}: {describe_validation_error(exc)}"
            ) from exc

    def _call(self, func: ToolFunction[ArgsT], args: ArgsT, ctx: ToolContext) -> ToolResult:
        try:
            result = func(args, ctx)
        except ToolCallError as exc:
            return error_result(str(exc))
        except OSError as exc:
            # Permission denied, no such file...: the model can act on these, so say them plainly.
            return error_result(f"{self.name}: {_describe_os_error(exc)}")
        except Exception as exc:  # a bug in a tool must not kill the run; the loop would say the same
            log.exception("tool %s failed", self.name)
            return error_result(f"{self.name} failed unexpectedly: {type(exc).__name__}: {exc}")
        return result if isinstance(result, ToolResult) else ToolResult(output=result)


def tool(
    *,
    category: ToolCategory = ToolCategory.READ_ONLY,
    parallel: bool = False,
    timeout: float = 30.0,
    name: str | None = None,
    description: str | None = None,
    preview: ToolFunction[Any] | None = None,
    categorize: CategorizeFunction[Any] | None = None,
    placement: Placement | None = None,
) -> Callable[[ToolFunction[Any]], FunctionTool[Any]]:
    """Decorator: turn ``func(args: SomeModel, ctx: ToolContext)`` into a ``FunctionTool``.

    The argument model is read from the annotation of the first parameter.
    """

    def wrap(func: ToolFunction[Any]) -> FunctionTool[Any]:
        return FunctionTool(
            func,
            args_model_of(func),
            name=name,
            description=description,
            category=category,
            parallel=parallel,
            timeout=timeout,
            preview=preview,
            categorize=categorize,
            placement=placement,
        )

    return wrap


def args_model_of(func: Callable[..., Any]) -> type[BaseModel]:
    """The pydantic model annotated on the first parameter of ``func``."""
    hints = typing.get_type_hints(func)
    hints.pop("return", None)
    first = next(iter(hints.values()), None)
    if not (isinstance(first, type) and issubclass(first, BaseModel)):
        raise ToolConfigError(f"{func.__name__}: the first parameter must be annotated with a pydantic model")
    return first


def model_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of an argument model, trimmed to what a model needs to call the tool."""
    raw = model.model_json_schema()
    if "$defs" in raw:
        raise ToolConfigError(f"{model.__name__}: nested models are not supported in tool arguments")
    schema = _clean_schema(raw)
    schema["additionalProperties"] = False
    schema.setdefault("properties", {})
    return schema


def _clean_schema(node: dict[str, Any]) -> dict[str, Any]:
    """Drop titles and collapse ``Optional[X]`` (``anyOf: [X, null]``) into ``X``."""
    cleaned: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" or (key == "default" and value is None):
            continue
        if key == "properties":
            cleaned[key] = {prop: _clean_schema(sub) for prop, sub in value.items()}
        elif key == "items" and isinstance(value, dict):
            cleaned[key] = _clean_schema(value)
        else:
            cleaned[key] = value
    options = cleaned.get("anyOf")
    if isinstance(options, list):
        non_null = [option for option in options if option != {"type": "null"}]
        if len(non_null) == 1:
            del cleaned["anyOf"]
            cleaned = {**_clean_schema(non_null[0]), **cleaned}
    return cleaned


def _load_arguments(arguments: str) -> dict[str, Any]:
    """The arguments object, within ``agent.arguments``' limits: a tool called directly is bounded too.

    Read through the parse cache: one call's text is read by ``category_for``, ``describe`` and
    ``execute`` (and its wrappers' checks) and parsed once."""
    try:
        return checked_arguments(arguments, (APPROVED_PLAN,))
    except ArgumentsRejected as exc:
        raise ToolArgumentError(str(exc)) from exc


def _pop_confirmed_by(payload: dict[str, Any]) -> str | None:
    value = payload.pop(CONFIRMED_BY, None)
    if value is None:
        return None
    if not isinstance(value, str) or not _CONFIRMED_BY_RE.fullmatch(value):
        raise ToolArgumentError("confirmed_by must be the approver's Slack user ID")
    return value


def describe_validation_error(exc: ValidationError) -> str:
    """One line per bad field, e.g. ``lines: Input should be less than or equal to 1000``."""
    parts = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"]) or "(arguments)"
        if error["type"] == "extra_forbidden":
            message = "unknown argument"
        elif error["type"] == "missing":
            message = "required argument is missing"
        else:
            message = error["msg"]
        parts.append(f"{field}: {message}")
    return "; ".join(parts)


def _describe_os_error(exc: OSError) -> str:
    text = exc.strerror or str(exc)
    return f"{text}: {exc.filename}" if exc.filename else text


def _docstring_summary(func: Callable[..., Any]) -> str:
    """The first paragraph of the docstring, on one line."""
    doc = (func.__doc__ or "").strip()
    return " ".join(doc.split("\n\n", 1)[0].split())
