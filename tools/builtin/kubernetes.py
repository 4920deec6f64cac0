"""Kubernetes tools for one inventory target: pods, events, logs, rollout status and scale.

``kubernetes_tools(env, namespace, context)`` builds them for one ``via: kubernetes`` target; the
router registers them per target, next to ``service_status`` / ``service_restart`` on the same
``KubernetesBackend`` (``service_restart`` is the rollout restart, so it is not repeated here).

* ``kube_pods``: ``kubectl get pods -o json`` as one row per pod (ready, phase, restarts, age,
  node, why a container waits or died: ``CrashLoopBackOff``, ``OOMKilled``), failing pods first so
  a list cut at ``limit`` still shows them; optionally by label selector;
* ``kube_events``: ``kubectl get events -o json``, warnings first, each newest first, one line each;
* ``kube_logs``: ``kubectl logs`` of a pod or ``deployment/NAME`` (tail, container, previous, since);
* ``kube_rollout_status``: ``services.describe_workload`` (what ``service_status`` says), then
  ``kubectl rollout status --watch=false``;
* ``kube_scale`` (mutating, the rest read-only): ``kubectl scale`` of a deployment or statefulset;
  the approval card shows the exact argv, and the call reports the status after.

Why a model may hold these: it chooses neither namespace nor context (every argv starts with the
target's ``KubernetesBackend.kubectl_argv``); argv lists run by ``tools.process``, never a shell;
names are DNS-1123 (lower case, no leading ``-``: never read as a flag); label selectors match a
strict grammar; each value is its own argument or follows ``=`` in ``--flag=value``. Bad arguments
are refused before kubectl runs.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent.tooling import ToolCategory, ToolResult
from tools.base import FunctionTool, ToolContext, ToolFunction, error_result
from tools.builtin.kubernetes_reports import MAX_MESSAGE_CHARS, events_report, json_items, pods_report
from tools.builtin.services import KUBE_WORKLOAD_KINDS, KubernetesBackend, describe_workload, kube_resource
from tools.errors import ToolCallError
from tools.placement import Placement
from tools.text import shorten
from tools.verification import Before, Check, Declared, Undo

Clock = Callable[[], datetime]

_NAME = r"[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?"  # DNS-1123 subdomain: pods, workloads
_KIND_NAME_PATTERN = rf"^(?:[A-Za-z]{{1,40}}/)?{_NAME}$"
_OBJECT_PATTERN = rf"^[A-Za-z]{{1,40}}/{_NAME}$"
_CONTAINER_PATTERN = r"^[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?$"  # DNS-1123 label
# Go durations as kubectl reads them, in whole hours, minutes and seconds: 10m, 1h30m (never 0 or -1h).
_SINCE_PATTERN = r"^(?:[1-9][0-9]{0,4}[hms]){1,3}$"

# Label selectors: ``key``, ``!key``, ``key=value``, ``key==value``, ``key!=value``,
# ``key in (a,b)``, ``key notin (a,b)``, comma-separated. Exactly one space around ``in``/``notin``
# and none elsewhere: anything looser is refused rather than guessed at.
_LABEL_KEY = r"(?:[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?"
_REQUIREMENT = (
    rf"!?{_LABEL_KEY}|{_LABEL_KEY}(?:==?|!=){_LABEL_VALUE}"
    rf"|{_LABEL_KEY} (?:in|notin) \({_LABEL_VALUE}(?:,{_LABEL_VALUE})*\)"
)
_SELECTOR_RE = re.compile(rf"(?:{_REQUIREMENT})(?:,(?:{_REQUIREMENT}))*")

# Every kind a call may name, spelt as events name it, with kubectl's other names for it (the
# workloads' short names are services.py's table).
_KIND_NAMES: dict[str, tuple[str, ...]] = {
    "Deployment": (),
    "StatefulSet": (),
    "DaemonSet": (),
    "Pod": ("pods", "po"),
    "ReplicaSet": ("rs",),
    "Job": ("jobs",),
    "CronJob": ("cj",),
    "Service": ("svc",),
    "Node": ("no",),
    "PersistentVolumeClaim": ("pvc",),
    "HorizontalPodAutoscaler": ("hpa",),
    "Ingress": ("ing",),
}
_KINDS = {
    **{alias: kind.lower() for kind, aliases in _KIND_NAMES.items() for alias in (kind.lower(), *aliases)},
    **KUBE_WORKLOAD_KINDS,
}
_EVENT_KINDS = {kind.lower(): kind for kind in _KIND_NAMES}
_LOG_KINDS = ("pod", "deployment", "statefulset", "daemonset", "job")
_SCALE_KINDS = ("deployment", "statefulset")
# A namespace's pods or events as JSON run to several KiB each: far beyond tools.process's 1 MiB.
_MAX_LIST_BYTES = 64 * 1024 * 1024
_MAX_LOG_LINE_CHARS = 1000
# Offered only by a Kubernetes target, built with its context and namespace (``bot.ops.fleet``).
KUBERNETES = Placement.target("kubernetes")
_WHERE_NOTE = "The namespace and context are the target's (chosen by the target, not an argument)."


class PodsArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    selector: str | None = Field(
        default=None,
        max_length=300,
        description="A label selector, comma-separated: app=web, tier!=db, env in (prod,staging), !canary.",
    )
    limit: int = Field(default=50, ge=1, le=200, description="At most this many pods (failing first).")

    @field_validator("selector")
    @classmethod
    def _strict_selector(cls, value: str | None) -> str | None:
        if value is not None and not _SELECTOR_RE.fullmatch(value):
            raise ValueError(
                "not a label selector: use key=value, key!=value, key in (a,b), key notin (a,b), key or "
                "!key, comma-separated, with no other spaces"
            )
        return value


class EventsArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    object: str | None = Field(
        default=None, pattern=_OBJECT_PATTERN, description="Only events about KIND/NAME, e.g. pod/web-1."
    )
    warnings_only: bool = Field(default=False, description="Only Warning events.")
    limit: int = Field(default=50, ge=1, le=200, description="At most this many events.")


class LogsArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pod: str = Field(
        pattern=_KIND_NAME_PATTERN,
        description="A pod name, or KIND/NAME (deployment/web) for one pod of that workload.",
    )
    container: str | None = Field(
        default=None, pattern=_CONTAINER_PATTERN, description="The container (default: the pod's default)."
    )
    tail: int = Field(default=200, ge=1, le=2000, description="How many of the last lines.")
    previous: bool = Field(default=False, description="The previous (crashed) instance of the container.")
    since: str | None = Field(
        default=None, pattern=_SINCE_PATTERN, description="Only lines newer than this: 30s, 10m, 2h, 1h30m."
    )


class WorkloadArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workload: str = Field(
        pattern=_KIND_NAME_PATTERN, description="NAME (a deployment) or KIND/NAME: statefulset/db, ds/agent."
    )


class ScaleArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workload: str = Field(
        pattern=_KIND_NAME_PATTERN, description="NAME (a deployment), deployment/NAME or statefulset/NAME."
    )
    replicas: int = Field(ge=0, le=1000, description="The number of replicas to run.")


def kubernetes_tools(
    env: Mapping[str, str], namespace: str, context: str | None, *, clock: Clock | None = None
) -> list[FunctionTool[Any]]:
    """The ``kube_*`` tools for one target's namespace and context (``clock``: the time ages are
    counted to; tests inject one). Raises ``ToolConfigError`` for a namespace or context kubectl
    could misread."""
    backend = KubernetesBackend(env, namespace, context)
    now: Clock = clock or (lambda: datetime.now(UTC))

    def kube_pods(args: PodsArgs, ctx: ToolContext) -> str:
        selector = [f"--selector={args.selector}"] if args.selector else []
        info = backend.kubectl_json(
            ctx, "get", "pods", "--output=json", *selector, max_output_bytes=_MAX_LIST_BYTES
        )
        return pods_report(json_items(info), now(), args.limit, args.selector, backend.where())

    def kube_events(args: EventsArgs, ctx: ToolContext) -> str:
        fields = _event_fields(args)
        selector = [f"--field-selector={','.join(fields)}"] if fields else []
        info = backend.kubectl_json(
            ctx, "get", "events", "--output=json", *selector, max_output_bytes=_MAX_LIST_BYTES
        )
        return events_report(
            json_items(info), now(), args.limit, args.object, args.warnings_only, backend.where()
        )

    def kube_logs(args: LogsArgs, ctx: ToolContext) -> str:
        return _logs(backend, args, ctx)

    def kube_rollout_status(args: WorkloadArgs, ctx: ToolContext) -> ToolResult:
        return _rollout_status(backend, kube_resource(args.workload), ctx)

    def kube_scale(args: ScaleArgs, ctx: ToolContext) -> ToolResult:
        return _scale(backend, args, ctx)

    def kube_replicas(args: WorkloadArgs, ctx: ToolContext) -> str:
        resource = _scalable(args.workload)
        return replicas_json(resource, backend.kubectl_json(ctx, "get", resource, "--output=json"))

    def read_only(func: ToolFunction[Any], model: type[BaseModel], what: str) -> FunctionTool[Any]:
        return FunctionTool(
            func,
            model,
            name=func.__name__,
            description=f"{what} {_WHERE_NOTE}",
            category=ToolCategory.READ_ONLY,
            parallel=True,
            timeout=30,
            placement=KUBERNETES,
        )

    return [
        read_only(
            kube_pods,
            PodsArgs,
            "Kubernetes pods: ready containers, phase, restarts, age, node and why a container waits or "
            "died (CrashLoopBackOff, OOMKilled); failing pods first, optionally by label selector.",
        ),
        read_only(
            kube_events,
            EventsArgs,
            "Recent Kubernetes events, warnings first then newest first: time, type, reason, object, "
            "message; optionally only for one KIND/NAME.",
        ),
        read_only(
            kube_logs,
            LogsArgs,
            "The last log lines of a Kubernetes pod (or one pod of deployment/NAME), optionally of one "
            "container, its previous (crashed) instance, or only recent lines.",
        ),
        read_only(
            kube_rollout_status,
            WorkloadArgs,
            "Rollout status of a deployment, statefulset or daemonset: ready/updated/available replicas, "
            "failing conditions and kubectl rollout status.",
        ),
        read_only(
            kube_replicas,
            WorkloadArgs,
            "The replica counts of a deployment or statefulset as one JSON object: "
            '{"workload": ..., "replicas": asked, "ready_replicas": ready}.',
        ),
        FunctionTool(
            kube_scale,
            ScaleArgs,
            name="kube_scale",
            description=f"Scale a deployment or statefulset to N replicas, then report its status. {_WHERE_NOTE}",
            category=ToolCategory.MUTATING,
            timeout=60,
            command=lambda args: shlex.join(backend.kubectl_argv(*_scale_args(args))),
            placement=KUBERNETES,
            verification=SCALE_VERIFICATION,
        ),
    ]


# Read the count before, check every asked replica is ready after, and scale back to the count read.
SCALE_VERIFICATION = Declared(
    before=Before("kube_replicas", {"workload": "{args.workload}"}),
    check=Check(
        "kube_replicas", {"workload": "{args.workload}"}, expect='"ready_replicas": {args.replicas}}}'
    ),
    undo=Undo("kube_scale", {"workload": "{args.workload}", "replicas": "{before.replicas}"}),
)


def replicas_json(resource: str, info: dict[str, Any]) -> str:
    """``{"workload": KIND/NAME, "replicas": N, "ready_replicas": M}``, ``ready_replicas`` last (a
    check expects ``"ready_replicas": M}``), from ``kubectl get -o json``."""
    spec = info.get("spec") or {}
    status = info.get("status") or {}
    counts = {"replicas": int(spec.get("replicas", 1)), "ready_replicas": int(status.get("readyReplicas", 0))}
    return json.dumps({"workload": resource, **counts})


def _event_fields(args: EventsArgs) -> list[str]:
    """The field selector terms: the object asked about and the event type."""
    fields = []
    if args.object:
        kind, name = _kind_and_name(args.object, tuple(_EVENT_KINDS))
        fields += [f"involvedObject.kind={_EVENT_KINDS[kind]}", f"involvedObject.name={name}"]
    if args.warnings_only:
        fields.append("type=Warning")
    return fields


def _logs(backend: KubernetesBackend, args: LogsArgs, ctx: ToolContext) -> str:
    if "/" in args.pod:
        kind, name = _kind_and_name(args.pod, _LOG_KINDS)
        resource = f"{kind}/{name}"
    else:
        resource = args.pod
    argv = ["logs", resource, f"--tail={args.tail}"]
    argv += [f"--container={args.container}"] if args.container else []
    argv += ["--previous"] if args.previous else []
    argv += [f"--since={args.since}"] if args.since else []
    result = backend.kubectl_run(ctx, *argv)
    if not result.ok:
        raise ToolCallError(result.failure_message())
    notes = [f"container {args.container}"] if args.container else []
    notes += ["previous instance"] if args.previous else []
    notes += [f"since {args.since}"] if args.since else []
    head = f"Last {args.tail} lines of {resource}" + (f" ({', '.join(notes)})" if notes else "")
    head += f" in {backend.where()}:"
    said = " ".join(result.stderr.split())  # e.g. "Found 3 pods, using pod/web-7d4b9"
    if said:
        head += f"\nkubectl: {shorten(said, MAX_MESSAGE_CHARS)}"
    lines = [shorten(line, _MAX_LOG_LINE_CHARS) for line in result.stdout.splitlines()]
    return "\n".join([head, *(lines or ["(no log lines)"])])


def _rollout_status(backend: KubernetesBackend, resource: str, ctx: ToolContext) -> ToolResult:
    # The summary first: a workload that does not exist is one clean error, with no rollout call.
    summary = describe_workload(
        resource, backend.namespace, backend.kubectl_json(ctx, "get", resource, "--output=json")
    )
    rollout = backend.kubectl_run(ctx, "rollout", "status", resource, "--watch=false")
    if not rollout.ok:
        return ToolResult(
            output=f"{summary.output}\nrollout status failed: {rollout.failure_message()}", is_error=True
        )
    said = rollout.stdout.strip() or "(no output)"
    return ToolResult(output=f"{summary.output}\nrollout: {said}", is_error=summary.is_error)


def _scale_args(args: ScaleArgs) -> list[str]:
    # One argv for both: the approval card shows exactly what kube_scale then runs.
    return ["scale", _scalable(args.workload), f"--replicas={args.replicas}"]


def _scale(backend: KubernetesBackend, args: ScaleArgs, ctx: ToolContext) -> ToolResult:
    resource = _scalable(args.workload)
    result = backend.kubectl_run(ctx, *_scale_args(args))
    if not result.ok:
        return error_result(f"scale of {resource} failed: {result.failure_message()}")
    status = backend.status(resource, ctx)
    said = f" ({result.stdout.strip()})" if result.stdout.strip() else ""
    return ToolResult(
        output=f"Scaled {resource} to {args.replicas} replicas{said}.\nNow: {status.output}",
        is_error=status.is_error,
    )


def _scalable(workload: str) -> str:
    resource = kube_resource(workload)
    if resource.split("/", 1)[0] not in _SCALE_KINDS:
        raise ToolCallError(f"{workload!r}: kube_scale scales a deployment or statefulset only")
    return resource


def _kind_and_name(value: str, allowed: tuple[str, ...]) -> tuple[str, str]:
    """``KIND/NAME`` with KIND canonical (``deploy`` -> ``deployment``) and one of ``allowed``."""
    kind, _, name = value.partition("/")
    canonical = _KINDS.get(kind.lower(), "")
    if canonical not in allowed:
        raise ToolCallError(f"{value!r}: KIND must be one of {', '.join(allowed)}")
    return canonical, name
