"""Who may post alerts and deploy markers: a bearer token (Alertmanager, Grafana, ``POST /changes``,
Argo CD), PagerDuty's body signature, or GitHub's.

Both checks answer a plain bool and never raise, whatever the header holds: the receiver turns
``False`` into one 401/403 without telling a prober which part was wrong.

* ``bearer_ok``: ``Authorization: Bearer <token>`` (the scheme in any case, as RFC 9110 says),
  compared in constant time. Both sides are hashed first, so not even the token's length leaks
  through timing. An empty configured token refuses everything: an unset
  ``CHATOPS_ALERTS_TOKEN`` must never mean "open to anyone".
* ``pagerduty_signature_ok``: ``X-PagerDuty-Signature`` carries ``v1=<hex HMAC-SHA256 of the raw
  body>`` per active secret, comma-separated while a secret is rotated. Any ``v1`` signature
  matching any configured secret passes; other versions are skipped (PagerDuty may add some).
  Every configured secret is tried against every signature with ``hmac.compare_digest`` and no
  early exit, so the time taken does not say which secret matched.
* ``github_signature_ok``: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>``
  under the webhook's secret (GitHub's "Validating webhook deliveries"), compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Sequence

_SIGNATURE = re.compile(r"v1=([0-9a-fA-F]{64})")
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
MAX_SIGNATURES = 16  # PagerDuty sends one per active secret; hundreds would only cost us time


def bearer_ok(header_value: str | None, token: str) -> bool:
    """Whether ``header_value`` (the ``Authorization`` header) is ``Bearer <token>``."""
    if not token or header_value is None:
        return False
    scheme, _, credentials = header_value.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    given = hashlib.sha256(credentials.strip().encode("utf-8", "surrogatepass")).digest()
    expected = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
    return hmac.compare_digest(given, expected)


def pagerduty_signature_ok(body: bytes, header: str | None, secrets: Sequence[str]) -> bool:
    """Whether a ``v1=`` signature of ``header`` is the HMAC-SHA256 of ``body`` under a secret."""
    keys = [secret for secret in secrets if secret]
    if not header or not keys:
        return False
    signatures = _signatures(header)
    if not signatures:
        return False
    matched = False
    for key in keys:
        expected = hmac.new(key.encode("utf-8"), body, hashlib.sha256).digest()
        for signature in signatures:
            matched |= hmac.compare_digest(expected, signature)
    return matched


def github_signature_ok(body: bytes, header: str | None, secret: str) -> bool:
    """Whether ``header`` (``X-Hub-Signature-256``) is ``sha256=`` and the body's HMAC under ``secret``."""
    if not secret or not header:
        return False
    scheme, _, given = header.strip().partition("=")
    if scheme != "sha256" or not _HEX64.fullmatch(given):
        return False
    expected = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).digest()
    return hmac.compare_digest(expected, bytes.fromhex(given))


def _signatures(header: str) -> list[bytes]:
    """The ``v1`` signatures of the header; none when it is malformed or holds too many."""
    items = header.split(",")
    if len(items) > MAX_SIGNATURES:
        return []
    found = []
    for item in items:
        match = _SIGNATURE.fullmatch(item.strip())
        if match:
            found.append(bytes.fromhex(match.group(1)))
        elif item.strip().startswith("v1="):
            return []  # a v1 signature that is not 64 hex digits: a broken or forged header
    return found
