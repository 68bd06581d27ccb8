"""Team workflows: create, invite, join (a merge, under Kaggle's rule), leave, remove, disband.

A participant alone has no Team row; creating a team takes their submissions of the task along.
Every workflow locks in one order, so none can deadlock with another or with an upload: the
users whose membership changes, then the teams (by id), then the task (the lock a leaderboard
refresh takes). An upload locks its user, then their team (``services._store_and_enqueue``);
the team's lock is what makes the members' quota one quota.

Submissions move with their uploader: joining takes one's own (or one's whole team's) to the
new team; leaving or being removed takes one's own uploads back. Moved submissions arrive
unselected: the finals are the receiving entrant's to choose. After the task's merge deadline
(or its close) membership is frozen.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from plumbing.refusals import Refused
from submissions.boards.leaderboard import leaderboard_entrants_changed
from submissions.lifecycle.quotas import DAY, WAITING, submissions_counted
from submissions.models import Submission, Task
from submissions.models.teams import Team, TeamInvite, TeamMembership


class TeamRefused(Refused):
    """A team workflow refused (no teams on the task, frozen, full, a spent invite), and why."""


def _lock_users(user_ids: Iterable[int]) -> None:
    """Lock the users' rows (the lock an upload takes); an id with no user locks nothing, and the
    caller's own check then says why."""
    for pk in sorted(set(user_ids)):
        get_user_model().objects.select_for_update(no_key=True).filter(pk=pk).first()


def _lock_teams_and_task(task: Task, team_ids: Iterable[int]) -> Task:
    for pk in sorted(set(team_ids)):
        Team.objects.select_for_update(no_key=True).filter(pk=pk).first()
    return Task.objects.select_for_update(no_key=True).get(pk=task.pk)


def _check_open_for_teams(task: Task) -> None:
    if task.max_team_size < 2:
        raise TeamRefused(f"Task '{task.slug}' takes no teams: everyone enters alone.")
    if task.teams_frozen():
        when = task.team_merge_deadline or task.closes_at
        raise TeamRefused(
            f"Teams on '{task.slug}' are frozen since {timezone.localtime(when):%Y-%m-%d %H:%M}: "
            "nobody can create, join, leave or merge a team any more."
        )


def _membership(user: Any, task: Task) -> TeamMembership | None:
    return TeamMembership.objects.filter(task=task, user=user).select_related("team").first()


def _entrant(user: Any, team: Team | None) -> str:
    return f"t{team.pk}" if team is not None else f"u{user.pk}"


def team_create(*, user: Any, task: Task, name: str) -> Team:
    """``user`` (alone) founds a team on ``task``; their submissions of it become the team's."""
    name = name.strip()
    if not name:
        raise TeamRefused("A team needs a name.")
    with transaction.atomic():
        _lock_users([user.pk])
        task = _lock_teams_and_task(task, [])
        _check_open_for_teams(task)
        if _membership(user, task) is not None:
            raise TeamRefused(f"You are already in a team on '{task.slug}'; leave it first.")
        if Team.objects.filter(task=task, name__iexact=name).exists():
            raise TeamRefused(f"A team named '{name}' already takes part in '{task.slug}'.")
        team = Team.objects.create(task=task, name=name[:100], created_by=user)
        TeamMembership.objects.create(team=team, task=task, user=user)
        _own_alone(user, task).update(team=team)
        leaderboard_entrants_changed(task_id=task.pk, entrants=[f"u{user.pk}", f"t{team.pk}"])
        return team


def _own_alone(user: Any, task: Task) -> Any:
    return Submission.objects.filter(user=user, task=task, team__isnull=True, is_baseline=False)


def team_invite_create(*, user: Any, team: Team) -> TeamInvite:
    """A single-use code to join ``team``; any member may make one."""
    if not TeamMembership.objects.filter(team=team, user=user).exists():
        raise TeamRefused("Only a member of a team can invite to it.")
    _check_open_for_teams(team.task)
    return TeamInvite.objects.create(team=team, created_by=user)


def _combined_quota_refusal(task: Task, joiner: Any, team: Team) -> str | None:
    """Kaggle's rule: a merge is refused when the two entrants' counted submissions together
    exceed the task's quotas (in total, and in the last 24 hours)."""
    since = timezone.now() - DAY
    member = team.memberships.values_list("user", flat=True).first()
    together = submissions_counted(user=joiner, task=task) | submissions_counted(
        user=member, task=task
    )
    counts = together.aggregate(
        total=Count("id"), today=Count("id", filter=Q(created_at__gte=since) | WAITING)
    )
    if task.submissions_total is not None and counts["total"] > task.submissions_total:
        return (
            f"Together you would have {counts['total']} submissions on '{task.slug}', more than "
            f"its {task.submissions_total} per team: a merge must fit the task's quotas."
        )
    if counts["today"] > task.submissions_per_day:
        return (
            f"Together you made {counts['today']} submissions in the last 24 hours, more than "
            f"the {task.submissions_per_day} a team may; merge when they fit the daily quota."
        )
    return None


def team_join(*, user: Any, code: str) -> Team:
    """Accept an invite: ``user`` (alone, or with their whole team: a merge) joins its team,
    taking their submissions along, if the sizes and the combined quotas fit."""
    with transaction.atomic():
        invite = TeamInvite.objects.select_related("team__task").filter(code=code).first()
        if invite is None:
            raise TeamRefused("This invite code is unknown, or its team was disbanded.")
        team, task = invite.team, invite.team.task
        _lock_users([user.pk])
        own = _membership(user, task)
        mine = own.team if own is not None else None
        task = _lock_teams_and_task(task, [team.pk] + ([mine.pk] if mine else []))
        invite = TeamInvite.objects.get(pk=invite.pk)  # re-read under the team's lock
        if invite.spent:
            raise TeamRefused("This invite was already used; ask the team for a new one.")
        _check_open_for_teams(task)
        if mine is not None and mine.pk == team.pk:
            raise TeamRefused(f"You are already in {team.name}.")
        arriving = list(mine.memberships.all()) if mine else []
        size = team.memberships.count() + max(1, len(arriving))
        if size > task.max_team_size:
            raise TeamRefused(
                f"{team.name} would have {size} members; '{task.slug}' allows at most "
                f"{task.max_team_size} per team."
            )
        refusal = _combined_quota_refusal(task, user, team)
        if refusal is not None:
            raise TeamRefused(refusal)
        leaving = _entrant(user, mine)  # before a merged team is deleted (and loses its pk)
        invite.accepted_by, invite.accepted_at = user, timezone.now()
        invite.save(update_fields=["accepted_by", "accepted_at"])
        if mine is None:
            TeamMembership.objects.create(team=team, task=task, user=user)
            _own_alone(user, task).update(team=team, selected=False)
        else:
            TeamMembership.objects.filter(team=mine).update(team=team)
            Submission.objects.filter(team=mine).update(team=team, selected=False)
            mine.delete()
        leaderboard_entrants_changed(task_id=task.pk, entrants=[leaving, f"t{team.pk}"])
        return team


def _depart(team: Team, leaver_id: int) -> None:
    """Take ``leaver_id`` out of ``team`` with their uploads; the team ends with its last member
    and passes to its longest-standing member when its creator goes."""
    TeamMembership.objects.filter(team=team, user_id=leaver_id).delete()
    Submission.objects.filter(team=team, user_id=leaver_id).update(team=None, selected=False)
    rest = team.memberships.order_by("joined_at", "id").first()
    if rest is None:
        Submission.objects.filter(team=team).update(team=None, selected=False)
        team.delete()
    elif team.created_by_id == leaver_id:
        team.created_by_id = rest.user_id
        team.save(update_fields=["created_by"])


def team_leave(*, user: Any, team: Team) -> None:
    _membership_change(actor=user, team=team, leaver_id=user.pk)


def team_member_remove(*, user: Any, team: Team, member_id: int) -> None:
    """The team's creator removes a member (with their uploads)."""
    if team.created_by_id != user.pk:
        raise TeamRefused("Only the team's creator can remove members.")
    if member_id == user.pk:
        raise TeamRefused("To leave your own team, use Leave.")
    _membership_change(actor=user, team=team, leaver_id=member_id)


def _membership_change(*, actor: Any, team: Team, leaver_id: int) -> None:
    with transaction.atomic():
        _lock_users([leaver_id])
        task = _lock_teams_and_task(team.task, [team.pk])
        team = Team.objects.filter(pk=team.pk).first() or team
        if not TeamMembership.objects.filter(team=team, user_id=leaver_id).exists():
            raise TeamRefused(f"That participant is not in {team.name}.")
        _check_open_for_teams(task)
        team_id = team.pk  # the last member's departure deletes the team, and its pk with it
        _depart(team, leaver_id)
        leaderboard_entrants_changed(task_id=task.pk, entrants=[f"t{team_id}", f"u{leaver_id}"])


def team_disband(*, team_id: int) -> None:
    """The operators end a team (at any time): every submission goes back to its uploader."""
    with transaction.atomic():
        team = Team.objects.select_related("task").get(pk=team_id)
        members = list(team.memberships.values_list("user_id", flat=True))
        uploaders = set(team.submissions.values_list("user_id", flat=True))
        _lock_users(members)
        task = _lock_teams_and_task(team.task, [team.pk])
        Submission.objects.filter(team=team).update(team=None, selected=False)
        team.delete()
        entrants = [f"t{team_id}", *(f"u{pk}" for pk in set(members) | uploaders)]
        leaderboard_entrants_changed(task_id=task.pk, entrants=entrants)
