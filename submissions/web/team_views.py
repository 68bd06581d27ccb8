"""Team pages: your team on a task (create, invite, leave, remove), a team's public page (name
and members), and the invite link's page (accept). The workflows are
``submissions/teams/services.py``."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from plumbing.refusal_responses import attempt
from submissions.lifecycle import selectors
from submissions.models import Task, Team, TeamInvite
from submissions.teams.services import (
    TeamRefused,
    team_create,
    team_invite_create,
    team_join,
    team_leave,
    team_member_remove,
)
from submissions.web.views import visible_task


def _member_id(request: HttpRequest) -> int:
    member = request.POST.get("member", "")
    if not member.isdigit():
        raise TeamRefused("That request was not understood.")
    return int(member)


def _act(request: HttpRequest, task: Task, team: Team | None) -> TeamInvite | None:
    """One POST of the team page: create, invite, leave or remove; the new invite, if any."""
    action = request.POST.get("action", "")
    if action == "create":
        team_create(user=request.user, task=task, name=request.POST.get("name", ""))
    elif team is None:
        raise TeamRefused("You are not in a team on this task.")
    elif action == "invite":
        return team_invite_create(user=request.user, team=team)
    elif action == "leave":
        team_leave(user=request.user, team=team)
    elif action == "remove":
        team_member_remove(user=request.user, team=team, member_id=_member_id(request))
    return None


@login_required
def my_team(request: HttpRequest, slug: str) -> HttpResponse:
    task = visible_task(request, slug)
    invite = None
    if request.method == "POST":
        team = selectors.team_of(user=request.user, task=task)
        invite = attempt(request, lambda: _act(request, task, team))
        if invite is None:
            return redirect("task-team", slug=slug)
    team = selectors.team_of(user=request.user, task=task)
    context = {"task": task, "team": team, "invite": invite, "members": _members(team)}
    return render(request, "submissions/team.html", context)


def _members(team: Team | None) -> list[object]:
    return list(team.memberships.select_related("user")) if team is not None else []


def team_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """Public: the team's name and members, as its board row stands for them."""
    team = Team.objects.select_related("task").filter(pk=pk, task__is_hidden=False).first()
    if team is None:
        raise Http404("No such team.")
    context = {"task": team.task, "team": team, "members": _members(team), "public": True}
    return render(request, "submissions/team.html", context)


@login_required
def team_join_view(request: HttpRequest, code: str) -> HttpResponse:
    invite = TeamInvite.objects.select_related("team__task").filter(code=code).first()
    if invite is None or invite.team.task.is_hidden:
        raise Http404("This invite code is unknown, or its team was disbanded.")
    if request.method == "POST":
        team = attempt(request, lambda: team_join(user=request.user, code=code))
        if team is not None:
            messages.success(request, f"You joined {team.name}.")
            return redirect("task-team", slug=team.task.slug)
    return render(request, "submissions/team_join.html", {"invite": invite})
