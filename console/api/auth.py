"""`Authorization: Token <token>` against the people's hashed API tokens (governance.ApiToken).

Only a token's SHA-256 is stored, so a token is looked up by its digest. A revoked token, or
one of a deactivated user, is refused with 401 like an unknown one.
"""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from governance.selectors import api_token_active
from governance.services import api_token_touch

MESSAGE_INVALID_TOKEN = "Invalid token."  # noqa: S105 - a message, not a secret


class ApiTokenAuthentication(TokenAuthentication):
    keyword = "Token"

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        token = api_token_active(token=key)
        if token is None:
            raise exceptions.AuthenticationFailed(MESSAGE_INVALID_TOKEN)
        api_token_touch(token=token)
        return token.user, token
