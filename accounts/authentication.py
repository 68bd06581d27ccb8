"""DRF authentication by named API token: ``Authorization: Token <secret>`` (or ``Bearer``)."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from accounts.services import api_token_authenticate

KEYWORDS = (b"token", b"bearer")


class ApiTokenAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() not in KEYWORDS:
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed(
                "Invalid Authorization header: use 'Token <token>' with no spaces in the token."
            )
        try:
            secret = parts[1].decode()
        except UnicodeError as exc:
            raise exceptions.AuthenticationFailed("The token contains invalid characters.") from exc
        token = api_token_authenticate(secret=secret)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return "Token"
