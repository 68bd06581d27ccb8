"""Posting the task admin's change form as the page fills it: every field's current value and
every inline's management form, so a test says only what it changes."""

from __future__ import annotations

import json
from typing import Any

from django.test import Client


def task_change_data(client: Client, task_pk: int, **changes: Any) -> dict[str, Any]:
    response = client.get(f"/admin/submissions/task/{task_pk}/change/")
    form = response.context["adminform"].form
    data: dict[str, Any] = {}
    for name in form.fields:
        value = form[name].value()
        if name == "dataset" or value is None or value is False:
            continue  # the stored dataset stays; an unticked box is absent from a real POST
        data[name] = json.dumps(value) if isinstance(value, list | dict) else value
    for inline in response.context["inline_admin_formsets"]:
        management = inline.formset.management_form
        initial = management.initial["INITIAL_FORMS"]
        data[f"{management.prefix}-TOTAL_FORMS"] = initial  # no new inline rows unless asked
        data[f"{management.prefix}-INITIAL_FORMS"] = initial
    return {**data, **changes}
