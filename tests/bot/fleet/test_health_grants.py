"""The health URL a restart's check requests is derived alike by the worker (for the card and the
grant) and by the host that verifies the grant: the runner, or the worker before a Kubernetes (or
SSH) call, each from the same inventory entry."""

from __future__ import annotations

from pathlib import Path

import redis

from agent.tooling import call_verification
from bot.fleet.direct_grants import GrantCheckedRoute
from bot.fleet.grants import declared_verify
from bot.keys import Keys
from tests.bot.fleet.test_routing import STAGING, WEB, fleet_tools, write_inventory
from tools.builtin.services import make_backend, service_tools
from tools.targets import TargetedTool

URL = "http://10.0.0.3:8000/healthz"


def test_the_worker_and_the_runner_derive_the_same_health_check(
    tmp_path: Path, redis_client: redis.Redis, keys: Keys
) -> None:
    web = {**WEB, "health": {"api": URL}}
    kube = {**STAGING, "health": {"web": URL}}
    tools = fleet_tools(tmp_path, redis_client, keys, write_inventory(tmp_path, web, kube))
    [runner_restart] = [
        t for t in service_tools(make_backend("systemd", {})) if t.definition.name == "service_restart"
    ]
    routed = tools["service_restart"]
    assert isinstance(routed, TargetedTool)
    kube_route = routed._resolve('{"target": "staging", "service": "web"}')
    assert not isinstance(kube_route, str) and isinstance(kube_route.route, GrantCheckedRoute)
    hosts = (
        ("web-03", "api", web["health"], runner_restart),  # the runner's own registry's tool
        ("staging", "web", kube["health"], kube_route.route.inner),  # the worker's Kubernetes route
    )
    for target, service, health, own in hosts:
        carded = call_verification(routed, f'{{"target": "{target}", "service": "{service}"}}')
        assert carded is not None and carded.health is not None and URL in carded.health.arguments, target
        # the host's own derivation, from the same inventory entry: what the grant must have signed
        assert declared_verify(own, {"service": service}, target, health) == carded.to_json()
        # a host that did not know the URL would derive another, and refuse the grant
        assert declared_verify(own, {"service": service}, target) != carded.to_json()
    # a service without a URL, and a target without any, keep the plain check
    plain = call_verification(tools["service_restart"], '{"target": "web-03", "service": "nginx"}')
    assert plain is not None and plain.health is None
