"""Two rules are asked in two forms: as a query over many rows (lists, boards) and of one row
already read (a page, a poll, an upload). Each pair must give the same answer for every viewer:
a task's visibility (``_visible_to`` and ``_may_see``) and whose a submission is
(``SubmissionQuerySet.for_user`` and ``submission_get_own``)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser

from submissions.lifecycle import selectors
from submissions.models import Challenge, Submission, Task, Team, TeamMembership
from tests.submissions.challenge_support import registered

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewers(alice: Any, bob: Any, operator: Any, django_user_model: Any) -> dict[str, Any]:
    invited = django_user_model.objects.create_user("carol", email="Carol@Example.org")
    host = django_user_model.objects.create_user("dave")
    stranger = django_user_model.objects.create_user("erin", email="erin@example.org")
    return {
        "anonymous": AnonymousUser(),
        "alice (registered)": alice,
        "bob": bob,
        "carol (invited)": invited,
        "dave (host)": host,
        "erin": stranger,
        "operator": operator,
    }


def test_a_tasks_visibility_is_the_same_read_as_a_query_and_of_its_row(
    make_task: Any, viewers: dict[str, Any]
) -> None:
    public = Challenge.objects.create(slug="open-cup", title="Open Cup")
    private = Challenge.objects.create(
        slug="closed-cup",
        title="Closed Cup",
        visibility=Challenge.Visibility.PRIVATE,
        invited_emails="someone@example.org\n  carol@example.org \n",
    )
    private.hosts.add(viewers["dave (host)"])
    registered(private, viewers["alice (registered)"])
    tasks = [
        make_task(slug="plain"),
        make_task(slug="hidden", is_hidden=True),
        make_task(slug="open-phase", challenge=public, phase_order=1),
        make_task(slug="closed-phase", challenge=private, phase_order=1),
        make_task(slug="closed-hidden", challenge=private, phase_order=2, is_hidden=True),
    ]
    seen = {}
    for who, user in viewers.items():
        listed = set(selectors.task_list_visible(user=user).values_list("slug", flat=True))
        for task in tasks:
            try:
                selectors.task_get_visible(slug=task.slug, user=user)
                by_row = True
            except Task.DoesNotExist:
                by_row = False
            assert by_row == (task.slug in listed), (who, task.slug)
            seen[who, task.slug] = by_row

    # Not vacuous: each kind of viewer sees some of these and not others, as the rule says.
    assert seen["anonymous", "closed-phase"] is False and seen["anonymous", "open-phase"]
    assert seen["alice (registered)", "closed-phase"] and seen["carol (invited)", "closed-phase"]
    assert seen["dave (host)", "closed-phase"] and not seen["erin", "closed-phase"]
    assert seen["operator", "closed-hidden"] and not seen["dave (host)", "closed-hidden"]


def test_whose_a_submission_is_is_the_same_read_as_a_query_and_of_its_row(
    make_task: Any, viewers: dict[str, Any]
) -> None:
    task = make_task()
    alice, bob, carol = (viewers[w] for w in ("alice (registered)", "bob", "carol (invited)"))
    team = Team.objects.create(task=task, name="Lab", created_by=alice)
    TeamMembership.objects.create(task=task, team=team, user=alice)
    TeamMembership.objects.create(task=task, team=team, user=bob)
    other = Team.objects.create(task=task, name="Other", created_by=carol)
    TeamMembership.objects.create(task=task, team=other, user=carol)
    rows = [
        Submission.objects.create(user=alice, task=task, sha256="a" * 64, size_bytes=1),
        Submission.objects.create(user=alice, task=task, team=team, sha256="b" * 64, size_bytes=1),
        Submission.objects.create(user=carol, task=task, team=other, sha256="c" * 64, size_bytes=1),
        Submission.objects.create(user=viewers["erin"], task=task, sha256="d" * 64, size_bytes=1),
    ]
    owned = 0
    for who, user in viewers.items():
        if not user.is_authenticated:
            continue
        theirs = set(Submission.objects.for_user(user).values_list("pk", flat=True))
        for submission in rows:
            try:
                found = selectors.submission_get_own(user=user, pk=submission.pk)
                by_row = True
                assert found.user_id == submission.user_id and found.user.pk == submission.user_id
            except Submission.DoesNotExist as exc:
                assert str(exc) == selectors.NOT_YOURS
                by_row = False
            assert by_row == (submission.pk in theirs), (who, submission.pk)
            owned += by_row
    # alice: her own and the team's; bob: the team's; carol: her team's; erin: hers.
    assert owned == 5
    with pytest.raises(Submission.DoesNotExist):
        selectors.submission_get_own(user=viewers["anonymous"], pk=rows[0].pk)
    with pytest.raises(Submission.DoesNotExist, match="No such submission of yours"):
        selectors.submission_get_own(user=alice, pk=max(r.pk for r in rows) + 1)
