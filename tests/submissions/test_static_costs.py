"""Static costs are computed at upload, stored on the submission and shown read-only."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from django.test import Client
from onnx import helper
from rest_framework.test import APIClient

from evaluation import costs as costs_module
from submissions.models import Submission
from tests.builders import linear_classifier
from tests.conftest import onnx_upload

pytestmark = pytest.mark.django_db

# linear_classifier at batch 16: Flatten (16, 64), MatMul 64 → 10, Add bias (16, 10).
LINEAR_COSTS = {
    "parameters": 64 * 10 + 10,
    "macs": 16 * 10 * 64,
    "flops": 2 * 16 * 10 * 64 + 160,
    "activations": 16 * 64 + 160 + 160,
    "costs_not_counted": {"ops": {}, "unknown_shapes": 0, "shapes_from": "inference"},
    "costs_complete": True,
    "costs_incomplete_reason": "",
}


def upload(user: Any, data: bytes) -> dict[str, Any]:
    client = APIClient()
    client.force_authenticate(user)
    response = client.post(
        "/api/submissions/", {"task": "digits", "file": onnx_upload(data)}, format="multipart"
    )
    assert response.status_code == 201, response.content
    detail: dict[str, Any] = client.get(f"/api/submissions/{response.json()['id']}/").json()
    return detail


def linear() -> bytes:
    rng = np.random.default_rng(0)
    return linear_classifier(rng.normal(size=(64, 10)), rng.normal(size=10))


def with_einsum(data: bytes) -> bytes:
    """The same classifier with a final Einsum, an operator the costs do not count."""
    model = onnx.load_from_string(data)
    model.graph.node[-1].output[0] = "logits"
    model.graph.node.append(helper.make_node("Einsum", ["logits"], ["output"], equation="ij->ij"))
    return bytes(model.SerializeToString())


def test_upload_stores_the_static_costs_and_the_api_shows_them(alice: Any, make_task: Any) -> None:
    make_task()
    detail = upload(alice, linear())
    assert {key: detail[key] for key in LINEAR_COSTS} == LINEAR_COSTS
    stored = Submission.objects.get(pk=detail["id"])
    assert (stored.parameters, stored.flops, stored.macs) == (650, 20640, 10240)
    assert detail["model_info"]["costs_unavailable"] == ""


def test_submission_page_shows_the_costs_and_what_was_not_counted(
    alice: Any, make_task: Any
) -> None:
    make_task()
    detail = upload(alice, with_einsum(linear()))
    assert detail["costs_not_counted"] == {
        "ops": {"Einsum": 1},
        "unknown_shapes": 0,
        "shapes_from": "inference",
    }
    assert detail["costs_complete"] is False  # an Einsum may multiply-accumulate
    client = Client()
    client.force_login(alice)
    page = client.get(f"/submissions/{detail['id']}/").content.decode()
    assert '<dt>Parameters</dt><dd class="num">650</dd>' in page
    assert "≥ 20.6 k (≥ 10.2 k MACs)" in page  # evaluation.formats.si
    assert "1.50 k elements" in page  # the Einsum's output is an activation too
    assert "<dd data-not-counted>Einsum × 1</dd>" in page


def test_a_model_whose_costs_cannot_be_computed_is_still_accepted(
    alice: Any, make_task: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(costs_module, "MAX_GRAPH_SIZE", 2)
    make_task()
    detail = upload(alice, linear())
    assert detail["status"] == "queued"
    assert [detail[key] for key in LINEAR_COSTS] == [None] * 6 + [""]
    assert "graph is too large to analyse" in detail["model_info"]["costs_unavailable"]
    client = Client()
    client.force_login(alice)
    assert "Parameters" not in client.get(f"/submissions/{detail['id']}/").content.decode()
