"""The operator's console: task creation with a checked dataset, submission actions through the
services, every action in the admin log, filters and the worker list."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rq.worker import Worker

from submissions.admin.rule_forms import RankingRuleForm
from submissions.lifecycle.selectors import leaderboard
from submissions.models import RankingRule, Submission, Task
from tests.builders import digits_like, npz_bytes
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/submissions/submission/"


@pytest.fixture
def console(operator: Any) -> Client:
    client = Client()
    client.force_login(operator)
    return client


RULE_FORMSET = {
    "TOTAL_FORMS": "0",
    "INITIAL_FORMS": "0",
    "MIN_NUM_FORMS": "0",
    "MAX_NUM_FORMS": "1",
}


def task_form(arrays: dict[str, np.ndarray], **overrides: Any) -> dict[str, Any]:
    form: dict[str, Any] = {
        "title": "Digits",
        "slug": "digits",
        "description": "8x8 digits",
        "dataset": SimpleUploadedFile("digits.npz", npz_bytes(arrays)),
        "batch_size": "16",
        "input_shape": "[1, 8, 8]",
        "input_dtype": "float32",
        "output_shape": "[10]",
        "metric": "accuracy",
        "max_model_mb": "1",
        "time_limit_s": "60",
        "submissions_per_day": "5",
        "queued_per_user": "5",
        "device_class": "cpu",
        "leaderboard": "public",
        # The ranking rule inline, left empty: the primary metric ranks.
        **{f"ranking_rule-{k}": v for k, v in RULE_FORMSET.items()},
        # The data section's inline (TaskFile), empty: its own tests are in test_task_pages.py.
        "files-TOTAL_FORMS": "0",
        "files-INITIAL_FORMS": "0",
        # The tracks inline, none: tests/submissions/test_tracks.py adds them.
        "tracks-TOTAL_FORMS": "0",
        "tracks-INITIAL_FORMS": "0",
    }
    form.update(overrides)
    return form


def log_messages(obj: Any) -> list[str]:
    entries = LogEntry.objects.filter(object_id=str(obj.pk), action_flag=CHANGE).order_by("id")
    return [entry.change_message for entry in entries]


def act(
    console: Client, action: str, rows: list[Any], url: str = CHANGELIST, reason: str = ""
) -> Any:
    data = {"action": action, "_selected_action": [str(r.pk) for r in rows]}
    if reason:  # hide and disqualify ask for one on a page of their own; this answers it
        data |= {"reason": reason, "apply": "Apply"}
    response = console.post(url, data, follow=True)
    assert response.status_code == 200
    return response


def test_operator_creates_a_task_by_uploading_its_dataset(console: Client) -> None:
    response = console.post("/admin/submissions/task/add/", task_form(digits_like(n=40)))
    assert response.status_code == 302, response.content.decode()[:2000]
    task = Task.objects.get(slug="digits")
    assert task.batch_shape == [16, 1, 8, 8]
    with task.dataset.open("rb") as stored, np.load(stored) as arrays:
        assert arrays["inputs"].shape == (40, 1, 8, 8)
    assert LogEntry.objects.filter(object_id=str(task.pk), action_flag=ADDITION).exists()


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda a: a.update(inputs=a["inputs"][:, :, :4]), "per-sample shape [1, 4, 8]"),
        (lambda a: a.update(inputs=a["inputs"].astype(np.float64)), "dtype float64"),
        (lambda a: a.pop("targets"), "lacks targets"),
        (lambda a: a.update(targets=a["targets"][:-1]), "'targets' has 39 rows"),
        (lambda a: a.update(targets=a["targets"] + 10), "labels outside 0..9"),
        (lambda a: a.update(split=np.array(["public"] * 39 + ["test"])), "not ['test']"),
        (lambda a: a.update(split=np.array(["private"] * 40)), "no public rows"),
        (lambda a: a.update(extra=np.zeros(3)), "Unexpected arrays"),
    ],
)
def test_a_dataset_that_does_not_fit_the_task_is_refused_with_the_reason(
    console: Client, change: Any, reason: str
) -> None:
    arrays = digits_like(n=40)
    change(arrays)
    response = console.post("/admin/submissions/task/add/", task_form(arrays))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert reason in " ".join(errors.get("dataset", [])), errors
    assert not Task.objects.exists()


def test_operator_sets_a_tasks_timing_protocol_and_a_bad_one_is_refused(
    console: Client, settings: Any
) -> None:
    refused = console.post(
        "/admin/submissions/task/add/", task_form(digits_like(n=40), timing_passes="0")
    )
    assert refused.status_code == 200
    assert "at least one pass" in str(refused.context["adminform"].form.non_field_errors())

    form = task_form(digits_like(n=40), timing_min_time_s="2.5")  # one box of its own
    assert console.post("/admin/submissions/task/add/", form).status_code == 302
    protocol = Task.objects.get(slug="digits").spec().timing
    assert protocol.min_time_s == 2.5  # the task's own
    assert protocol.passes == settings.EVAL_TIMING_PASSES  # the rest from the settings


def test_a_file_that_is_not_npz_is_refused(console: Client) -> None:
    bad = SimpleUploadedFile("digits.npz", b"not a zip at all")
    response = console.post("/admin/submissions/task/add/", task_form(digits_like(), dataset=bad))
    assert "Not a readable .npz file" in response.context["adminform"].form.errors["dataset"][0]
    assert not Task.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_rerun_action_requeues_a_failed_submission_and_logs_it(
    console: Client, make_task: Any, alice: Any, queue: Any
) -> None:
    task = make_task()
    failed = scored(task, alice, 0.5, status="failed", error_message="boom")
    queued = scored(task, alice, 0.5, status="queued")
    response = act(console, "rerun", [failed, queued])
    failed.refresh_from_db()
    assert failed.status == "queued" and failed.score is None and failed.error_message == ""
    assert queue.count == 1  # the re-run is on the queue; the already queued one was left alone
    assert log_messages(failed) == ["Re-run by operator"]
    assert log_messages(queued) == []
    assert "Queued for re-run: 1 of 2; 1 already so or not eligible." in response.content.decode()


def test_cancel_action_cancels_a_queued_submission_and_logs_it(
    console: Client, make_task: Any, alice: Any
) -> None:
    task = make_task()
    waiting = scored(task, alice, 0.5, status="queued")
    done = scored(task, alice, 0.7)
    act(console, "cancel", [waiting, done])
    waiting.refresh_from_db()
    done.refresh_from_db()
    assert (waiting.status, done.status) == ("cancelled", "succeeded")
    assert log_messages(waiting) == ["Cancelled by operator"]
    assert log_messages(done) == []


def test_hide_action_drops_the_submission_from_the_board_and_logs_it(
    console: Client, make_task: Any, alice: Any, bob: Any
) -> None:
    task = make_task()
    best = scored(task, alice, 0.9)
    scored(task, alice, 0.6)
    scored(task, bob, 0.8)
    act(console, "hide", [best], reason="trained on the test set")
    assert [(r.submission.user.username, r.score) for r in leaderboard(task=task)] == [
        ("bob", 0.8),
        ("alice", 0.6),
    ]
    assert log_messages(best) == ["Set hidden to True: trained on the test set"]
    act(console, "unhide", [best])
    assert leaderboard(task=task)[0].submission == best
    assert log_messages(best) == [
        "Set hidden to True: trained on the test set",
        "Set hidden to False",
    ]


def test_disqualify_and_baseline_actions_change_the_flags_and_log_each(
    console: Client, make_task: Any, alice: Any, operator: Any
) -> None:
    task = make_task()
    cheat = scored(task, alice, 0.99)
    reference = scored(task, operator, 0.5)
    act(console, "disqualify", [cheat], reason="two accounts")
    act(console, "mark_baseline", [reference])
    act(console, "mark_baseline", [reference])  # already a baseline: nothing changes or is logged
    rows = leaderboard(task=task)
    assert [r.submission for r in rows] == [reference]
    assert rows[0].submission.is_baseline
    assert log_messages(cheat) == ["Set disqualified to True: two accounts"]
    assert log_messages(reference) == ["Set is_baseline to True"]


def test_task_actions_reveal_freeze_and_hide_the_board_and_log_each(
    console: Client, make_task: Any
) -> None:
    task = make_task()
    url = "/admin/submissions/task/"
    act(console, "reveal_private", [task], url)
    act(console, "freeze_board", [task], url)
    task.refresh_from_db()
    frozen_at = task.leaderboard_frozen_at
    assert task.private_revealed and frozen_at is not None
    act(console, "freeze_board", [task], url)  # a second freeze keeps the first time
    act(console, "hide_board", [task], url)
    task.refresh_from_db()
    assert task.leaderboard_frozen_at == frozen_at and task.leaderboard == "hidden"
    assert log_messages(task) == [
        "Private scores revealed",
        "Leaderboard frozen",
        "Leaderboard hidden",
    ]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("status__exact=failed", {"failed-one"}),
        ("provider=CUDAExecutionProvider", {"gpu-one"}),
        ("task__id__exact={other}", {"other-task"}),
        ("user__id__exact={bob}", {"bobs"}),
    ],
)
def test_submission_list_filters_by_task_status_user_and_provider(
    console: Client, make_task: Any, alice: Any, bob: Any, query: str, expected: set[str]
) -> None:
    task, other = make_task(), make_task(slug="other", title="Other")
    scored(task, alice, 0.5, status="failed", description="failed-one")
    scored(task, alice, 0.6, provider="CUDAExecutionProvider", description="gpu-one")
    scored(other, alice, 0.7, provider="CPUExecutionProvider", description="other-task")
    scored(task, bob, 0.8, provider="CPUExecutionProvider", description="bobs")
    response = console.get(f"{CHANGELIST}?{query.format(other=other.pk, bob=bob.pk)}")
    shown = {s.description for s in response.context["cl"].result_list}
    assert shown == expected


def test_worker_list_shows_the_workers_registered_on_the_queue(console: Client, queue: Any) -> None:
    assert "No worker is registered" in console.get(f"{CHANGELIST}workers/").content.decode()
    worker = Worker([queue], connection=queue.connection, name="gpu0-a")
    worker.register_birth()
    try:
        page = console.get(f"{CHANGELIST}workers/").content.decode()
    finally:
        worker.register_death()
    assert "gpu0-a" in page
    changelist = console.get(CHANGELIST).content.decode()
    assert f"{CHANGELIST}workers/" in changelist and "/admin/django-rq/" in changelist


def test_participants_cannot_open_the_console(alice: Any) -> None:
    client = Client()
    client.force_login(alice)
    assert client.get(CHANGELIST).status_code == 302
    assert client.get(f"{CHANGELIST}workers/").status_code == 302


_ = Submission


def test_the_add_task_form_shows_examples_and_defaults_not_null_or_raw_json(
    console: Client, settings: Any
) -> None:
    page = console.get("/admin/submissions/task/add/").content.decode()
    assert 'value="null"' not in page and "{}</textarea>" not in page  # no raw JSON anywhere
    assert 'name="ranking_rule-__prefix__-weight_latency"' in page  # a box per weight
    assert 'placeholder="[3, 224, 224]"' in page  # the input shape's example
    # each timing setting has its own box, the worker's default shown in it
    assert f'placeholder="{settings.EVAL_TIMING_PASSES:g} (default)"' in page
    assert 'name="timing_passes"' in page and 'name="timing"' not in page


def test_a_composite_rules_weights_are_one_box_per_measure() -> None:
    rule = RankingRule(kind="composite", weights={"latency": 0.7, "flops": 0.3})
    form = RankingRuleForm(instance=rule)
    assert form["weight_latency"].value() == 0.7 and form["weight_score"].value() is None
    edited = RankingRuleForm(
        {"kind": "composite", "latency_percentile": "p50", "weight_score": "1",
         "weight_latency": "0", "weight_flops": ""},
        instance=rule,
    )  # fmt: skip
    edited.is_valid()
    assert rule.weights == {"score": 1.0}  # empty and 0: not weighed
