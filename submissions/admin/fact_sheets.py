"""Admin for fact sheets: operators read each entry's sheet and export a phase's sheets as CSV
(filter by task, select all, "Export as CSV")."""

from __future__ import annotations

import csv

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from submissions.challenges.fact_sheets import fact_sheet_rows
from submissions.models import FactSheet


@admin.register(FactSheet)
class FactSheetAdmin(admin.ModelAdmin):
    list_display = ["method_name", "task", "user", "team", "extra_data", "updated_at"]
    list_filter = ["task"]
    search_fields = ["method_name", "user__username", "team__name"]
    readonly_fields = ["task", "user", "team", "updated_at"]
    actions = ["export_csv"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # participants write their own

    @admin.action(description="Export the selected fact sheets as CSV")
    def export_csv(self, request: HttpRequest, queryset: QuerySet[FactSheet]) -> HttpResponse:
        sheets = queryset.select_related("task", "user", "team").order_by("task", "id")
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="fact-sheets.csv"'
        csv.writer(response).writerows(fact_sheet_rows(sheets))
        return response
