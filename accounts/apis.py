"""Token API: trade a username and password for a new named token; list and revoke tokens."""

from __future__ import annotations

from django.contrib.auth import authenticate
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api_serializers import (
    ApiTokenSerializer,
    NewTokenSerializer,
    TokenObtainSerializer,
)
from accounts.selectors import api_tokens_of
from accounts.services import (
    api_token_create,
    api_token_revoke,
    login_attempt_begin,
    login_attempt_succeeded,
)
from plumbing.throttles import RateLimited

BAD_CREDENTIALS = "Unable to log in with provided credentials."


class TokenObtainApi(APIView):
    """POST username and password: a new token, its secret shown in this response only.

    Log-in attempts here count against the same per-account and per-address limits as the page.
    """

    permission_classes = [AllowAny]
    authentication_classes: list[type] = []

    @extend_schema(
        request=TokenObtainSerializer,
        responses={
            200: NewTokenSerializer,
            400: OpenApiResponse(description="Missing fields or wrong credentials."),
            409: OpenApiResponse(description="You hold the most active tokens allowed."),
        },
    )
    def post(self, request: Request) -> Response:
        form = TokenObtainSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        username = form.validated_data["username"]
        refusal = login_attempt_begin(request=request, username=username)
        if refusal is not None:
            raise RateLimited(refusal)
        user = authenticate(request, username=username, password=form.validated_data["password"])
        if user is None:
            raise ValidationError({"non_field_errors": [BAD_CREDENTIALS]})
        login_attempt_succeeded(request=request, username=username)
        new = api_token_create(user=user, name=form.validated_data["name"])
        return Response({"token": new.secret, **ApiTokenSerializer(new.token).data})


class TokenListApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses={200: ApiTokenSerializer(many=True)})
    def get(self, request: Request) -> Response:
        tokens = api_tokens_of(user=request.user, active_only=True)
        return Response(ApiTokenSerializer(tokens, many=True).data)


class TokenRevokeApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        request=None,
        responses={204: None, 404: OpenApiResponse(description="No such active token of yours.")},
    )
    def delete(self, request: Request, pk: int) -> Response:
        if not api_token_revoke(user=request.user, token_id=pk):
            raise Http404("No such active token of yours.")
        return Response(status=status.HTTP_204_NO_CONTENT)
