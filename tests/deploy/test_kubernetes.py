"""deploy/kubernetes: every overlay renders, validates against the Kubernetes schemas offline, and
passes a security review (pod hardening, no secret values, least RBAC for the Kubernetes tools)."""

from __future__ import annotations

import copy
import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from bot.alerts.receiver import PATHS as ALERT_PATHS
from bot.ops.cli import SUBCOMMANDS
from bot.settings import Settings
from tests.deploy.kustomize import Object, load_documents, pod_spec, render
from tools.inventory import load_inventory

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kubernetes"
OVERLAYS = sorted(p for p in (KUBE / "overlays").iterdir() if (p / "kustomization.yaml").is_file())
KUSTOMIZATIONS = [KUBE / "base", KUBE / "runner", KUBE / "autoscaling", *OVERLAYS]
KUBE_VERSION = "1.30.0"  # the oldest Kubernetes these manifests are checked for
SETTINGS = {name.upper() for name in Settings.model_fields}
# Settings whose values are secrets (Settings.secret_values): only from a Secret, never written out.
SECRET_SETTINGS = {
    "SLACK_BOT_TOKEN",
    "SLACK_SIGNING_SECRET",
    "SLACK_APP_TOKEN",
    "LLM_API_KEY",
    "CHATOPS_METRICS_TOKEN",
    "CHATOPS_RUNNER_SECRET",
    "CHATOPS_RUNNER_KEY",
    "CHATOPS_ALERTS_TOKEN",
    "CHATOPS_PAGERDUTY_SECRET",
    "CHATOPS_CHANGES_TOKEN",
    "CHATOPS_CHANGES_GITHUB_SECRET",
    "REDIS_URL",  # may hold the Redis password
    "REDIS_PASSWORD",
    "CHATOPS_PROMETHEUS_HEADERS",
    "CHATOPS_ALERTMANAGER_HEADERS",
    "REDIS_SENTINEL_PASSWORD",
}


@functools.cache
def _rendered(directory: Path) -> list[Object]:
    return render(directory)


def rendered(directory: Path) -> list[Object]:
    return copy.deepcopy(_rendered(directory))


def workloads(objects: list[Object]) -> list[Object]:
    return [obj for obj in objects if pod_spec(obj) is not None]


def containers(obj: Object) -> list[Object]:
    spec = pod_spec(obj) or {}
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def everything() -> list[Object]:
    return [obj for directory in OVERLAYS for obj in rendered(directory)]


def test_there_are_staging_and_production_overlays() -> None:
    assert {p.name for p in OVERLAYS} >= {"staging", "production"}


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=lambda p: str(p.relative_to(KUBE)))
def test_every_object_is_valid_for_kubernetes(directory: Path) -> None:
    objects = rendered(directory)
    assert objects
    for obj in objects:
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)


def test_the_validation_catches_a_mistake() -> None:
    """The schema check is not vacuous: a misspelt field and a wrong type are refused."""
    web = next(o for o in rendered(KUBE / "base") if o["kind"] == "Deployment")
    misspelt = copy.deepcopy(web)
    misspelt["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    wrong_type = copy.deepcopy(web)
    wrong_type["spec"]["replicas"] = "two"
    for bad in (misspelt, wrong_type):
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(bad, KUBE_VERSION, strict=True)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed: no cross-check")
@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=lambda p: str(p.relative_to(KUBE)))
def test_the_renderer_agrees_with_kubectl_kustomize(directory: Path) -> None:
    out = subprocess.run(
        ["kubectl", "kustomize", str(directory)], capture_output=True, text=True, check=True, timeout=60
    ).stdout

    def keyed(objects: list[Object]) -> dict[tuple[str, str, str], Object]:
        return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects}

    theirs = keyed([doc for doc in yaml.safe_load_all(out) if doc])
    ours = keyed(rendered(directory))
    assert ours.keys() == theirs.keys()
    for key, obj in ours.items():
        assert obj == theirs[key], key


def test_every_pod_is_hardened() -> None:
    for obj in workloads(everything()):
        where = f"{obj['metadata']['namespace']}/{obj['kind']}/{obj['metadata']['name']}"
        spec = pod_spec(obj) or {}
        pod_security = spec.get("securityContext", {})
        assert pod_security.get("runAsNonRoot") is True, where
        assert pod_security.get("runAsUser", 0) >= 1000, where
        assert pod_security.get("seccompProfile") == {"type": "RuntimeDefault"}, where
        assert not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC"), where
        for container in containers(obj):
            security = container.get("securityContext", {})
            assert security.get("readOnlyRootFilesystem") is True, where
            assert security.get("allowPrivilegeEscalation") is False, where
            assert security.get("privileged", False) is False, where
            assert security.get("capabilities", {}).get("drop") == ["ALL"], where
            assert not security.get("capabilities", {}).get("add"), where
            limits, requests = container["resources"]["limits"], container["resources"]["requests"]
            assert {"cpu", "memory"} <= set(limits) and {"cpu", "memory"} <= set(requests), where
            assert container["image"].split(":")[-1] not in ("", "latest"), where
            mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
            assert "/tmp" in mounts, f"{where}: a read-only root needs a writable /tmp"


def test_host_paths_are_read_only_and_only_the_logs() -> None:
    """The runner DaemonSet is the only workload with a hostPath: the nodes' /var/log, read-only."""
    for obj in workloads(everything()):
        spec = pod_spec(obj) or {}
        host = {v["name"]: v["hostPath"]["path"] for v in spec.get("volumes", []) if "hostPath" in v}
        if obj["metadata"]["name"] != "chatops-runner":
            assert not host, obj["metadata"]["name"]
            continue
        assert host == {"host-logs": "/var/log"}
        for container in containers(obj):
            for mount in container.get("volumeMounts", []):
                if mount["name"] in host:
                    assert mount.get("readOnly") is True


def test_only_the_worker_gets_an_api_token() -> None:
    for obj in workloads(everything()):
        spec = pod_spec(obj) or {}
        component = obj["metadata"]["labels"]["app.kubernetes.io/component"]
        assert spec.get("automountServiceAccountToken") is (component == "worker"), obj["metadata"]["name"]
        assert spec["serviceAccountName"] == f"chatops-{component}"


def env_names(container: Object) -> list[str]:
    return [item["name"] for item in container.get("env", [])]


def test_every_variable_is_a_real_setting_and_no_secret_is_written_out() -> None:
    objects = everything()
    for obj in objects:
        if obj["kind"] == "Secret":
            pytest.fail(
                f"a Secret in the manifests: {obj['metadata']['name']} (reference it, create it apart)"
            )
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == "chatops-config":
            assert set(obj["data"]) <= SETTINGS, set(obj["data"]) - SETTINGS
            assert not set(obj["data"]) & SECRET_SETTINGS
            Settings.model_validate({k.lower(): v for k, v in obj["data"].items()})  # values are valid too
    for obj in workloads(objects):
        for container in containers(obj):
            assert set(env_names(container)) <= SETTINGS, set(env_names(container)) - SETTINGS
            for item in container.get("env", []):
                if item["name"] in SECRET_SETTINGS:
                    assert "secretKeyRef" in item.get("valueFrom", {}), (
                        f"{item['name']} must come from a Secret"
                    )
            for source in container.get("envFrom", []):
                assert set(source) <= {"configMapRef", "secretRef"}


def test_a_secret_written_into_a_manifest_is_caught() -> None:
    """The check above fails on a literal secret value (what a careless overlay would add)."""
    leaked = copy.deepcopy(rendered(KUBE / "runner"))
    daemonset = next(o for o in leaked if o["kind"] == "DaemonSet")
    env = daemonset["spec"]["template"]["spec"]["containers"][0]["env"]
    item = next(e for e in env if e["name"] == "CHATOPS_RUNNER_SECRET")
    item.pop("valueFrom")
    item["value"] = "hunter2"
    assert not all("secretKeyRef" in e.get("valueFrom", {}) for e in env if e["name"] in SECRET_SETTINGS)


def test_processes_run_real_subcommands() -> None:
    for obj in workloads(everything()):
        for container in containers(obj):
            assert container["args"][0] in SUBCOMMANDS and container["args"][0] in ("web", "worker", "runner")


def test_the_runner_gets_no_slack_or_llm_credentials() -> None:
    runner = next(o for o in rendered(KUBE / "runner") if o["kind"] == "DaemonSet")
    (container,) = containers(runner)
    assert "envFrom" not in container  # not the whole chatops-secrets
    assert not {n for n in env_names(container) if n.startswith(("SLACK_", "LLM_"))}
    secrets = {
        e["valueFrom"]["secretKeyRef"]["name"]
        for e in container["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert secrets == {"chatops-runner"}


def rbac_rules() -> list[dict[str, Any]]:
    roles = [o for o in rendered(KUBE / "base") if o["kind"] in ("Role", "ClusterRole")]
    assert [r["kind"] for r in roles] == ["Role"]  # namespaced, never cluster-wide
    rules: list[dict[str, Any]] = roles[0]["rules"]
    return rules


def allowed(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any(
        group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]
        for rule in rules
    )


# What the Kubernetes tools run (tools/builtin/kubernetes.py, services.py) and the access each needs.
NEEDED = [
    ("", "pods", "list"),  # kube_pods
    ("", "pods", "get"),  # kube_logs POD
    ("", "pods/log", "get"),  # kube_logs
    ("", "events", "list"),  # kube_events
    ("apps", "deployments", "get"),  # service_status, kube_rollout_status, kube_logs deployment/NAME
    ("apps", "deployments", "watch"),  # kubectl rollout status (list + watch of the one object)
    ("apps", "statefulsets", "get"),
    ("apps", "daemonsets", "get"),
    ("apps", "deployments", "patch"),  # service_restart: kubectl rollout restart
    ("apps", "deployments/scale", "patch"),  # kube_scale
    ("apps", "statefulsets/scale", "patch"),
]


@pytest.mark.parametrize(("group", "resource", "verb"), NEEDED)
def test_the_worker_role_allows_what_the_tools_run(group: str, resource: str, verb: str) -> None:
    assert allowed(rbac_rules(), group, resource, verb)


def test_the_worker_role_is_least_privilege() -> None:
    rules = rbac_rules()
    for rule in rules:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], rule
        assert "*" not in rule.get("resourceNames", [])
        assert not {"create", "delete", "deletecollection", "escalate", "bind", "impersonate"} & set(
            rule["verbs"]
        )
    for resource in (
        "secrets",
        "configmaps",
        "pods/exec",
        "pods/attach",
        "pods/portforward",
        "serviceaccounts/token",
    ):
        for verb in ("get", "list", "watch", "create", "update", "patch"):
            assert not allowed(rules, "", resource, verb), (resource, verb)
    assert not allowed(rules, "rbac.authorization.k8s.io", "roles", "patch")
    bindings = [o for o in rendered(KUBE / "base") if o["kind"] == "RoleBinding"]
    assert [b["subjects"] for b in bindings] == [[{"kind": "ServiceAccount", "name": "chatops-worker"}]]


def test_only_slack_and_the_alert_webhooks_are_public() -> None:
    for obj in everything():
        if obj["kind"] != "Ingress":
            continue
        assert obj["spec"]["tls"], "the Ingress terminates TLS"
        paths = {(p["path"], p["pathType"]) for rule in obj["spec"]["rules"] for p in rule["http"]["paths"]}
        # Exactly Slack's path and the three webhooks (bot/alerts/receiver.py): never /metrics or /healthz.
        assert paths == {(path, "Exact") for path in ("/slack/events", *ALERT_PATHS)}


def test_disruption_budgets_cover_web_and_worker() -> None:
    objects = rendered(KUBE / "base")
    budgets = {
        o["metadata"]["name"]: o["spec"]["selector"]["matchLabels"]
        for o in objects
        if o["kind"] == "PodDisruptionBudget"
    }
    for deployment in (o for o in objects if o["kind"] == "Deployment"):
        assert budgets[deployment["metadata"]["name"]] == deployment["spec"]["selector"]["matchLabels"]


def test_the_production_inventory_loads(tmp_path: Path) -> None:
    config = next(
        o for o in load_documents(KUBE / "overlays/production/inventory.yaml") if o["kind"] == "ConfigMap"
    )
    path = tmp_path / "inventory.yaml"
    path.write_text(config["data"]["inventory.yaml"])
    inventory = load_inventory(path)
    assert {t.via for t in inventory.targets} == {"runner", "kubernetes"}


def test_the_hpa_scales_the_worker_on_queue_depth() -> None:
    (hpa,) = rendered(KUBE / "autoscaling")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "chatops-worker"
    assert hpa["spec"]["metrics"][0]["external"]["metric"]["name"] == "chatops_queue_depth"


def test_the_secret_settings_are_the_ones_the_bot_treats_as_secret() -> None:
    """Every setting Settings.secret_values() redacts is in SECRET_SETTINGS (so the checks above
    cover it), and every name there is a real setting."""
    assert SECRET_SETTINGS <= SETTINGS
    plain = {
        name: f"value-of-{name}" for name, field in Settings.model_fields.items() if field.annotation is str
    }
    plain["redis_url"] = "redis://user:value-of-password@redis:6379/0"
    # Unvalidated on purpose: every text field gets a value of its own, whatever its pattern.
    settings = Settings.model_construct(None, **plain, chatops_pagerduty_secret=["value-of-pagerduty"])
    secrets = settings.secret_values()
    assert "value-of-pagerduty" in secrets and "CHATOPS_PAGERDUTY_SECRET" in SECRET_SETTINGS
    for name, value in plain.items():
        if value in secrets:
            assert name.upper() in SECRET_SETTINGS, name
    assert "value-of-password" in secrets and "REDIS_URL" in SECRET_SETTINGS


def test_network_policies_admit_only_the_web_port() -> None:
    objects = everything()
    for namespace in {o["metadata"]["namespace"] for o in workloads(objects)}:
        policies = [
            o for o in objects if o["kind"] == "NetworkPolicy" and o["metadata"]["namespace"] == namespace
        ]
        for obj in (o for o in workloads(objects) if o["metadata"]["namespace"] == namespace):
            labels = obj["spec"]["template"]["metadata"]["labels"]
            covering = [p for p in policies if _selects(p["spec"]["podSelector"], labels)]
            assert covering, obj["metadata"]["name"]
            rules = [rule for p in covering for rule in p["spec"]["ingress"]]
            if labels["app.kubernetes.io/component"] == "web":
                assert [rule["ports"] for rule in rules] == [[{"port": 3000, "protocol": "TCP"}]]
            else:
                assert rules == [], obj["metadata"]["name"]


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        assert expression["operator"] == "In"
        if labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


def test_socket_mode_stays_under_slacks_connection_limit() -> None:
    """Slack allows 10 Socket Mode connections per app, one per web process: replicas plus the
    rolling update's surge stay within it in every overlay."""
    for directory in OVERLAYS:
        web = next(
            o
            for o in rendered(directory)
            if o["kind"] == "Deployment" and o["metadata"]["name"] == "chatops-web"
        )
        assert web["spec"]["replicas"] + web["spec"]["strategy"]["rollingUpdate"]["maxSurge"] <= 10


def cpu_cores(quantity: str) -> float:
    """A Kubernetes CPU quantity ("500m", "1", "0.5") in cores."""
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


@pytest.mark.parametrize("directory", OVERLAYS, ids=lambda p: p.name)
def test_the_web_process_outweighs_a_worker_for_cpu(directory: Path) -> None:
    # A container's CPU request is its cgroup weight when a node's CPU is contended (docs/DEPLOY.md,
    # "CPU priority"): the web's acknowledgements must not wait behind a worker's runs.
    requests = {
        obj["metadata"]["name"]: cpu_cores(container["resources"]["requests"]["cpu"])
        for obj in workloads(rendered(directory))
        for container in containers(obj)
        if obj["kind"] == "Deployment"
    }
    assert requests["chatops-web"] >= 4 * requests["chatops-worker"], requests
