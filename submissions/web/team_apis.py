"""Teams through the API: your team on a task, creating one, inviting, joining, leaving and
removing members (the workflows are ``submissions/teams/services.py``). A team's name and members
are
public, as on the board; invite codes go only to the member who makes them."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from submissions.lifecycle import selectors
from submissions.models import Team
from submissions.teams.services import (
    team_create,
    team_invite_create,
    team_join,
    team_leave,
    team_member_remove,
)
from submissions.web.apis import NOT_FOUND

TEAM_REFUSED = OpenApiResponse(
    description="Refused ({detail: why}): the task takes no teams, teams are frozen, the team "
    "is full, the merge would exceed the task's quotas, or the invite is spent."
)

INVALID = OpenApiResponse(description="Invalid input ({field: [why]}).")


class TeamSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    name = serializers.CharField()
    task = serializers.SlugField(source="task.slug")
    members = serializers.SerializerMethodField()
    created_by = serializers.CharField(source="created_by.username", allow_null=True)

    def get_members(self, team: Team) -> list[str]:
        return [m.user.username for m in team.memberships.select_related("user")]


class TeamCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)


class InviteSerializer(serializers.Serializer):
    code = serializers.CharField()
    url = serializers.CharField(source="get_absolute_url")


class JoinSerializer(serializers.Serializer):
    code = serializers.CharField(max_length=32)


def _team(pk: int) -> Team:
    team = Team.objects.select_related("task", "created_by").filter(pk=pk).first()
    if team is None or team.task.is_hidden:
        raise Http404("No such team.")
    return team


class MyTeamApi(APIView):
    """Your team on a task (GET; 404 when you enter alone), or found one (POST)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(operation_id="tasks_team_get", responses={200: TeamSerializer, 404: NOT_FOUND})
    def get(self, request: Request, slug: str) -> Response:
        task = selectors.task_get_visible(slug=slug, user=request.user)
        team = selectors.team_of(user=request.user, task=task)
        if team is None:
            raise Http404("You enter this task alone.")
        return Response(TeamSerializer(team).data)

    @extend_schema(
        operation_id="tasks_team_create",
        request=TeamCreateSerializer,
        responses={201: TeamSerializer, 400: INVALID, 404: NOT_FOUND, 409: TEAM_REFUSED},
    )
    def post(self, request: Request, slug: str) -> Response:
        form = TeamCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        task = selectors.task_get_visible(slug=slug, user=request.user)
        team = team_create(user=request.user, task=task, name=form.validated_data["name"])
        return Response(TeamSerializer(team).data, status=status.HTTP_201_CREATED)


class TeamDetailApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses={200: TeamSerializer, 404: NOT_FOUND})
    def get(self, request: Request, pk: int) -> Response:
        return Response(TeamSerializer(_team(pk)).data)


class TeamInviteApi(APIView):
    """A single-use invite code (members only)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        request=None, responses={201: InviteSerializer, 404: NOT_FOUND, 409: TEAM_REFUSED}
    )
    def post(self, request: Request, pk: int) -> Response:
        invite = team_invite_create(user=request.user, team=_team(pk))
        return Response(InviteSerializer(invite).data, status=status.HTTP_201_CREATED)


class TeamJoinApi(APIView):
    """Accept an invite: join its team, with your submissions (and your team's, a merge)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        request=JoinSerializer, responses={200: TeamSerializer, 400: INVALID, 409: TEAM_REFUSED}
    )
    def post(self, request: Request) -> Response:
        form = JoinSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        team = team_join(user=request.user, code=form.validated_data["code"])
        return Response(TeamSerializer(team).data)


class TeamLeaveApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(request=None, responses={204: None, 404: NOT_FOUND, 409: TEAM_REFUSED})
    def post(self, request: Request, pk: int) -> Response:
        team_leave(user=request.user, team=_team(pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class TeamMemberRemoveApi(APIView):
    """The team's creator removes a member, who takes their uploads with them."""

    permission_classes = [IsAuthenticated]

    @extend_schema(request=None, responses={204: None, 404: NOT_FOUND, 409: TEAM_REFUSED})
    def delete(self, request: Request, pk: int, user_id: int) -> Response:
        team_member_remove(user=request.user, team=_team(pk), member_id=user_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
