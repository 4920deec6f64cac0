"""The kube_* tools through a fake kubectl on PATH that records its argv and prints canned JSON."""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime
from typing import Any

import pytest

from agent.tooling import ToolCategory
from tests.tools.fakes import FakeCommands
from tools.base import FunctionTool
from tools.builtin.kubernetes import kubernetes_tools
from tools.errors import ToolConfigError

NOW = datetime(2025, 1, 6, 10, 10, tzinfo=UTC)
APPROVED = {"confirmed_by": "U024BE7LH"}
PREFIX = ["--namespace=shop", "--context=prod-eu"]
DEPLOYMENT = {
    "metadata": {"generation": 2},
    "spec": {"replicas": 3},
    "status": {"observedGeneration": 2, "readyReplicas": 3, "updatedReplicas": 3, "availableReplicas": 3},
}


def pod(name: str, phase: str = "Running", **status: Any) -> dict[str, Any]:
    containers = status.pop("containers", [{"name": "app", "ready": True, "restartCount": 0}])
    return {
        "metadata": {"name": name, "creationTimestamp": "2025-01-06T08:00:00Z"},
        "spec": {"nodeName": "node-a", "containers": [{"name": c["name"]} for c in containers]},
        "status": {"phase": phase, "containerStatuses": containers, **status},
    }


CRASHING = pod(
    "web-7d4b9-x2k",
    containers=[
        {
            "name": "app",
            "ready": False,
            "restartCount": 12,
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}},
            "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
        },
        {"name": "sidecar", "ready": True, "restartCount": 2},
    ],
)
PENDING = {
    "metadata": {"name": "web-7d4b9-p9q", "creationTimestamp": "2025-01-06T10:09:30Z"},
    "spec": {"containers": [{"name": "app"}]},
    "status": {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    },
}


def event(kind: str, reason: str, obj: str, when: str, message: str, **extra: Any) -> dict[str, Any]:
    obj_kind, name = obj.split("/")
    return {
        "type": kind,
        "reason": reason,
        "involvedObject": {"kind": obj_kind, "name": name},
        "lastTimestamp": when,
        "message": message,
        **extra,
    }


EVENTS = [
    event("Normal", "Scheduled", "Pod/web-1", "2025-01-06T10:00:00Z", "Successfully assigned shop/web-1"),
    event("Warning", "BackOff", "Pod/web-1", "2025-01-06T10:05:00Z", "Back-off restarting", count=12),
    {
        **event(
            "Warning", "FailedScheduling", "Pod/web-2", "", "0/3 nodes are available:\n3 Insufficient cpu."
        ),
        "lastTimestamp": None,
        "eventTime": "2025-01-06T10:02:59.500000Z",
    },
    event("Normal", "Pulled", "Pod/web-1", "2025-01-06T10:06:00Z", "Container image pulled"),
]


def install(fake: FakeCommands, **answers: dict[str, object]) -> None:
    """A kubectl answering ``get deployment`` with DEPLOYMENT, and each sub-command word its answer."""
    fake.add("kubectl", stdout=json.dumps(DEPLOYMENT), when=answers)


def tools(
    fake: FakeCommands, namespace: str = "shop", context: str | None = "prod-eu"
) -> dict[str, FunctionTool[Any]]:
    built = kubernetes_tools(
        {**fake.env, "KUBECONFIG": "/etc/chatops/kubeconfig"}, namespace, context, clock=lambda: NOW
    )
    return {tool.name: tool for tool in built}


def run(tool: FunctionTool[Any], **arguments: object) -> Any:
    return tool.execute(json.dumps(arguments), timeout=10)


def items(*objects: dict[str, Any]) -> dict[str, object]:
    return {"stdout": json.dumps({"kind": "List", "items": list(objects)})}


def test_the_tools_and_their_categories(fake_commands: FakeCommands) -> None:
    built = tools(fake_commands)
    assert sorted(built) == [
        "kube_events",
        "kube_logs",
        "kube_pods",
        "kube_replicas",
        "kube_rollout_status",
        "kube_scale",
    ]
    for name in ("kube_events", "kube_logs", "kube_pods", "kube_replicas", "kube_rollout_status"):
        assert built[name].category is ToolCategory.READ_ONLY and built[name].parallel
    assert built["kube_scale"].category is ToolCategory.MUTATING and not built["kube_scale"].parallel
    for tool in built.values():
        assert "chosen by the target" in tool.definition.description
        assert "namespace" not in tool.definition.parameters["properties"]


def test_pods_show_crash_loops_oom_kills_and_restarts_failing_first(fake_commands: FakeCommands) -> None:
    install(fake_commands, pods=items(pod("web-7d4b9-aaa"), CRASHING, PENDING))
    result = run(tools(fake_commands)["kube_pods"], selector="app=web,tier!=db")
    assert not result.is_error
    assert fake_commands.calls("kubectl") == [
        [*PREFIX, "get", "pods", "--output=json", "--selector=app=web,tier!=db"]
    ]
    lines = result.output.splitlines()
    assert lines[0] == (
        "3 pods in namespace shop, context prod-eu, selector app=web,tier!=db; 2 not ready or failing."
    )
    assert lines[1].split() == ["NAME", "READY", "PHASE", "RESTARTS", "AGE", "NODE", "REASON"]
    assert lines[2].split() == [
        "web-7d4b9-p9q", "0/1", "Pending", "0", "30s", "-", "Unschedulable",
    ]  # fmt: skip
    assert lines[3].split() == [
        "web-7d4b9-x2k", "1/2", "Running", "14", "2h", "10m", "node-a",
        "app:", "CrashLoopBackOff", "(last:", "OOMKilled,", "exit", "137)",
    ]  # fmt: skip
    assert lines[4].split() == ["web-7d4b9-aaa", "1/1", "Running", "0", "2h", "10m", "node-a", "-"]
    assert len(lines) == 5


def test_pods_are_bounded_and_say_how_many_more(fake_commands: FakeCommands) -> None:
    healthy = [pod(f"web-{index}") for index in range(5)]
    install(fake_commands, pods=items(*healthy, CRASHING))
    result = run(tools(fake_commands)["kube_pods"], limit=2)
    lines = result.output.splitlines()
    assert lines[0].startswith("6 pods in namespace shop, context prod-eu; 1 not ready or failing.")
    assert [line.split()[0] for line in lines[2:4]] == ["web-7d4b9-x2k", "web-0"]
    assert lines[4] == "... 4 more pods not shown (narrow with a selector)."
    assert fake_commands.calls("kubectl") == [[*PREFIX, "get", "pods", "--output=json"]]


def test_a_namespace_with_megabytes_of_pod_json_is_still_listed(fake_commands: FakeCommands) -> None:
    big = [pod(f"web-{index:03}", padding="x" * 8000) for index in range(300)]
    answer = items(*big)
    assert len(str(answer["stdout"])) > 2 * 1024 * 1024  # beyond tools.process's default 1 MiB
    install(fake_commands, pods=answer)
    result = run(tools(fake_commands)["kube_pods"], limit=1)
    assert (
        result.output.splitlines()[0]
        == "300 pods in namespace shop, context prod-eu; 0 not ready or failing."
    )
    assert result.output.splitlines()[-1] == "... 299 more pods not shown (narrow with a selector)."


def test_no_pods_is_said_plainly(fake_commands: FakeCommands) -> None:
    install(fake_commands, pods=items())
    result = run(tools(fake_commands, namespace="default", context=None)["kube_pods"], selector="!canary")
    assert result.output == "No pods in namespace default, selector !canary."
    assert fake_commands.calls("kubectl") == [
        ["--namespace=default", "get", "pods", "--output=json", "--selector=!canary"]
    ]


@pytest.mark.parametrize(
    "selector",
    [
        "app=web",
        "app==web,tier!=db",
        "env in (prod,staging)",
        "env notin (dev),app=web",
        "!canary",
        "app.kubernetes.io/name=web",
        "release=",
    ],
)
def test_label_selectors_in_kubectl_syntax_are_passed_as_one_argument(
    fake_commands: FakeCommands, selector: str
) -> None:
    install(fake_commands, pods=items())
    assert not run(tools(fake_commands)["kube_pods"], selector=selector).is_error
    assert fake_commands.calls("kubectl")[0][-1] == f"--selector={selector}"


@pytest.mark.parametrize(
    "selector",
    [
        "app=web --all-namespaces",
        "--all-namespaces",
        "app = web",
        "app=web;rm -rf /",
        "app=$(id)",
        "app=`id`",
        "env in (a, b)",
        "env in(a,b)",
        "app=web,",
        "app=web\n",
        "app=web\u202e",
        "",
        "app=web&&x=y",
        "app=-web",
        "a" * 301,
    ],
)
def test_hostile_label_selectors_are_refused_before_kubectl_runs(
    fake_commands: FakeCommands, selector: str
) -> None:
    install(fake_commands)
    result = run(tools(fake_commands)["kube_pods"], selector=selector)
    assert result.is_error and "selector" in result.output
    assert fake_commands.calls("kubectl") == []


def test_events_put_warnings_first_each_newest_first_on_one_line(fake_commands: FakeCommands) -> None:
    install(fake_commands, events=items(*EVENTS))
    result = run(tools(fake_commands)["kube_events"])
    lines = result.output.splitlines()
    assert lines[0] == (
        "4 events in namespace shop, context prod-eu (2 warnings); warnings first, newest first."
    )
    assert lines[1].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    rows = [line.split(maxsplit=6) for line in lines[2:]]
    assert [row[:6] for row in rows] == [
        ["5m", "0s", "ago", "Warning", "BackOff", "pod/web-1"],
        ["7m", "0s", "ago", "Warning", "FailedScheduling", "pod/web-2"],
        ["4m", "0s", "ago", "Normal", "Pulled", "pod/web-1"],
        ["10m", "0s", "ago", "Normal", "Scheduled", "pod/web-1"],
    ]
    assert lines[2].endswith("Back-off restarting (x12)")
    assert lines[3].endswith("0/3 nodes are available: 3 Insufficient cpu.")  # one line
    assert fake_commands.calls("kubectl") == [[*PREFIX, "get", "events", "--output=json"]]


def test_events_of_one_object_are_selected_by_kubectl_and_limited(fake_commands: FakeCommands) -> None:
    long_message = "x" * 500
    many = [
        event("Normal", "Pulled", "Deployment/web", f"2025-01-06T10:0{minute}:00Z", long_message)
        for minute in range(5)
    ]
    install(fake_commands, events=items(*many))
    result = run(tools(fake_commands)["kube_events"], object="deploy/web", warnings_only=True, limit=2)
    (argv,) = fake_commands.calls("kubectl")
    assert argv == [
        *PREFIX,
        "get",
        "events",
        "--output=json",
        "--field-selector=involvedObject.kind=Deployment,involvedObject.name=web,type=Warning",
    ]
    lines = result.output.splitlines()
    assert lines[0].startswith("5 events in namespace shop, context prod-eu, about deploy/web")
    assert [line.split()[0] for line in lines[2:4]] == ["6m", "7m"]
    assert lines[2].endswith("x" * 197 + "...")
    assert lines[4] == "... 3 more events not shown."


@pytest.mark.parametrize(
    "arguments",
    [
        {"object": "secret/db-password"},
        {"object": "web-1"},
        {"object": "pod/--all-namespaces"},
        {"object": "pod/a;b"},
        {"object": "pod/web-1,involvedObject.name=x"},
        {"limit": 201},
        {"limit": 0},
    ],
)
def test_bad_event_arguments_are_refused_before_kubectl_runs(
    fake_commands: FakeCommands, arguments: dict[str, object]
) -> None:
    install(fake_commands)
    assert run(tools(fake_commands)["kube_events"], **arguments).is_error
    assert fake_commands.calls("kubectl") == []


def test_logs_pass_tail_container_previous_and_since(fake_commands: FakeCommands) -> None:
    install(
        fake_commands,
        logs={"stdout": "boot\nout of memory\n", "stderr": "Found 3 pods, using pod/web-7d4b9-x2k\n"},
    )
    arguments = {"pod": "deploy/web", "container": "app", "tail": 50, "previous": True, "since": "1h30m"}
    result = run(tools(fake_commands)["kube_logs"], **arguments)
    assert fake_commands.calls("kubectl") == [
        [*PREFIX, "logs", "deployment/web", "--tail=50", "--container=app", "--previous", "--since=1h30m"]
    ]
    assert result.output.splitlines() == [
        "Last 50 lines of deployment/web (container app, previous instance, since 1h30m) "
        "in namespace shop, context prod-eu:",
        "kubectl: Found 3 pods, using pod/web-7d4b9-x2k",
        "boot",
        "out of memory",
    ]


def test_logs_default_to_the_last_200_lines_of_a_pod(fake_commands: FakeCommands) -> None:
    install(fake_commands, logs={"stdout": ""})
    result = run(tools(fake_commands)["kube_logs"], pod="web-7d4b9-x2k")
    assert fake_commands.calls("kubectl") == [[*PREFIX, "logs", "web-7d4b9-x2k", "--tail=200"]]
    assert result.output.splitlines()[1] == "(no log lines)"


def test_a_kubectl_failure_is_an_error_result_with_its_stderr(fake_commands: FakeCommands) -> None:
    stderr = 'Error from server (BadRequest): previous terminated container "app" in pod "web-1" not found\n'
    install(fake_commands, logs={"stderr": stderr, "exit_code": 1})
    result = run(tools(fake_commands)["kube_logs"], pod="web-1", previous=True)
    assert result.is_error
    assert result.output.startswith(
        "Error: `kubectl --namespace=shop --context=prod-eu logs web-1 --tail=200 --previous` "
        "failed with exit status 1"
    )
    assert 'previous terminated container "app"' in result.output


def test_an_unreachable_cluster_is_an_error_result(fake_commands: FakeCommands) -> None:
    install(
        fake_commands,
        pods={"stderr": "Unable to connect to the server: dial tcp: i/o timeout\n", "exit_code": 1},
    )
    result = run(tools(fake_commands)["kube_pods"])
    assert result.is_error and "Unable to connect to the server" in result.output


@pytest.mark.parametrize("stdout", ["not json", "[1, 2]", '{"kind": "List"}', '{"items": 3}'])
def test_unreadable_kubectl_output_is_an_error_result(fake_commands: FakeCommands, stdout: str) -> None:
    install(fake_commands, pods={"stdout": stdout}, events={"stdout": stdout})
    assert run(tools(fake_commands)["kube_pods"]).is_error
    assert run(tools(fake_commands)["kube_events"]).is_error


@pytest.mark.parametrize(
    "arguments",
    [
        {"pod": "--all-namespaces"},
        {"pod": "-n"},
        {"pod": "a;b"},
        {"pod": "web 1"},
        {"pod": "Web-1"},
        {"pod": "$(reboot)"},
        {"pod": "web-1\n"},
        {"pod": "../web"},
        {"pod": "pod/--all"},
        {"pod": "secret/db-password"},
        {"pod": "web-1", "container": "--all-containers"},
        {"pod": "web-1", "container": "app;id"},
        {"pod": "web-1", "since": "-1h"},
        {"pod": "web-1", "since": "0s"},
        {"pod": "web-1", "since": "10"},
        {"pod": "web-1", "since": "1d"},
        {"pod": "web-1", "since": "10m --all-namespaces"},
        {"pod": "web-1", "tail": 0},
        {"pod": "web-1", "tail": 2001},
        {"pod": "web-1", "namespace": "kube-system"},
    ],
)
def test_hostile_log_arguments_are_refused_before_kubectl_runs(
    fake_commands: FakeCommands, arguments: dict[str, object]
) -> None:
    install(fake_commands)
    assert run(tools(fake_commands)["kube_logs"], **arguments).is_error
    assert fake_commands.calls("kubectl") == []


def test_rollout_status_gives_the_workload_summary_and_kubectl_rollout_status(
    fake_commands: FakeCommands,
) -> None:
    install(
        fake_commands, rollout={"stdout": "statefulset rolling update complete 3 pods at revision db-5...\n"}
    )
    result = run(tools(fake_commands)["kube_rollout_status"], workload="sts/db")
    assert not result.is_error
    assert result.output.splitlines() == [
        "statefulset/db in namespace shop: 3/3 ready, 3 updated, 3 available",
        "rollout: statefulset rolling update complete 3 pods at revision db-5...",
    ]
    assert fake_commands.calls("kubectl") == [
        [*PREFIX, "get", "statefulset/db", "--output=json"],
        [*PREFIX, "rollout", "status", "statefulset/db", "--watch=false"],
    ]


def test_a_stuck_rollout_is_an_error_result(fake_commands: FakeCommands) -> None:
    stderr = 'error: deployment "web" exceeded its progress deadline\n'
    install(fake_commands, rollout={"stderr": stderr, "exit_code": 1})
    result = run(tools(fake_commands)["kube_rollout_status"], workload="web")
    assert result.is_error
    assert (
        result.output.splitlines()[0] == "deployment/web in namespace shop: 3/3 ready, 3 updated, 3 available"
    )
    assert "exceeded its progress deadline" in result.output


def test_rollout_status_of_a_missing_workload_is_one_error(fake_commands: FakeCommands) -> None:
    stderr = 'Error from server (NotFound): deployments.apps "ghost" not found\n'
    fake_commands.add("kubectl", stderr=stderr, exit_code=1)
    result = run(tools(fake_commands)["kube_rollout_status"], workload="ghost")
    assert result.is_error and '"ghost" not found' in result.output
    assert len(fake_commands.calls("kubectl")) == 1  # no rollout status of what does not exist


def test_scale_shows_the_exact_command_then_runs_it_and_reports_the_status(
    fake_commands: FakeCommands,
) -> None:
    install(fake_commands, scale={"stdout": "deployment.apps/web scaled\n"})
    scale = tools(fake_commands)["kube_scale"]
    command = scale.describe(json.dumps({"workload": "web", "replicas": 0}))
    assert command == "kubectl --namespace=shop --context=prod-eu scale deployment/web --replicas=0"
    result = run(scale, workload="web", replicas=0, **APPROVED)
    assert not result.is_error
    assert result.output.splitlines() == [
        "Scaled deployment/web to 0 replicas (deployment.apps/web scaled).",
        "Now: deployment/web in namespace shop: 3/3 ready, 3 updated, 3 available",
        "(approved by U024BE7LH)",
    ]
    calls = fake_commands.calls("kubectl")
    assert calls[0] == shlex.split(command)[1:]
    assert calls[1] == [*PREFIX, "get", "deployment/web", "--output=json"]
    assert fake_commands.envs("kubectl")[0]["KUBECONFIG"] == "/etc/chatops/kubeconfig"


def test_scale_is_refused_without_approval(fake_commands: FakeCommands) -> None:
    install(fake_commands)
    result = run(tools(fake_commands)["kube_scale"], workload="web", replicas=3)
    assert result.is_error and "runs only after a person approves it" in result.output
    assert fake_commands.calls("kubectl") == []


@pytest.mark.parametrize(
    "arguments",
    [
        {"workload": "ds/agent", "replicas": 2},
        {"workload": "pod/web-1", "replicas": 2},
        {"workload": "web", "replicas": 1001},
        {"workload": "web", "replicas": -1},
        {"workload": "--all", "replicas": 1},
        {"workload": "web;reboot", "replicas": 1},
        {"workload": "deployment/web", "replicas": "3 --all"},
        {"workload": "web", "replicas": 1, "context": "other"},
    ],
)
def test_bad_scale_arguments_are_refused_and_described_as_nothing(
    fake_commands: FakeCommands, arguments: dict[str, object]
) -> None:
    install(fake_commands)
    scale = tools(fake_commands)["kube_scale"]
    assert scale.describe(json.dumps(arguments)) is None
    assert run(scale, **arguments, **APPROVED).is_error
    assert fake_commands.calls("kubectl") == []


def test_a_failed_scale_is_an_error_result(fake_commands: FakeCommands) -> None:
    install(fake_commands, scale={"stderr": "Error from server (Forbidden): cannot patch\n", "exit_code": 1})
    result = run(tools(fake_commands)["kube_scale"], workload="statefulset/db", replicas=5, **APPROVED)
    assert result.is_error
    assert result.output.startswith("Error: scale of statefulset/db failed: `kubectl --namespace=shop")
    assert "Forbidden" in result.output


@pytest.mark.parametrize(
    ("namespace", "context"),
    [
        ("--all-namespaces", None),
        ("Shop", None),
        ("shop ns", None),
        ("", None),
        ("shop", "prod eu"),
        ("shop", "eu\n"),
    ],
)
def test_a_namespace_or_context_typo_in_the_config_fails_at_start_up(
    fake_commands: FakeCommands, namespace: str, context: str | None
) -> None:
    with pytest.raises(ToolConfigError):
        kubernetes_tools(fake_commands.env, namespace, context)


def test_cloud_style_context_names_are_accepted(fake_commands: FakeCommands) -> None:
    install(fake_commands, pods=items())
    context = "arn:aws:eks:eu-west-1:123456789012:cluster/prod_main"
    run(tools(fake_commands, context=context)["kube_pods"])
    assert fake_commands.calls("kubectl")[0][:2] == ["--namespace=shop", f"--context={context}"]
