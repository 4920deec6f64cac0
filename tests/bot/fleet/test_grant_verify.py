"""A grant signs the SHA-256 of the check and undo its card showed (issue 34); a grant for a call
that declares none signs exactly what it signed before."""

from __future__ import annotations

import json

from bot.fleet.grants import Grant, GrantSigner, arguments_sha256, sha256_text

FACTS = {
    "approval_id": "a1",
    "execution": "run:x1",
    "tool": "kube_scale",
    "args_sha256": "0" * 64,
    "target": "k8s-prod",
    "confirmed_by": "U_BOB",
}
VERIFY = '{"check":{"arguments":"{\\"workload\\":\\"api\\"}","tool":"kube_replicas"}}'


def signer() -> GrantSigner:
    return GrantSigner(b"secret", 300.0, clock=lambda: 1000.0)


def test_the_grant_binds_the_approved_check_and_undo() -> None:
    grant = Grant.decode(signer().sign(**FACTS, verify=VERIFY))
    assert grant is not None and grant.verify_sha256 == sha256_text(VERIFY)
    plain = Grant.decode(signer().sign(**FACTS))
    assert plain is not None and plain.verify_sha256 == ""
    assert b"verify_sha256" not in plain.payload()  # as signed before checks existed
    assert grant.mac != plain.mac


def test_a_check_hash_changed_in_a_grant_breaks_its_signature() -> None:
    text = signer().sign(**FACTS, verify=VERIFY)
    forged = json.dumps({**json.loads(text), "verify_sha256": sha256_text("{}")})
    arguments: dict[str, object] = {"confirmed_by": "U_BOB"}
    problem = signer().problem(
        forged, tool="kube_scale", arguments=arguments, target="k8s-prod", execution="run:x1"
    )
    assert problem == "its approval grant is not signed with this runner's secret"


def test_a_host_refuses_a_grant_for_another_check_or_undo_than_its_own_tool_declares() -> None:
    # A hostile worker (or model) that had the card show another check or undo than the host's
    # declaration derives: the grant is signed and genuine, the host still refuses it.
    facts = {**FACTS, "args_sha256": arguments_sha256({})}
    text = signer().sign(**facts, verify=VERIFY)
    arguments: dict[str, object] = {"confirmed_by": "U_BOB"}
    call = {"tool": "kube_scale", "arguments": arguments, "target": "k8s-prod", "execution": "run:x1"}
    assert signer().problem(text, **call, verify=VERIFY) is None
    other = VERIFY.replace("kube_replicas", "kube_pods")
    assert signer().problem(text, **call, verify=other) == (
        "its approval grant is for another check and undo"
    )
    assert signer().problem(text, **call, verify="") == ("its approval grant is for another check and undo")
    bare = signer().sign(**facts)
    assert signer().problem(bare, **call, verify=VERIFY) == (
        "its approval grant is for another check and undo"
    )
    assert signer().problem(bare, **call, verify="") is None
