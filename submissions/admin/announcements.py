"""Admin for announcements: an operator posts one to a challenge (shown on its pages at once, and
e-mailed to every registered participant once, through the notifications queue), and reads each
e-mail's status (``submissions/notifications/announcements.py``)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from submissions.boards.cache import board_changes
from submissions.models import Announcement, AnnouncementDelivery, Task
from submissions.notifications.announcements import (
    announcement_deliveries_create,
    announcement_post,
    delivery_counts,
)


class DeliveryInline(admin.TabularInline):
    """Who it was e-mailed to, and what happened: read only."""

    model = AnnouncementDelivery
    fields = ["user", "status", "created_at", "done_at"]
    readonly_fields = ["user", "status", "created_at", "done_at"]
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Announcement)
class AnnouncementAdmin(admin.ModelAdmin):
    list_display = ["title", "challenge", "posted_at", "email", "email_status"]
    list_filter = ["challenge"]
    search_fields = ["title", "body"]
    fields = ["challenge", "title", "body", "email", "posted_by", "posted_at"]
    readonly_fields = ["posted_by", "posted_at"]
    inlines = [DeliveryInline]
    actions = ["email_newcomers"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # Once posted, where it went and whether it was mailed are history.
        return [*self.readonly_fields, *(["challenge", "email"] if obj is not None else [])]

    @admin.display(description="E-mails")
    def email_status(self, announcement: Announcement) -> str:
        counts = delivery_counts(announcement)
        return " · ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "–"

    def save_model(self, request: HttpRequest, obj: Announcement, form: Any, change: bool) -> None:
        # Shown on each phase's page at once, to anonymous readers too (their kept answer).
        for task_id in Task.objects.filter(challenge=obj.challenge_id).values_list("pk", flat=True):
            board_changes(task_id=task_id)
        if change:  # an edit of the text: shown on the pages, not mailed again
            super().save_model(request, obj, form, change)
            return
        obj.posted_by_id = request.user.pk  # the admin's user: signed in and staff
        queued = announcement_post(announcement=obj)
        if obj.email:
            self.message_user(
                request, f"Posted; e-mailing {queued} registered participant(s).", messages.INFO
            )

    @admin.action(description="E-mail to participants registered since it was posted")
    def email_newcomers(self, request: HttpRequest, queryset: QuerySet[Announcement]) -> None:
        queued = sum(announcement_deliveries_create(announcement=a) for a in queryset)
        self.message_user(request, f"{queued} more e-mail(s) queued.")
