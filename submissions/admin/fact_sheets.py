"""Admin for fact sheets: operators read each entry's sheet and export a phase's sheets as CSV
(filter by task, select all, "Export as CSV")."""

from __future__ import annotations

import csv
from typing import Any

from django.contrib import admin
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from submissions.boards.cache import board_changes
from submissions.challenges.fact_sheets import fact_sheet_rows
from submissions.models import FactSheet


def _board_follows(task_id: int) -> None:
    """The board shows each entry's method and links: its cached pages are stale now, and
    again once the admin's transaction commits (as ``fact_sheet_save`` says them)."""
    board_changes(task_id=task_id)


@admin.register(FactSheet)
class FactSheetAdmin(admin.ModelAdmin):
    list_display = ["method_name", "task", "user", "team", "extra_data", "updated_at"]
    list_filter = ["task"]
    search_fields = ["method_name", "user__username", "team__name"]
    readonly_fields = ["task", "user", "team", "updated_at"]
    # a link typed without a scheme is taken as https, as on the participant's form
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    actions = ["export_csv"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # participants write their own

    def save_model(self, request: HttpRequest, obj: FactSheet, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        _board_follows(obj.task_id)

    def delete_model(self, request: HttpRequest, obj: FactSheet) -> None:
        super().delete_model(request, obj)
        _board_follows(obj.task_id)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[FactSheet]) -> None:
        tasks = set(queryset.values_list("task_id", flat=True))
        super().delete_queryset(request, queryset)
        for task_id in tasks:
            _board_follows(task_id)

    @admin.action(description="Export the selected fact sheets as CSV")
    def export_csv(self, request: HttpRequest, queryset: QuerySet[FactSheet]) -> HttpResponse:
        sheets = queryset.select_related("task", "user", "team").order_by("task", "id")
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="fact-sheets.csv"'
        csv.writer(response).writerows(fact_sheet_rows(sheets))
        return response
