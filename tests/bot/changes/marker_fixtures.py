"""What the deploy marker tests send: an inventory, our body, GitHub's and Argo CD's, signed or not."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime
from typing import Any

TOKEN = "changes-token-0123456789abcdef"
GITHUB_SECRET = "github-secret-0123456789"
RUNNER_SECRET = "r" * 32
INVENTORY = {
    "targets": [
        {"name": "web-01", "via": "runner", "labels": {"env": "production", "role": "web"}},
        {"name": "web-02", "via": "runner", "labels": {"env": "production", "role": "web"}},
        {"name": "db-01", "via": "runner", "labels": {"env": "production", "role": "db"}},
        {"name": "stage-01", "via": "runner", "labels": {"env": "staging", "namespace": "shop"}},
        {"name": "shop-k8s", "via": "kubernetes", "kubernetes": {"namespace": "shop"}},
    ]
}


def rfc3339(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def hub_signature(body: bytes, secret: str = GITHUB_SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def github_body(
    at: float,
    *,
    state: str = "success",
    environment: str = "production",
    payload: Any = None,
    status_id: int = 209916254,
) -> bytes:
    """A ``deployment_status`` event in the shape GitHub sends (octokit/webhooks' payload example,
    with fewer of the repository's URLs)."""
    user = {"login": "octocat", "id": 21031067, "type": "User", "site_admin": False}
    created = rfc3339(at)
    return json.dumps(
        {
            "action": "created",
            "deployment_status": {
                "url": f"https://api.github.com/repos/acme/api/deployments/145988746/statuses/{status_id}",
                "id": status_id,
                "node_id": "MDE2OkRlcGxveW1lbnRTdGF0dXMyMDk5MTYyNTQ=",
                "state": state,
                "creator": user,
                "description": "",
                "environment": environment,
                "target_url": "https://github.com/acme/api/actions/runs/42",
                "created_at": created,
                "updated_at": created,
                "deployment_url": "https://api.github.com/repos/acme/api/deployments/145988746",
                "repository_url": "https://api.github.com/repos/acme/api",
            },
            "deployment": {
                "url": "https://api.github.com/repos/acme/api/deployments/145988746",
                "id": 145988746,
                "node_id": "MDEwOkRlcGxveW1lbnQxNDU5ODg3NDY=",
                "sha": "f95f852bd8fca8fcc58a9a2d6c842781e32a215e",
                "ref": "v1.4.2",
                "task": "deploy",
                "payload": {} if payload is None else payload,
                "original_environment": environment,
                "environment": environment,
                "description": None,
                "creator": user,
                "created_at": created,
                "updated_at": created,
                "statuses_url": "https://api.github.com/repos/acme/api/deployments/145988746/statuses",
                "repository_url": "https://api.github.com/repos/acme/api",
                "performed_via_github_app": None,
            },
            "repository": {
                "id": 186853002,
                "name": "api",
                "full_name": "acme/api",
                "private": True,
                "html_url": "https://github.com/acme/api",
            },
            "sender": user,
        }
    ).encode()


def argocd_body(
    at: float | None, *, phase: str = "Succeeded", namespace: str = "shop", **extra: str
) -> bytes:
    """What the docs' Argo CD template renders (docs/CHANGES.md "Deploy markers")."""
    return json.dumps(
        {
            "app": "shop-api",
            "namespace": namespace,
            "revision": "9b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c",
            "phase": phase,
            "sync_status": "Synced",
            "health": "Healthy",
            "finished_at": rfc3339(at) if at is not None else "<no value>",
            "who": "<no value>",
            "url": "https://argocd.example.com/applications/shop-api",
            **extra,
        }
    ).encode()
