"""Challenges through the API: the list, one challenge with its phases in order (the current
one marked), and registering for it. The rules are ``submissions/challenges/``."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import JSONParser
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from plumbing.request_params import params_validated
from submissions.challenges import selectors
from submissions.challenges.registration import is_registered
from submissions.challenges.services import challenge_register
from submissions.models import Challenge, ChallengeRegistration
from submissions.web.fact_sheet_apis import StrictBooleanField

NOT_FOUND = OpenApiResponse(description="No such challenge visible to you.")
REFUSED = OpenApiResponse(
    description="Invalid ({field: [why]}: terms not accepted, not your team) or not allowed "
    "(403 {detail: why}: your e-mail's domain is not admitted)."
)


class PhaseSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    task = serializers.SlugField(source="task.slug")
    title = serializers.CharField(source="task.title")
    state = serializers.ChoiceField(choices=["upcoming", "current", "closed"])
    opens_at = serializers.DateTimeField(source="task.opens_at", allow_null=True)
    closes_at = serializers.DateTimeField(source="task.closes_at", allow_null=True)
    leaderboard = serializers.CharField(help_text="The phase's leaderboard in the API.")


class ChallengeSerializer(serializers.ModelSerializer):
    class Meta:
        model = Challenge
        fields = ["slug", "title", "starts_at", "ends_at", "visibility", "requires_approval"]


class AnnouncementSerializer(serializers.Serializer):
    title = serializers.CharField()
    body = serializers.CharField(help_text="Markdown.")
    posted_at = serializers.DateTimeField()


class ChallengeDetailSerializer(serializers.Serializer):
    slug = serializers.SlugField()
    title = serializers.CharField()
    starts_at = serializers.DateTimeField(allow_null=True)
    ends_at = serializers.DateTimeField(allow_null=True)
    visibility = serializers.ChoiceField(choices=Challenge.Visibility.values)
    requires_approval = serializers.BooleanField()
    overview = serializers.CharField(help_text="Markdown.")
    rules = serializers.CharField(help_text="Markdown.")
    terms = serializers.CharField(help_text="Markdown: what registering accepts.")
    phases = PhaseSerializer(many=True)
    registration = serializers.CharField(
        allow_null=True,
        help_text="Your registration's status (approved, pending, rejected); null: none.",
    )
    registered = serializers.BooleanField(help_text="Whether you may submit to its phases.")
    announcements = AnnouncementSerializer(many=True, help_text="The organisers', newest first.")


class RegistrationSerializer(serializers.ModelSerializer):
    challenge = serializers.SlugField(source="challenge.slug", read_only=True)
    team = serializers.CharField(source="team.name", allow_null=True, read_only=True)

    class Meta:
        model = ChallengeRegistration
        fields = ["challenge", "team", "status", "terms_accepted_at"]


class RegisterSerializer(serializers.Serializer):
    accept_terms = StrictBooleanField(help_text="Must be true: you accept the terms.")
    team = serializers.IntegerField(required=False, allow_null=True, default=None)


class ChallengeListApi(APIView):
    permission_classes = [AllowAny]

    @extend_schema(responses=ChallengeSerializer(many=True))
    def get(self, request: Request) -> Response:
        challenges = selectors.challenge_list_visible(user=request.user)
        return Response(ChallengeSerializer(challenges, many=True).data)


def _phases(challenge: Challenge) -> list[dict[str, Any]]:
    return [
        {**vars(p), "leaderboard": f"/api/tasks/{p.task.slug}/leaderboard/"}
        for p in selectors.challenge_timeline(challenge=challenge)
    ]


class ChallengeDetailApi(APIView):
    permission_classes = [AllowAny]

    @extend_schema(responses={200: ChallengeDetailSerializer, 404: NOT_FOUND})
    def get(self, request: Request, slug: str) -> Response:
        challenge = selectors.challenge_get_visible(slug=slug, user=request.user)
        mine = selectors.registration_of(user=request.user, challenge=challenge)
        data = {
            **ChallengeSerializer(challenge).data,
            "overview": challenge.overview,
            "rules": challenge.rules,
            "terms": challenge.terms,
            "phases": _phases(challenge),
            "registration": mine.status if mine else None,
            "registered": is_registered(user=request.user, challenge=challenge),
            "announcements": selectors.challenge_announcements(challenge_id=challenge.pk),
        }
        return Response(ChallengeDetailSerializer(data).data)


class ChallengeRegistrationApi(APIView):
    permission_classes = [IsAuthenticated]
    parser_classes = [JSONParser]  # accept_terms is a JSON boolean, never the string "true"

    @extend_schema(
        request=RegisterSerializer,
        responses={201: RegistrationSerializer, 400: REFUSED, 403: REFUSED, 404: NOT_FOUND},
    )
    def post(self, request: Request, slug: str) -> Response:
        form = params_validated(RegisterSerializer, request.data)
        challenge = selectors.challenge_get_visible(slug=slug, user=request.user)
        registration = challenge_register(
            user=request.user,
            challenge_id=challenge.pk,
            accept_terms=form["accept_terms"],
            team_id=form["team"],
        )
        return Response(RegistrationSerializer(registration).data, status=status.HTTP_201_CREATED)
