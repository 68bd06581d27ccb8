"""Admin for teams: operators see every team with its members and invites, rename one, and
disband one (every submission goes back to its uploader, and the board follows). Members are
changed through the team workflows only, so submissions always move with them."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from submissions.models.teams import Team, TeamInvite, TeamMembership
from submissions.teams.services import team_disband


class MembershipInline(admin.TabularInline):
    model = TeamMembership
    fields = ["user", "joined_at"]
    readonly_fields = ["user", "joined_at"]
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class InviteInline(admin.TabularInline):
    model = TeamInvite
    fields = ["code", "created_by", "created_at", "accepted_by", "accepted_at"]
    readonly_fields = ["code", "created_by", "created_at", "accepted_by", "accepted_at"]
    extra = 0

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "task", "size", "created_by", "created_at"]
    list_filter = ["task"]
    search_fields = ["name", "memberships__user__username"]
    fields = ["name", "task", "created_by", "created_at"]
    readonly_fields = ["task", "created_by", "created_at"]
    inlines = [MembershipInline, InviteInline]
    actions = ["disband"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Team]:
        return super().get_queryset(request).annotate(size=Count("memberships"))

    @admin.display(ordering="size", description="members")
    def size(self, team: Team) -> int:
        return team.size  # type: ignore[attr-defined]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # participants found teams; an empty one would stand for nobody

    @admin.action(description="Disband selected teams (submissions go back to their uploaders)")
    def disband(self, request: HttpRequest, queryset: QuerySet[Team]) -> None:
        ids = list(queryset.values_list("pk", flat=True))
        for pk in ids:
            team_disband(team_id=pk)
        messages.success(request, f"Disbanded {len(ids)} team(s).")

    def delete_model(self, request: HttpRequest, obj: Team) -> None:
        team_disband(team_id=obj.pk)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Team]) -> None:
        for pk in list(queryset.values_list("pk", flat=True)):
            team_disband(team_id=pk)
