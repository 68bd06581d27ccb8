"""The task page's tabs: operators' Markdown rendered safely, the evaluation facts, the timeline
with its countdown, participant and submission counts, and the "export your model" snippet."""

from __future__ import annotations

import ast
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.test import Client
from django.utils import timezone
from onnx import TensorProto, helper

from evaluation.inspect import ModelRejected, inspect_model, runtime_limits
from submissions.models import Submission
from submissions.tasks.markup import markdown_html
from submissions.tasks.pages import export_snippet
from tests.builders import digits_like
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db


# --- Markdown -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "<script>alert(1)</script>",
        "Hello <script>alert(1)</script> world",
        '<img src="x" onerror="alert(1)">',
        '<a href="javascript:alert(1)">click</a>',
        "<iframe src='https://evil.example'></iframe>",
        "<div onclick='alert(1)'>block</div>",
    ],
)
def test_raw_html_in_markdown_is_shown_as_text_never_as_markup(source: str) -> None:
    html = markdown_html(source)
    assert "<script" not in html and "<img" not in html and "<iframe" not in html
    assert "<a " not in html and "<div" not in html
    assert "&lt;" in html  # the operator's text is still there, escaped


@pytest.mark.parametrize(
    "source",
    [
        "[click](javascript:alert(1))",
        "[click](JaVaScRiPt:alert(1))",
        "[click](  javascript:alert(1))",
        "[click](vbscript:msgbox(1))",
        "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
        "![pic](javascript:alert(1))",
        "<javascript:alert(1)>",
        "[ref]\n\n[ref]: javascript:alert(1)",
    ],
)
def test_script_links_are_dropped(source: str) -> None:
    html = markdown_html(source).lower()
    assert "href=" not in html and "src=" not in html and "<a" not in html


def test_links_render_with_nofollow_noopener_and_markdown_still_works() -> None:
    table = "| a | b |\n|---|---|\n|1|2|"
    html = markdown_html(f"**Bold** and [docs](https://onnx.ai/ 'ONNX')\n\n{table}")
    assert '<a href="https://onnx.ai/" title="ONNX" rel="nofollow noopener">docs</a>' in html
    assert "<strong>Bold</strong>" in html and "<table>" in html


def test_task_page_renders_operator_markdown_in_its_tabs_safely(make_task: Any) -> None:
    make_task(
        overview="# Welcome\n\nSee [the paper](https://example.org/p).<script>alert('o')</script>",
        rules="1. Be fair\n2. <b>No</b> peeking",
        evaluation_notes="Scored on **500** rows.",
        timeline_notes="Dates are *UTC*.",
    )
    page = Client().get("/tasks/digits/").content.decode()
    for section in ('id="overview"', 'id="rules"', 'id="evaluation"', 'id="timeline"', 'id="data"'):
        assert section in page
    assert "<h1>Welcome</h1>" in page and 'rel="nofollow noopener"' in page
    overview = page[page.index('id="overview"') : page.index('id="rules"')]
    assert "<script" not in overview and "&lt;script&gt;alert('o')&lt;/script&gt;" in overview
    assert "&lt;script&gt;" in page and "&lt;b&gt;No&lt;/b&gt;" in page
    assert "<li>Be fair</li>" in page and "<strong>500</strong>" in page
    assert "<em>UTC</em>" in page


def test_overview_falls_back_to_the_plain_description(make_task: Any) -> None:
    make_task(description="Classify <digits> & more.")
    page = Client().get("/tasks/digits/").content.decode()
    assert "Classify &lt;digits&gt; &amp; more." in page


# --- Facts, counts, timeline --------------------------------------------------------------------


def test_evaluation_tab_lists_shapes_metric_timing_device_and_limits(make_task: Any) -> None:
    task = make_task(timing={"passes": 7, "min_time_s": 2}, submissions_total=40)
    page = Client().get("/tasks/digits/").content.decode()
    max_ir, max_opset = runtime_limits()
    assert "[16, 1, 8, 8] float32" in page and "[16, 10]" in page
    assert "Top-1 accuracy (higher is better)" in page
    # the whole phase's minimums, split over the passes, as time_passes does
    timing = task.timing_protocol()
    assert f"at least 2 s and {timing.min_batches:,} batches in all" in page
    assert "split evenly over 7 passes" in page
    assert f"opset ≤ {max_opset}" in page and f"IR version ≤ {max_ir}" in page
    assert "40 in total" in page and "<dd>CPU, no GPU needed</dd>" in page


def test_counts_are_participants_and_their_submissions_without_baselines(
    make_task: Any, alice: Any, bob: Any, django_user_model: Any
) -> None:
    task = make_task()
    baseline = django_user_model.objects.create_user("baseline-linear")
    for user, n, is_baseline in [(alice, 3, False), (bob, 1, False), (baseline, 2, True)]:
        for i in range(n):
            Submission.objects.create(
                user=user,
                task=task,
                sha256=f"{user.pk}-{i}",
                size_bytes=1,
                original_name="m.onnx",
                is_baseline=is_baseline,
            )
    page = Client().get("/tasks/digits/").content.decode()
    assert (
        "<strong>2</strong> participants · <strong>4</strong> submissions · "
        "<strong>2</strong> baselines by the organisers" in page
    )


def test_timeline_counts_down_to_future_dates_and_marks_passed_ones(make_task: Any) -> None:
    now = timezone.now()
    make_task(
        opens_at=now - timedelta(days=2),
        closes_at=now + timedelta(days=3, hours=1),
        private_reveal_at=now + timedelta(days=5),
    )
    page = Client().get("/tasks/digits/").content.decode()
    timeline = page[page.index('id="timeline"') : page.index('id="data"')]
    opens = timeline[timeline.index('data-event="opens"') : timeline.index('data-event="closes"')]
    closes = timeline[timeline.index('data-event="closes"') : timeline.index('data-event="freeze"')]
    freeze = timeline[timeline.index('data-event="freeze"') : timeline.index('data-event="reveal"')]
    assert "passed" in opens and "data-countdown" not in opens
    assert "data-countdown=" in closes and "in 3" in closes
    assert "not set" in freeze
    assert "data-countdown=" in timeline[timeline.index('data-event="reveal"') :]
    assert "js/task.js" in page


# --- The export snippet --------------------------------------------------------------------------


def snippet_facts(source: str) -> dict[str, Any]:
    """What the snippet asks torch for: the example's shape and dtype, and the export options."""
    facts: dict[str, Any] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "torch.zeros":
            facts["shape"] = [ast.literal_eval(a) for a in node.args]
            facts["dtype"] = ast.unparse(next(k.value for k in node.keywords if k.arg == "dtype"))
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "torch.onnx.export":
            for k in node.keywords:
                facts[k.arg or ""] = ast.literal_eval(k.value)
        if isinstance(node, ast.Compare) and ast.unparse(node.left) == "exported.ir_version":
            facts["max_ir"] = ast.literal_eval(node.comparators[0])
    return facts


@pytest.mark.parametrize(
    ("fields", "shape", "dtype"),
    [
        ({}, [16, 1, 8, 8], "torch.float32"),
        (
            {"batch_size": 4, "input_shape": [3, 32, 32], "input_dtype": "uint8"},
            [4, 3, 32, 32],
            "torch.uint8",
        ),
        ({"batch_size": 2, "input_shape": [7], "input_dtype": "int64"}, [2, 7], "torch.int64"),
    ],
)
def test_snippet_exports_the_tasks_exact_shape_and_dtype_with_a_symbolic_batch(
    make_task: Any, fields: dict[str, Any], shape: list[int], dtype: str
) -> None:
    task = make_task(**fields)
    facts = snippet_facts(export_snippet(task))
    assert facts["shape"] == shape == task.batch_shape
    assert facts["dtype"] == dtype
    assert facts["dynamic_axes"] == {"input": {0: "batch"}, "output": {0: "batch"}}
    assert facts["input_names"] == ["input"]


def test_snippet_opset_and_ir_are_the_newest_the_upload_check_accepts(
    make_task: Any, tmp_path: Path
) -> None:
    task = make_task()
    facts = snippet_facts(export_snippet(task))
    assert (facts["max_ir"], facts["opset_version"]) == runtime_limits()

    def model_at(opset: int) -> Path:
        """What the snippet's export gives: [batch, 1, 8, 8] -> [batch, 10] at this opset."""
        x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])
        y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 10])
        w = helper.make_tensor("w", TensorProto.FLOAT, [64, 10], np.zeros(640).tolist())
        nodes = [
            helper.make_node("Flatten", ["input"], ["flat"], axis=1),
            helper.make_node("MatMul", ["flat", "w"], ["output"]),
        ]
        graph = helper.make_graph(nodes, "exported", [x], [y], initializer=[w])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = facts["max_ir"]
        path = tmp_path / f"opset{opset}.onnx"
        path.write_bytes(model.SerializeToString())
        return path

    info = inspect_model(model_at(facts["opset_version"]), task.spec())
    assert info.opset == facts["opset_version"]
    with pytest.raises(ModelRejected, match="supports opsets up to"):
        inspect_model(model_at(facts["opset_version"] + 1), task.spec())


def test_task_page_shows_the_snippet(make_task: Any) -> None:
    make_task(digits_like(n=40), batch_size=8)
    page = Client().get("/tasks/digits/").content.decode()
    assert "torch.zeros(8, 1, 8, 8, dtype=torch.float32)" in page
    assert "dynamic_axes=" in page


def test_participants_see_the_queue_an_upload_joins_and_not_the_machines(
    make_task: Any, alice: Any
) -> None:
    make_task()
    page = Client().get("/tasks/digits/").content.decode()
    queue = page[page.index("data-task-queue") :]
    # filled in by task.js from the queue API (tests/browser checks the words)
    assert 'data-url="/api/queue/" data-device-class="cpu"' in queue
    assert "data-worker-cards" not in page and "libnvidia-ml" not in page


# --- The home page ------------------------------------------------------------------------------


def test_home_cards_show_status_deadline_counts_the_leader_and_your_own_best(
    make_task: Any, alice: Any, bob: Any
) -> None:
    closes = timezone.now() + timedelta(days=3)
    task = make_task(closes_at=closes)
    scored(task, alice, 0.8)
    scored(task, bob, 0.95)
    client = Client()
    client.force_login(alice)
    page = client.get("/").content.decode()
    card = page[page.index('data-task="digits"') :]
    assert 'data-state="open">open<' in card
    assert f"{closes:%Y-%m-%d %H:%M} UTC" in card
    assert "2 participants · 2 submissions" in card
    assert "<dd data-leader>bob · 0.9500</dd>" in card
    assert "<dd data-own-best>0.8000 · rank 2</dd>" in card


def test_home_cards_keep_a_blind_boards_scores_to_themselves(make_task: Any, alice: Any) -> None:
    task = make_task(leaderboard="blind")
    scored(task, alice, 0.8)
    page = Client().get("/").content.decode()
    assert "data-leader" not in page and "0.8000" not in page
    assert "1 participant · 1 submission" in page
