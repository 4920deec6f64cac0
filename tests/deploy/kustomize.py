"""A small kustomize renderer for the subset deploy/kubernetes uses, so the tests need no kubectl.

Supported, as kustomize does them: ``resources`` (YAML files and directories holding a
``kustomization.yaml``), ``namespace`` (on namespaced objects and on ServiceAccount subjects of
bindings), ``labels`` (``pairs`` on ``metadata.labels``; ``includeSelectors``/``includeTemplates``
refused), ``images`` (``newName``/``newTag`` on containers), ``replicas`` and ``patches`` (strategic
merge patches from files: maps merged, named lists merged by ``name``, other lists replaced). Any
other field is refused, so a kustomization using more fails here rather than rendering differently.
``test_kubernetes.py`` checks the result equals ``kubectl kustomize`` where kubectl is installed.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

Object = dict[str, Any]
SUPPORTED = {"apiVersion", "kind", "resources", "namespace", "labels", "images", "replicas", "patches"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume", "StorageClass"}
# Lists whose items kustomize merges by ``name`` (the strategic merge keys of the kinds used here).
NAMED_LISTS = {"containers", "initContainers", "env", "volumes", "volumeMounts", "ports"}


class KustomizeError(Exception):
    pass


def load_documents(path: Path) -> list[Object]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def render(directory: Path) -> list[Object]:
    """The objects ``kubectl kustomize DIRECTORY`` would print (in the order of the resources)."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(kustomization) - SUPPORTED
    if unknown:
        raise KustomizeError(f"{directory}: unsupported kustomization fields {sorted(unknown)}")
    objects: list[Object] = []
    for entry in kustomization.get("resources", []):
        path = (directory / entry).resolve()
        objects += render(path) if path.is_dir() else load_documents(path)
    for patch_entry in kustomization.get("patches", []):
        if set(patch_entry) != {"path"}:
            raise KustomizeError(f"{directory}: only file patches are supported: {patch_entry}")
        for patch in load_documents(directory / patch_entry["path"]):
            target = _find(objects, patch["kind"], patch["metadata"]["name"])
            objects[objects.index(target)] = merge(target, patch)
    for label in kustomization.get("labels", []):
        if label.get("includeSelectors") or label.get("includeTemplates"):
            raise KustomizeError(f"{directory}: labels with selectors or templates are not supported")
        for obj in objects:
            obj.setdefault("metadata", {}).setdefault("labels", {}).update(label["pairs"])
    for replica in kustomization.get("replicas", []):
        matches = [
            o for o in objects if o["metadata"]["name"] == replica["name"] and "replicas" in o.get("spec", {})
        ]
        if not matches:
            raise KustomizeError(f"{directory}: replicas for unknown {replica['name']}")
        for obj in matches:
            obj["spec"]["replicas"] = replica["count"]
    for image in kustomization.get("images", []):
        for container in (c for obj in objects for c in _containers(obj)):
            name, _, _tag = container["image"].partition(":")
            if name == image["name"]:
                new_name = image.get("newName", name)
                container["image"] = f"{new_name}:{image['newTag']}" if "newTag" in image else new_name
    namespace = kustomization.get("namespace")
    if namespace:
        for obj in objects:
            if obj["kind"] not in CLUSTER_SCOPED:
                obj["metadata"]["namespace"] = namespace
            for subject in obj.get("subjects", []):
                if subject.get("kind") == "ServiceAccount":
                    subject["namespace"] = namespace
    return objects


def merge(base: Any, patch: Any, key: str = "") -> Any:
    """A strategic merge patch of ``patch`` onto ``base`` (a copy)."""
    if isinstance(base, dict) and isinstance(patch, dict):
        merged = copy.deepcopy(base)
        for name, value in patch.items():
            merged[name] = merge(merged[name], value, name) if name in merged else copy.deepcopy(value)
        return merged
    if isinstance(base, list) and isinstance(patch, list) and key in NAMED_LISTS:
        merged_list, added = copy.deepcopy(base), []
        for item in patch:
            existing = next(
                (i for i, old in enumerate(merged_list) if old.get("name") == item.get("name")), None
            )
            if existing is None:
                added.append(copy.deepcopy(item))  # kustomize puts items new to the list first
            else:
                merged_list[existing] = merge(merged_list[existing], item)
        return [*added, *merged_list]
    return copy.deepcopy(patch)


def pod_spec(obj: Object) -> Object | None:
    spec = obj.get("spec", {})
    template = spec.get("template", {}).get("spec")
    return template if isinstance(template, dict) else None


def _containers(obj: Object) -> list[Object]:
    spec = pod_spec(obj)
    return [*spec.get("initContainers", []), *spec.get("containers", [])] if spec else []


def _find(objects: list[Object], kind: str, name: str) -> Object:
    for obj in objects:
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    raise KustomizeError(f"patch target {kind}/{name} not found")
