"""Refusals are answered in one place: the API's exception handler and the form views' helper.
Services raise a ``Refused``; no view catches one."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from django import forms
from django.conf import settings
from django.contrib.messages import get_messages
from django.contrib.messages.storage.fallback import FallbackStorage
from django.http import Http404
from django.test import RequestFactory
from rest_framework.test import APIClient

from accounts.services import TokenLimitReached
from plumbing.ratelimit import Rate, Refusal
from plumbing.refusal_responses import api_exception_handler, attempt
from plumbing.refusals import Refused
from plumbing.throttles import RateLimited
from submissions.lifecycle.finals import SelectionRefused
from submissions.lifecycle.services import SubmissionRefused
from submissions.models import Task
from submissions.teams.services import TeamRefused

ROOT = Path(__file__).resolve().parents[2]


def test_the_api_answers_refusals_through_the_one_handler() -> None:
    assert settings.REST_FRAMEWORK["EXCEPTION_HANDLER"] == (
        "plumbing.refusal_responses.api_exception_handler"
    )


@pytest.mark.parametrize("refusal", [SubmissionRefused, SelectionRefused, TeamRefused])
def test_every_domain_refusal_is_a_refused(refusal: type[Exception]) -> None:
    assert issubclass(refusal, Refused) and issubclass(TokenLimitReached, Refused)


def test_a_refused_input_is_a_400_naming_the_field() -> None:
    response = api_exception_handler(SubmissionRefused("file", "Not an ONNX model."), {})
    assert response is not None
    assert (response.status_code, response.data) == (400, {"file": ["Not an ONNX model."]})


def test_a_refusal_without_a_field_is_a_409_with_the_reason() -> None:
    response = api_exception_handler(TeamRefused("The team is full."), {})
    assert response is not None
    assert (response.status_code, response.data) == (409, {"detail": "The team is full."})


def test_a_lookup_that_found_nothing_is_a_404_saying_what() -> None:
    response = api_exception_handler(Task.DoesNotExist("No task 'nope'."), {})
    assert response is not None
    assert (response.status_code, response.data) == (404, {"detail": "No task 'nope'."})


def test_a_rate_limit_keeps_its_429_and_retry_after() -> None:
    refusal = Refusal("uploads", Rate(count=5, seconds=3600), wait_s=42)
    response = api_exception_handler(RateLimited(refusal), {})
    assert response is not None
    assert (response.status_code, response["Retry-After"]) == (429, "42")
    assert response.data == {"detail": refusal.message}


@pytest.mark.django_db
def test_the_api_answers_an_unknown_task_with_404_and_its_name() -> None:
    response = APIClient().get("/api/tasks/nope/")
    assert (response.status_code, response.json()) == (404, {"detail": "No task 'nope'."})


class UploadLikeForm(forms.Form):
    file = forms.CharField(required=False)


def page_request() -> Any:
    request = RequestFactory().post("/")
    request.session = {}
    request._messages = FallbackStorage(request)
    return request


def refuse(exc: Exception) -> Any:
    raise exc


def test_a_page_shows_a_refused_input_on_its_field_with_a_link_to_what_it_points_at() -> None:
    form = UploadLikeForm(data={})
    assert form.is_valid()
    refusal = SubmissionRefused("file", "You uploaded this model before.", url="/s/7/")
    assert attempt(page_request(), lambda: refuse(refusal), form=form) is None
    assert form.errors["file"] == ['You uploaded this model before. <a href="/s/7/">See it</a>.']


def test_a_page_shows_a_refusal_of_no_field_of_its_form_on_the_whole_form() -> None:
    form = UploadLikeForm(data={})
    assert form.is_valid()
    refusal = SubmissionRefused("task", "This task is closed for submissions.")
    assert attempt(page_request(), lambda: refuse(refusal), form=form) is None
    assert form.non_field_errors() == ["This task is closed for submissions."]


def test_a_page_without_a_form_says_the_refusal_as_a_message_and_goes_on() -> None:
    request = page_request()
    assert attempt(request, lambda: refuse(SelectionRefused("The task has closed."))) is None
    assert [str(m) for m in get_messages(request)] == ["The task has closed."]
    assert attempt(request, lambda: 7) == 7


def test_a_page_answers_a_lookup_that_found_nothing_with_a_404() -> None:
    with pytest.raises(Http404, match="No task 'nope'"):
        attempt(page_request(), lambda: refuse(Task.DoesNotExist("No task 'nope'.")))


REFUSALS = {"Refused", "SubmissionRefused", "SelectionRefused", "TeamRefused", "TokenLimitReached"}


def _caught(handler: ast.ExceptHandler) -> set[str]:
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return {t.id if isinstance(t, ast.Name) else getattr(t, "attr", "") for t in types if t}


def test_no_view_catches_a_refusal_the_handler_and_the_helper_answer() -> None:
    catching = []
    for package in ("portal", "submissions", "evaluation"):
        for path in (ROOT / package).rglob("*.py"):
            if path.name == "refusal_responses.py" or "client" in path.parts:
                continue  # the one owner; the CLI client has refusals of its own
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ExceptHandler) and _caught(node) & REFUSALS:
                    catching.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert catching == []
