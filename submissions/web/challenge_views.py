"""Challenge pages: the list, one challenge's page (overview, rules, terms, the timeline of its
phases with links to each board, and registration), and your fact sheet on a phase. The rules
are ``submissions/challenges/``."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from plumbing.refusal_responses import attempt, or_404
from submissions.challenges import selectors
from submissions.challenges.fact_sheets import FIELDS as FACT_SHEET_FIELDS
from submissions.challenges.fact_sheets import fact_sheet_of, fact_sheet_save
from submissions.challenges.registration import is_registered
from submissions.challenges.services import challenge_register
from submissions.models import Challenge, FactSheet, Team
from submissions.tasks.markup import markdown_html
from submissions.web.forms import RegistrationForm
from submissions.web.views import visible_task


def _visible(request: HttpRequest, slug: str) -> Challenge:
    return or_404(lambda: selectors.challenge_get_visible(slug=slug, user=request.user))


def challenge_list(request: HttpRequest) -> HttpResponse:
    challenges = selectors.challenge_list_visible(user=request.user)
    return render(request, "submissions/challenge_list.html", {"challenges": challenges})


def challenge_detail(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = _visible(request, slug)
    user = request.user
    context = {
        "challenge": challenge,
        "overview_html": markdown_html(challenge.overview),
        "rules_html": markdown_html(challenge.rules),
        "terms_html": markdown_html(challenge.terms),
        "phases": selectors.challenge_timeline(challenge=challenge),
        "announcements": [
            (a, markdown_html(a.body))
            for a in selectors.challenge_announcements(challenge_id=challenge.pk)
        ],
        "registration": selectors.registration_of(user=user, challenge=challenge),
        "registered": is_registered(user=user, challenge=challenge),
        "form": RegistrationForm(),
        # the teams a participant may register with: theirs, on any phase
        "teams": Team.objects.filter(task__challenge=challenge, memberships__user=user)
        if user.is_authenticated
        else Team.objects.none(),
    }
    return render(request, "submissions/challenge_detail.html", context)


@login_required
@require_POST
def challenge_register_view(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = _visible(request, slug)
    form = RegistrationForm(request.POST)
    if form.is_valid():
        fields = form.cleaned_data
        registration = attempt(
            request,
            lambda: challenge_register(
                user=request.user,
                challenge_id=challenge.pk,
                accept_terms=fields["accept_terms"],
                team_id=fields["team"],
            ),
        )
        if registration is not None:
            messages.success(request, f"Registration: {registration.get_status_display()}.")
    else:
        messages.error(request, "That request was not understood.")
    return redirect(challenge)


class FactSheetForm(forms.ModelForm):
    # a link typed without a scheme is taken as https (Django 6's default, said now)
    paper_url = forms.URLField(required=False, assume_scheme="https")
    code_url = forms.URLField(required=False, assume_scheme="https")
    extra_data = forms.NullBooleanField(
        label="Extra data beyond the published training rows",
        widget=forms.Select(choices=[("unknown", "—"), ("true", "Yes"), ("false", "No")]),
    )

    class Meta:
        model = FactSheet
        fields = list(FACT_SHEET_FIELDS)


@login_required
def fact_sheet_view(request: HttpRequest, slug: str) -> HttpResponse:
    """Your fact sheet on a task: your team's, or your own alone."""
    task = visible_task(request, slug)
    sheet = fact_sheet_of(user=request.user, task=task)
    form = FactSheetForm(request.POST or None, instance=sheet)
    if request.method == "POST" and form.is_valid():
        values = {name: form.cleaned_data[name] for name in FACT_SHEET_FIELDS}
        if attempt(
            request, lambda: fact_sheet_save(user=request.user, task=task, values=values), form=form
        ):
            messages.success(request, "Fact sheet saved.")
            return redirect("task-fact-sheet", slug=slug)
    context = {"task": task, "form": form, "sheet": sheet}
    return render(request, "submissions/fact_sheet.html", context)
