"""The environments of the demo's children: what all share, what the bot adds, what a runner keeps.

``common_env`` is the shell's environment without the settings the demo makes itself (``SLACK_*``,
``CHATOPS_*``, ``LLM_*``, ``WEB_*``, ``REDIS_URL``, ``PORT``: a developer's ``.env`` habits must
not leak into the demo), plus Redis, the session's key prefix and queue, the inventory and the
runner secret, and the demo's tool catalog (``emulator.demo.catalog``). ``bot_env`` adds, for
``chatops web`` and ``chatops worker``, Slack, the model, the run settings and the demo's
Prometheus (``CHATOPS_PROMETHEUS_URL``: ``prometheus_query`` / ``prometheus_range`` run on the
worker, whose egress reaches exactly that address), and no host: they run no host tool themselves. ``runner_env`` makes one host's
runner: its log directory, its ``systemctl`` first on ``PATH``, its host's root for the change scan
(``CHATOPS_CHANGES_ROOT``), and no Slack or model credential:
every Slack and LLM setting and anything else named like a credential (``*_TOKEN``,
``*_API_KEY``, ``*SECRET*`` ...) is dropped, but the runner secret it needs to verify approvals.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from emulator.demo.host import DemoHost

ROOT = Path(__file__).resolve().parent.parent
RUNNER_SECRET_VARIABLE = "CHATOPS_RUNNER_SECRET"
# Settings the children must not inherit from the shell: the demo sets its own.
_OWN_PREFIXES = ("SLACK_", "CHATOPS_", "LLM_", "WEB_")
_OWN_NAMES = ("REDIS_URL", "PORT")
_PASSED_THROUGH = ("CHATOPS_WORKER_NICE",)
# What a runner must not hold: the bot's channels to Slack and the models, and credentials.
_NOT_FOR_RUNNERS = ("SLACK_", "LLM_", "OPENAI_", "ANTHROPIC_", "AZURE_OPENAI_", "WEB_")
_CREDENTIAL_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|CREDENTIAL|PRIVATE_KEY", re.IGNORECASE)


def common_env(
    *,
    redis_url: str,
    key_prefix: str,
    queue: str,
    inventory: Path,
    runner_secret: str,
    tools_file: Path | None = None,
    shell: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """What every child shares (``shell`` defaults to this process's environment)."""
    shell = os.environ if shell is None else shell
    env = {k: v for k, v in shell.items() if not k.startswith(_OWN_PREFIXES) and k not in _OWN_NAMES}
    # The one setting of the shell the demo keeps: where the worker's CPU priority is chosen (a test
    # suite on a busy machine keeps its workers at its own priority; tests/conftest.py).
    env.update({k: shell[k] for k in _PASSED_THROUGH if k in shell})
    pythonpath = [str(ROOT), *filter(None, [shell.get("PYTHONPATH")])]
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(pythonpath),
            "PYTHONUNBUFFERED": "1",
            "REDIS_URL": redis_url,
            "CHATOPS_REDIS_PREFIX": key_prefix,
            "CHATOPS_QUEUE": queue,
            "CHATOPS_INVENTORY_FILE": str(inventory),
            RUNNER_SECRET_VARIABLE: runner_secret,
        }
    )
    if tools_file is not None:  # the runners execute it, the worker offers its schemas to the model
        env["CHATOPS_TOOLS_FILE"] = str(tools_file)
    env.setdefault("PATH", os.defpath)
    return env


def bot_env(
    common: Mapping[str, str],
    *,
    bot_token: str,
    signing_secret: str,
    slack_api_url: str,
    llm: Mapping[str, str],
    prometheus_url: str = "",
) -> dict[str, str]:
    """``chatops web``'s and ``chatops worker``'s: Slack, the model (``llm``), the run settings and
    the demo's Prometheus (``prometheus_url``, none when empty)."""
    prometheus = {"CHATOPS_PROMETHEUS_URL": prometheus_url} if prometheus_url else {}
    return {
        **common,
        "SLACK_BOT_TOKEN": bot_token,
        "SLACK_SIGNING_SECRET": signing_secret,
        "SLACK_API_URL": slack_api_url,
        "CHATOPS_RETENTION_DAYS": "1",
        "CHATOPS_LEASE_TTL_SECONDS": "10",
        "WEB_WORKERS": "1",
        "WEB_THREADS": "8",
        **prometheus,
        **llm,
    }


def runner_env(common: Mapping[str, str], host: DemoHost) -> dict[str, str]:
    """``chatops runner --target NAME``'s for ``host``: ``common`` without any Slack, model or other
    credential, plus the host's log directory and ``systemctl``."""
    env = {
        name: value
        for name, value in common.items()
        if name == RUNNER_SECRET_VARIABLE
        or not (name.startswith(_NOT_FOR_RUNNERS) or _CREDENTIAL_NAME.search(name))
    }
    env["CHATOPS_LOG_DIRS"] = str(host.log_dir)
    env["CHATOPS_SERVICE_BACKEND"] = "systemd"
    env["CHATOPS_RUNNER_STATE_DIR"] = str(
        host.root / "var" / "lib" / "chatops-runner"
    )  # grants, change scans
    env["CHATOPS_CHANGES_ROOT"] = str(host.root)  # its change scan reads the simulated host, never this one
    env["CHATOPS_CHANGES_SCAN_SECONDS"] = "5"  # an edit on the page shows up while people watch
    env["PATH"] = os.pathsep.join([str(host.bin_dir), common.get("PATH", os.defpath)])
    return env
