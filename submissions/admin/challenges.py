"""Admin for challenges: the challenge's texts and rules, its phases (which tasks, in which
order), its registrations (approve or reject), and moving on to the next phase with each
participant's best or selected submissions carried over (``submissions/challenges/services.py``)."""

from __future__ import annotations

from functools import partial
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.widgets import FilteredSelectMultiple
from django.db.models import QuerySet
from django.http import HttpRequest

from plumbing.refusal_responses import attempt
from submissions.challenges.services import (
    challenge_phase_advance,
    challenge_phases_set,
    registrations_decide,
)
from submissions.models import Challenge, ChallengeRegistration, Task


class ChallengeAdminForm(forms.ModelForm):
    tasks = forms.ModelMultipleChoiceField(
        queryset=Task.objects.all(),
        required=False,
        label="Phases",
        widget=FilteredSelectMultiple("tasks", is_stacked=False),
        help_text="The tasks that are this challenge's phases; order them below.",
    )

    class Meta:
        model = Challenge
        fields = [
            "title",
            "slug",
            "overview",
            "rules",
            "terms",
            "starts_at",
            "ends_at",
            "hosts",
            "visibility",
            "requires_approval",
            "allowed_email_domains",
            "invited_emails",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["tasks"].initial = list(self.instance.phases.values_list("pk", flat=True))


class PhaseInline(admin.TabularInline):
    model = Task
    fk_name = "challenge"
    # requires_fact_sheet is set here, with the phase, to keep the task form as it is
    fields = ["phase_order", "title", "opens_at", "closes_at", "requires_fact_sheet"]
    readonly_fields = ["title", "opens_at", "closes_at"]
    ordering = ["phase_order", "opens_at", "pk"]
    extra = 0
    can_delete = False
    verbose_name = "phase"

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # a phase is a task made in the task admin, then chosen above


class RegistrationInline(admin.TabularInline):
    model = ChallengeRegistration
    fields = ["user", "team", "status", "terms_accepted_at", "decided_at"]
    readonly_fields = ["user", "team", "terms_accepted_at", "decided_at"]
    extra = 0

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


def _advance(modeladmin: admin.ModelAdmin, request: HttpRequest, carry: Any, rows: Any) -> None:
    for challenge in rows:
        advance = partial(challenge_phase_advance, challenge_id=challenge.pk, carry=carry)
        done = attempt(request, advance)  # a refusal (no next phase): an error message
        if done is not None:
            modeladmin.message_user(
                request,
                f"{challenge.title}: {done.carried} submission(s) carried from "
                f"{done.source.title} to {done.target.title}, queued to be scored there.",
            )


@admin.register(Challenge)
class ChallengeAdmin(admin.ModelAdmin):
    form = ChallengeAdminForm
    list_display = ["title", "slug", "visibility", "requires_approval", "starts_at", "ends_at"]
    prepopulated_fields = {"slug": ["title"]}
    search_fields = ["slug", "title"]
    filter_horizontal = ["hosts"]
    inlines = [PhaseInline, RegistrationInline]
    actions = ["advance_best", "advance_selected"]

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        challenge_phases_set(
            challenge_id=form.instance.pk, task_ids=[t.pk for t in form.cleaned_data["tasks"]]
        )
        super().save_related(request, form, formsets, change)

    @admin.action(description="Move to the next phase, carrying each participant's best")
    def advance_best(self, request: HttpRequest, queryset: QuerySet[Challenge]) -> None:
        _advance(self, request, "best", queryset)

    @admin.action(description="Move to the next phase, carrying selected finals (else the best)")
    def advance_selected(self, request: HttpRequest, queryset: QuerySet[Challenge]) -> None:
        _advance(self, request, "selected", queryset)


@admin.register(ChallengeRegistration)
class ChallengeRegistrationAdmin(admin.ModelAdmin):
    list_display = ["challenge", "user", "team", "status", "terms_accepted_at", "decided_at"]
    list_filter = ["challenge", "status"]
    search_fields = ["user__username", "user__email", "team__name"]
    readonly_fields = ["challenge", "user", "team", "terms_accepted_at", "decided_at"]
    actions = ["approve", "reject"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # participants register, accepting the terms themselves

    @admin.action(description="Approve the selected registrations")
    def approve(self, request: HttpRequest, queryset: QuerySet[ChallengeRegistration]) -> None:
        changed = registrations_decide(
            registration_ids=list(queryset.values_list("pk", flat=True)), approve=True
        )
        self.message_user(request, f"{changed} registration(s) approved.")

    @admin.action(description="Reject the selected registrations")
    def reject(self, request: HttpRequest, queryset: QuerySet[ChallengeRegistration]) -> None:
        changed = registrations_decide(
            registration_ids=list(queryset.values_list("pk", flat=True)), approve=False
        )
        self.message_user(request, f"{changed} registration(s) rejected.")
