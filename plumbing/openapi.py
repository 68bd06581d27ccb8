"""The OpenAPI schema class: responses that every operation can give, documented in one place."""

from __future__ import annotations

from typing import Any

from django.core.validators import ProhibitNullCharactersValidator
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse

THROTTLED = OpenApiResponse(description="Too many requests; see the Retry-After header.")
UNAUTHENTICATED = OpenApiResponse(description="Sign in, or send a valid API token.")
BAD_REQUEST = OpenApiResponse(description="Refused: {field: [why]}.")
NO_NUL_PATTERN = "^[^\\u0000]*$"  # ECMA regex, as drf-spectacular writes its patterns


class PortalAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema, plus the answers that every view of a kind can give.

    Every view that authenticates answers 401 to a wrong or revoked token, even where no sign-in
    is needed; every API view is throttled (REST_FRAMEWORK's DEFAULT_THROTTLE_CLASSES; the token
    endpoint also answers 429 from the log-in limiter). These belong to the schema of every such
    operation rather than to the few views that remembered to list them.
    """

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        for code, response, applies in (
            ("401", UNAUTHENTICATED, bool(self.view.get_authenticators())),
            ("429", THROTTLED, bool(self.view.get_throttles())),
        ):
            if applies and code not in responses:
                responses[code] = self._get_response_for_code(response, code, direction=direction)
        return responses

    def _map_basic_serializer(self, serializer: Any, direction: Any) -> dict[str, Any]:
        """A serializer's ``Meta.omitted_sometimes`` fields are left out of ``required``: its
        ``to_representation`` drops them in some answers (e.g. private scores until revealed)."""
        schema: dict[str, Any] = super()._map_basic_serializer(serializer, direction)
        omitted = set(getattr(getattr(serializer, "Meta", None), "omitted_sometimes", ()))
        if omitted and schema.get("required"):
            schema["required"] = [name for name in schema["required"] if name not in omitted]
            if not schema["required"]:
                del schema["required"]
        return schema

    def _insert_field_validators(self, field: Any, schema: dict[str, Any]) -> None:
        """A string field says in its schema what DRF's CharField refuses: NUL characters."""
        super()._insert_field_validators(field, schema)
        refuses_nul = any(isinstance(v, ProhibitNullCharactersValidator) for v in field.validators)
        if refuses_nul and schema.get("type") == "string" and "pattern" not in schema:
            schema["pattern"] = NO_NUL_PATTERN
