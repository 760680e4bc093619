"""A JWT's time claims must be numbers (issue 26, finding 10).

RFC 7519 §2 makes ``exp``, ``nbf`` and ``iat`` NumericDates: JSON numbers. PyJWT reads them with
``int()``, so ``"exp": "1796193485"`` (a string) or ``"exp": true`` passed as a time; the server refuses
such a token with 401 ``invalid_token`` naming the claim, before the token is trusted for anything.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.builders import bearer
from tests.http.test_auth_http import claims, hs, jwt_server, unauthenticated

__all__ = ["jwt_server"]  # the live JWT server fixture, shared with test_auth_http

LATER = int(time.time()) + 300


@pytest.mark.parametrize(("changes", "claim"), [
    ({"exp": str(LATER)}, "exp"),
    ({"exp": "1796193485"}, "exp"),
    ({"exp": True}, "exp"),
    ({"nbf": "0"}, "nbf"),
    ({"nbf": False}, "nbf"),
    ({"iat": str(int(time.time()))}, "iat"),
], ids=["exp-string-soon", "exp-string-as-filed", "exp-true", "nbf-string", "nbf-false", "iat-string"])
async def test_a_time_claim_that_is_not_a_number_is_refused(jwt_server, changes: dict[str, Any], claim: str):
    token = hs(claims(**changes))
    async with jwt_server.client() as client:
        response = await client.get("/v1/me", headers=bearer(token))
        run = await client.post("/v1/ag-ui", headers=bearer(token), json={
            "threadId": "t", "runId": "r", "messages": [{"id": "u1", "role": "user", "content": "hi"}],
            "tools": [], "context": [], "state": {}, "forwardedProps": {}})
    assert response.status_code == 401 and run.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer error="invalid_token"'
    assert response.json() == unauthenticated(f"the token's {claim!r} claim is not a number")
    assert await jwt_server.ctx.ledger.get_thread("t") is None
