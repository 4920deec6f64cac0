"""Service status and restart through one configured backend.

* ``systemd``: ``systemctl show`` / ``systemctl restart`` on this host;
* ``docker``: ``docker inspect`` / ``docker restart`` of a container;
* ``kubernetes``: ``kubectl get -o json`` / ``kubectl rollout restart`` of a deployment (or
  ``statefulset/NAME``, ``daemonset/NAME``) in the configured namespace and context.

Commands are argv lists run by ``tools.process``; the service name is validated first (no leading
``-``, no spaces, no shell characters) and always passed as one argument.

``KubernetesBackend`` is also the one way ``tools.builtin.kubernetes`` talks to a cluster: its
``kubectl_argv`` prefix (``kubectl --namespace=NS [--context=CTX]``, both checked when the backend
is built), ``kubectl_run`` / ``kubectl_json``, the workload kind table (``kube_resource``) and
the workload summary (``describe_workload``) are shared, so both modules say the same thing about
the same deployment.
"""

from __future__ import annotations

import json
import re
import shlex
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from agent.tooling import ToolCategory, ToolResult
from tools.base import FunctionTool, ToolContext, error_result
from tools.config import KUBE_NAMESPACE
from tools.errors import ToolCallError, ToolConfigError
from tools.placement import SERVICE
from tools.process import DEFAULT_MAX_OUTPUT_BYTES, CommandResult, run_command
from tools.verification import Before, Check, Declared, NoUndo

_SERVICE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9@._:/-]{0,252}$"
_SYSTEMD_PROPERTIES = (
    "Id,Description,LoadState,ActiveState,SubState,MainPID,ActiveEnterTimestamp,NRestarts,Result"
)
KUBE_WORKLOAD_KINDS = {
    "deployment": "deployment",
    "deploy": "deployment",
    "statefulset": "statefulset",
    "sts": "statefulset",
    "daemonset": "daemonset",
    "ds": "daemonset",
}
"""The workload kinds (and kubectl's short names) a service name may carry as ``KIND/NAME``."""
# A namespace is a DNS-1123 label. Context names are the kubeconfig's own (EKS ARNs, GKE's
# ``gke_project_zone_cluster``, ``user@cluster``): one printable word, so the approval card shows it whole.
_KUBE_NAMESPACE_RE = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")
_KUBE_CONTEXT_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_@.:/+-]{0,252}")


class ServiceArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    service: str = Field(
        pattern=_SERVICE_PATTERN,
        description="The unit, container or workload name (kubernetes: NAME or KIND/NAME).",
    )


class ServiceBackend(Protocol):
    """How one kind of service manager is asked about and told to restart a service."""

    name: str
    noun: str

    def status(self, service: str, ctx: ToolContext) -> ToolResult: ...

    def restart(self, service: str, ctx: ToolContext) -> ToolResult: ...

    def restart_argv(self, service: str) -> list[str]:
        """The exact argv ``restart`` runs (raises ``ToolCallError`` for a name it refuses)."""
        ...


class _CommandBackend(ABC):
    """Runs commands with the configured environment; subclasses build argv and read output."""

    name = ""
    noun = ""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = dict(env)

    def status(self, service: str, ctx: ToolContext) -> ToolResult:
        """The service's state; a name the backend refuses, or a status command that failed or
        printed what cannot be read, is an error result."""
        try:
            return self._status(service, ctx)
        except ToolCallError as exc:
            return error_result(str(exc))

    @abstractmethod
    def _status(self, service: str, ctx: ToolContext) -> ToolResult:
        """The state from the backend's status command (raises ``ToolCallError`` when there is none)."""

    @abstractmethod
    def restart_argv(self, service: str) -> list[str]: ...

    def restart(self, service: str, ctx: ToolContext) -> ToolResult:
        # One argv, built once: the approval card shows ``restart_argv`` and this runs it.
        return self._restart_then_status(self.restart_argv(service), service, ctx)

    def _run(
        self, argv: list[str], ctx: ToolContext, max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    ) -> CommandResult:
        return run_command(
            argv, timeout=max(0.5, ctx.remaining()), env=self._env, max_output_bytes=max_output_bytes
        )

    def _output(
        self, argv: list[str], ctx: ToolContext, max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    ) -> str:
        """What ``argv`` printed; a command that failed is the call's error."""
        result = self._run(argv, ctx, max_output_bytes)
        if not result.ok:
            raise ToolCallError(result.failure_message())
        return result.stdout

    def _json_output(
        self,
        argv: list[str],
        ctx: ToolContext,
        program: str,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> dict[str, Any]:
        """``_output`` read as a JSON object; ``program`` names the command in the error. Output
        beyond ``max_output_bytes`` is cut (``tools.process``), so it reads as unreadable."""
        stdout = self._output(argv, ctx, max_output_bytes)
        try:
            info = json.loads(stdout)
        except ValueError:
            info = None
        if not isinstance(info, dict):
            raise ToolCallError(f"{program} gave unreadable output: {stdout[:200]!r}")
        return info

    def _restart_then_status(self, argv: list[str], service: str, ctx: ToolContext) -> ToolResult:
        result = self._run(argv, ctx)
        if not result.ok:
            return error_result(f"restart of {service} failed: {result.failure_message()}")
        status = self.status(service, ctx)
        said = f" ({result.stdout.strip()})" if result.stdout.strip() else ""
        return ToolResult(
            output=f"Restarted {service}{said}.\nNow: {status.output}", is_error=status.is_error
        )


class SystemdBackend(_CommandBackend):
    name = "systemd"
    noun = "systemd unit"

    def _status(self, service: str, ctx: ToolContext) -> ToolResult:
        _refuse_slash(service)
        shown = self._output(
            ["systemctl", "show", "--no-pager", f"--property={_SYSTEMD_PROPERTIES}", service], ctx
        )
        props = dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)
        unit = props.get("Id") or service
        if props.get("LoadState") == "not-found":
            return error_result(f"{unit}: no such unit")
        state = f"{props.get('ActiveState', '?')} ({props.get('SubState', '?')})"
        parts = [f"{unit}: {state}"]
        if props.get("ActiveEnterTimestamp"):
            parts.append(f"since {props['ActiveEnterTimestamp']}")
        if props.get("MainPID", "0") != "0":
            parts.append(f"main PID {props['MainPID']}")
        if props.get("NRestarts"):
            parts.append(f"{props['NRestarts']} automatic restarts")
        if props.get("Result") not in (None, "", "success"):
            parts.append(f"last result {props['Result']}")
        line = ", ".join(parts)
        if props.get("Description"):
            line += f" - {props['Description']}"
        return ToolResult(output=line, is_error=props.get("ActiveState") == "failed")

    def restart_argv(self, service: str) -> list[str]:
        _refuse_slash(service)
        return ["systemctl", "restart", "--no-ask-password", service]


class DockerBackend(_CommandBackend):
    name = "docker"
    noun = "Docker container"

    def _status(self, service: str, ctx: ToolContext) -> ToolResult:
        _refuse_slash(service)
        info = self._json_output(
            ["docker", "inspect", "--type", "container", "--format", "{{json .}}", service],
            ctx,
            "docker inspect",
        )
        state = info.get("State") or {}
        health = (state.get("Health") or {}).get("Status")
        parts = [f"{str(info.get('Name', service)).lstrip('/')}: {state.get('Status', '?')}"]
        if health:
            parts[0] += f" ({health})"
        if state.get("Running"):
            parts.append(f"since {state.get('StartedAt', '?')}")
        else:
            parts.append(f"exit code {state.get('ExitCode', '?')}, finished {state.get('FinishedAt', '?')}")
        parts.append(f"image {(info.get('Config') or {}).get('Image', '?')}")
        parts.append(f"{info.get('RestartCount', 0)} restarts")
        unhealthy = not state.get("Running") or health == "unhealthy"
        return ToolResult(output=", ".join(parts), is_error=unhealthy)

    def restart_argv(self, service: str) -> list[str]:
        _refuse_slash(service)
        return ["docker", "restart", service]


class KubernetesBackend(_CommandBackend):
    name = "kubernetes"
    noun = "Kubernetes workload"

    def __init__(self, env: Mapping[str, str], namespace: str, context: str | None) -> None:
        """Raises ``ToolConfigError`` for a namespace or context kubectl could misread."""
        super().__init__(env)
        if not _KUBE_NAMESPACE_RE.fullmatch(namespace):
            raise ToolConfigError(f"kubernetes namespace {namespace!r} is not a DNS-1123 label")
        if context and not _KUBE_CONTEXT_RE.fullmatch(context):
            raise ToolConfigError(f"kubernetes context {context!r}: use letters, digits and _@.:/+-")
        self.namespace = namespace
        self.context = context or None
        self._prefix = ["kubectl", f"--namespace={namespace}"]
        if context:
            self._prefix.append(f"--context={context}")

    def where(self) -> str:
        """``namespace NS`` or ``namespace NS, context CTX``: where this backend's calls act."""
        return f"namespace {self.namespace}" + (f", context {self.context}" if self.context else "")

    def kubectl_argv(self, *args: str) -> list[str]:
        """``kubectl --namespace=NS [--context=CTX] ARGS...``: every kubectl call on this target."""
        return [*self._prefix, *args]

    def kubectl_run(self, ctx: ToolContext, *args: str) -> CommandResult:
        return self._run(self.kubectl_argv(*args), ctx)

    def kubectl_json(
        self, ctx: ToolContext, *args: str, max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    ) -> dict[str, Any]:
        """What kubectl printed, read as a JSON object (pass ``--output=json`` in ``args``); a
        failure (exit status and stderr) is the call's ``ToolCallError``."""
        return self._json_output(self.kubectl_argv(*args), ctx, "kubectl", max_output_bytes)

    def _status(self, service: str, ctx: ToolContext) -> ToolResult:
        resource = kube_resource(service)
        info = self.kubectl_json(ctx, "get", resource, "--output=json")
        return describe_workload(resource, self.namespace, info)

    def restart_argv(self, service: str) -> list[str]:
        return self.kubectl_argv("rollout", "restart", kube_resource(service))


def describe_workload(resource: str, namespace: str, info: dict[str, Any]) -> ToolResult:
    """One line of replica counts for ``KIND/NAME`` (from ``kubectl get -o json``), then its
    failing conditions; an error result when replicas are missing and no rollout explains it."""
    spec = info.get("spec") or {}
    status = info.get("status") or {}
    if resource.startswith("daemonset/"):
        desired = int(status.get("desiredNumberScheduled", 0))
        ready = int(status.get("numberReady", 0))
        updated = int(status.get("updatedNumberScheduled", 0))
        available = int(status.get("numberAvailable", 0))
    else:
        desired = int(spec.get("replicas", 1))
        ready = int(status.get("readyReplicas", 0))
        updated = int(status.get("updatedReplicas", 0))
        available = int(status.get("availableReplicas", 0))
    line = f"{resource} in namespace {namespace}: {ready}/{desired} ready, {updated} updated, {available} available"
    generation = (info.get("metadata") or {}).get("generation", 0)
    rolling = updated < desired or status.get("observedGeneration", generation) < generation
    if rolling:
        line += " (rollout in progress)"
    failing = [
        f"{condition.get('type')}: {condition.get('message') or condition.get('reason')}"
        for condition in status.get("conditions") or []
        if condition.get("status") == "False"
    ]
    if failing:
        line += "\n" + "\n".join(failing)
    return ToolResult(output=line, is_error=ready < desired and not rolling)


def kube_resource(service: str) -> str:
    """``NAME`` or ``KIND/NAME`` as kubectl's ``KIND/NAME`` (a bare name is a deployment); raises
    ``ToolCallError`` for a kind that is not a workload (``secret/x``)."""
    kind, _, name = service.rpartition("/")
    canonical = KUBE_WORKLOAD_KINDS.get(kind.lower() or "deployment")
    if canonical is None or "/" in kind or not name:
        raise ToolCallError(
            f"{service!r}: use NAME or KIND/NAME with KIND deployment, statefulset or daemonset"
        )
    return f"{canonical}/{name}"


def _refuse_slash(service: str) -> None:
    # systemctl reads a name with "/" as a path (device or mount unit); docker names have none.
    if "/" in service:
        raise ToolCallError(f"{service!r}: a service name cannot contain '/'")


def make_backend(
    name: str, env: Mapping[str, str], kube_namespace: str = KUBE_NAMESPACE, kube_context: str | None = None
) -> ServiceBackend:
    """The backend called ``name`` (systemd, docker or kubernetes)."""
    if name == "systemd":
        return SystemdBackend(env)
    if name == "docker":
        return DockerBackend(env)
    if name == "kubernetes":
        return KubernetesBackend(env, kube_namespace, kube_context)
    raise ToolCallError(f"unknown service backend {name!r}")


def service_tools(backend: ServiceBackend) -> list[FunctionTool[Any]]:
    """``service_status`` (read-only) and ``service_restart`` (mutating) for the backend."""

    def service_status(args: ServiceArgs, ctx: ToolContext) -> ToolResult:
        return backend.status(args.service, ctx)

    def service_restart(args: ServiceArgs, ctx: ToolContext) -> ToolResult:
        return backend.restart(args.service, ctx)

    return [
        FunctionTool(
            service_status,
            ServiceArgs,
            name="service_status",
            description=f"Status of a {backend.noun} ({backend.name} backend): state, since when, restarts.",
            category=ToolCategory.READ_ONLY,
            parallel=True,
            timeout=20,
            placement=SERVICE,
        ),
        FunctionTool(
            service_restart,
            ServiceArgs,
            name="service_restart",
            description=f"Restart a {backend.noun} ({backend.name} backend), then report its status.",
            category=ToolCategory.MUTATING,
            timeout=120,
            command=lambda args: shlex.join(backend.restart_argv(args.service)),
            placement=SERVICE,
            verification=restart_verification(backend.name),
        ),
    ]


def restart_verification(backend: str) -> Declared:
    """How a restart is checked: a systemd unit is active since after the restart began; a
    Kubernetes workload's rollout is done (no rollout in progress, every replica ready); a Docker
    container runs (its status succeeds). A restart has no undo: it is its own undo, and says so."""
    no_undo = NoUndo("a restart cannot be taken back; if it made things worse, restart again or roll back")
    status = {"service": "{args.service}"}
    if backend == "systemd":
        # Read first: the check compares two of the host's own timestamps, never the worker's clock.
        check = Check("service_status", status, active_since_action=True)
        return Declared(before=Before("service_status", status), check=check, undo=no_undo)
    if backend == "kubernetes":
        return Declared(
            check=Check("service_status", status, expect_absent="rollout in progress"), undo=no_undo
        )
    return Declared(check=Check("service_status", status), undo=no_undo)
