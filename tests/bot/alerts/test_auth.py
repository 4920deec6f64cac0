"""Who may post alerts: the bearer token, and PagerDuty's HMAC signatures (rotation included)."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from bot.alerts.auth import MAX_SIGNATURES, bearer_ok, pagerduty_signature_ok

# PagerDuty's own test vector (go-pagerduty, webhookv3_test.go): the secret, the body and its signature.
PD_SECRET = "lDQHScfUeXUKaQRNF+8XIiDKZ7XX3itBAYzwU0TARw8lJqRnkKl2iB1anSb0Z+IK"
PD_BODY = b'{"event":{"id":"01BWDWL3NYY7LUFPZCC28QUCMK","event_type":"incident.priority_updated","resource_type":"incident","occurred_at":"2021-04-26T17:36:27.458Z","agent":{"html_url":"https://acme.pagerduty.com/users/PLH1HKV","id":"PLH1HKV","self":"https://api.pagerduty.com/users/PLH1HKV","summary":"Tenex Engineer","type":"user_reference"},"client":null,"data":{"id":"PGR0VU2","type":"incident","self":"https://api.pagerduty.com/incidents/PGR0VU2","html_url":"https://acme.pagerduty.com/incidents/PGR0VU2","number":2,"status":"triggered","title":"A little bump in the road","service":{"html_url":"https://acme.pagerduty.com/services/PF9KMXH","id":"PF9KMXH","self":"https://api.pagerduty.com/services/PF9KMXH","summary":"API Service","type":"service_reference"},"assignees":[{"html_url":"https://acme.pagerduty.com/users/PTUXL6G","id":"PTUXL6G","self":"https://api.pagerduty.com/users/PTUXL6G","summary":"User 123","type":"user_reference"}],"escalation_policy":{"html_url":"https://acme.pagerduty.com/escalation_policies/PUS0KTE","id":"PUS0KTE","self":"https://api.pagerduty.com/escalation_policies/PUS0KTE","summary":"Default","type":"escalation_policy_reference"},"teams":[{"html_url":"https://acme.pagerduty.com/teams/PFCVPS0","id":"PFCVPS0","self":"https://api.pagerduty.com/teams/PFCVPS0","summary":"Engineering","type":"team_reference"}],"priority":{"html_url":"https://acme.pagerduty.com/account/incident_priorities","id":"PSO75BM","self":"https://api.pagerduty.com/priorities/PSO75BM","summary":"P1","type":"priority_reference"},"urgency":"high","conference_bridge":{"conference_number":1000,"conference_url":"https://example.com"},"resolve_reason":null}}}'
PD_SIGNATURE = "v1=0c0b9495b893a39e70d1fea2fe11fbe0a825f88b9f67846f6cc07dd2bc5476cd"
PD_MISMATCH = "v1=7020c8a7ec668a9b7012bc3dd82e483394b038f4230acc6785efbf2a7d8bcaf5"  # the vector's wrong one


def sign(body: bytes, secret: str) -> str:
    return "v1=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


# --- bearer token ---


@pytest.mark.parametrize(
    "header",
    ["Bearer s3cret-token", "bearer s3cret-token", "BEARER s3cret-token", "  Bearer   s3cret-token  "],
)
def test_the_bearer_token_passes_whatever_the_case_of_the_scheme(header: str) -> None:
    assert bearer_ok(header, "s3cret-token")


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "s3cret-token",  # no scheme
        "Basic s3cret-token",
        "Token s3cret-token",
        "Bearer s3cret-tokenX",
        "Bearer s3cret-toke",
        "Bearer S3CRET-TOKEN",  # the token itself is case-sensitive
        "Bearer s3cret-token, Bearer other",
        "Bearers3cret-token",
        "Bearer s3cret-token\x00",
        "Bearer \u04553cret-token",  # a Cyrillic look-alike: compared as bytes, never normalised
        "Bearer " + "x" * 100_000,
    ],
)
def test_anything_but_the_exact_token_is_refused(header: str | None) -> None:
    assert not bearer_ok(header, "s3cret-token")


@pytest.mark.parametrize("header", [None, "", "Bearer ", "Bearer  ", "Bearer x"])
def test_an_empty_configured_token_refuses_everything(header: str | None) -> None:
    assert not bearer_ok(header, "")


def test_a_non_ascii_token_works_and_never_raises() -> None:
    assert bearer_ok("Bearer jeton-été", "jeton-été")
    assert not bearer_ok("Bearer jeton-ete", "jeton-été")
    assert not bearer_ok("Bearer \udcff", "jeton-été")  # a lone surrogate from a latin-1 decode


# --- PagerDuty signatures ---


def test_pagerdutys_own_test_vector_passes() -> None:
    assert pagerduty_signature_ok(PD_BODY, PD_SIGNATURE, [PD_SECRET])


def test_pagerdutys_mismatching_signature_and_a_changed_body_fail() -> None:
    assert not pagerduty_signature_ok(PD_BODY, PD_MISMATCH, [PD_SECRET])
    assert not pagerduty_signature_ok(PD_BODY + b" ", PD_SIGNATURE, [PD_SECRET])
    assert not pagerduty_signature_ok(PD_BODY.replace(b"high", b"low!"), PD_SIGNATURE, [PD_SECRET])


def test_during_a_rotation_either_configured_secret_passes() -> None:
    old, new = "old-secret", "new-secret"
    both = [old, new]

    assert pagerduty_signature_ok(PD_BODY, sign(PD_BODY, old), both)
    assert pagerduty_signature_ok(PD_BODY, sign(PD_BODY, new), both)
    assert not pagerduty_signature_ok(PD_BODY, sign(PD_BODY, old), [new])  # the old one retired


def test_any_of_several_signatures_in_the_header_may_match() -> None:
    # PagerDuty signs with each of its active secrets while it rotates: ours may be any of them.
    header = f"{sign(PD_BODY, 'theirs-only')},{PD_SIGNATURE}"

    assert pagerduty_signature_ok(PD_BODY, header, [PD_SECRET])
    assert pagerduty_signature_ok(PD_BODY, f"{PD_SIGNATURE}, {PD_MISMATCH}", [PD_SECRET])
    assert not pagerduty_signature_ok(PD_BODY, f"{PD_MISMATCH},{sign(PD_BODY, 'x')}", [PD_SECRET])


def test_signatures_of_other_versions_are_skipped_not_trusted() -> None:
    assert pagerduty_signature_ok(PD_BODY, f"v2=abc,{PD_SIGNATURE}", [PD_SECRET])
    assert not pagerduty_signature_ok(PD_BODY, PD_SIGNATURE.replace("v1=", "v2="), [PD_SECRET])


def test_upper_case_hex_is_the_same_signature() -> None:
    assert pagerduty_signature_ok(PD_BODY, "v1=" + PD_SIGNATURE[3:].upper(), [PD_SECRET])


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        ",",
        "v1=",
        "v1",
        PD_SIGNATURE[3:],  # no version
        PD_SIGNATURE + "00",  # too long
        PD_SIGNATURE[:-2],  # too short
        PD_SIGNATURE[:-1] + "g",  # not hex
        f"{PD_SIGNATURE[:-1]}g,{PD_SIGNATURE}",  # one broken v1 spoils the header
        "V1=" + PD_SIGNATURE[3:],
        "v1 = " + PD_SIGNATURE[3:],
        PD_SIGNATURE + ";" + PD_MISMATCH,
        "v1=" + "0" * 64 + "\x00",
        ",".join([PD_MISMATCH] * MAX_SIGNATURES + [PD_SIGNATURE]),  # too many to be PagerDuty's
        "v1=" + "a" * 100_000,
    ],
)
def test_a_malformed_header_is_refused_without_raising(header: str | None) -> None:
    assert not pagerduty_signature_ok(PD_BODY, header, [PD_SECRET])


@pytest.mark.parametrize("secrets", [[], [""], ["", ""]])
def test_no_configured_secret_refuses_every_delivery(secrets: list[str]) -> None:
    assert not pagerduty_signature_ok(PD_BODY, PD_SIGNATURE, secrets)
    assert not pagerduty_signature_ok(PD_BODY, sign(PD_BODY, ""), secrets)  # not even signed with ""


def test_an_empty_secret_next_to_a_real_one_is_ignored() -> None:
    assert pagerduty_signature_ok(PD_BODY, PD_SIGNATURE, ["", PD_SECRET])
    assert not pagerduty_signature_ok(PD_BODY, sign(PD_BODY, ""), ["", PD_SECRET])


def test_an_empty_body_is_checked_like_any_other() -> None:
    assert pagerduty_signature_ok(b"", sign(b"", "s"), ["s"])
    assert not pagerduty_signature_ok(b"", PD_SIGNATURE, [PD_SECRET])
