"""One key per target: HMAC(``CHATOPS_RUNNER_SECRET``, target) signs and checks all that concerns it.

The web process and the workers hold the secret and derive each target's key: a grant for web-03
is signed with web-03's key, so is every job sent to web-03's queue, and web-03's runner seals its
results with it. A runner needs only its own target's key, and can be given only that
(``CHATOPS_RUNNER_KEY``, printed by ``chatops runner --target NAME --print-key`` where the secret
is): a compromised runner host then cannot sign a job, a grant or a result for any other target.
A runner given the secret derives its key at start and uses nothing else.
"""

from __future__ import annotations

import hashlib
import hmac

_DOMAIN = b"chatops runner target key v1\n"


def target_key(secret: bytes, target: str) -> bytes:
    """The key of ``target`` under the master secret."""
    return hmac.new(secret, _DOMAIN + target.encode(), hashlib.sha256).digest()
