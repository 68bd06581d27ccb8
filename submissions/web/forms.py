from __future__ import annotations

from typing import Any

from django import forms

from submissions.boards.row import SORT_COLUMNS


class UploadForm(forms.Form):
    file = forms.FileField(
        label="ONNX model",
        allow_empty_file=True,
        widget=forms.ClearableFileInput(attrs={"accept": ".onnx"}),
    )
    description = forms.CharField(label="Description (optional)", max_length=500, required=False)


class LeaderboardQueryForm(forms.Form):
    """The leaderboard's query string: which split and track, sorted how, which page. Bad values
    fall back to the defaults rather than failing, since these arrive from hand-edited or old
    links."""

    board = forms.ChoiceField(
        choices=[("public", "public"), ("private", "private")], required=False
    )
    track = forms.SlugField(required=False)  # "": the task's main board
    sort = forms.ChoiceField(choices=[(c, c) for c in SORT_COLUMNS], required=False)
    dir = forms.ChoiceField(choices=[("asc", "asc"), ("desc", "desc")], required=False)
    page = forms.IntegerField(min_value=1, max_value=1_000_000, required=False)

    def value(self, name: str, default: Any) -> Any:
        self.is_valid()  # cleaned_data then holds only the fields that were valid
        return self.cleaned_data.get(name) or default

    def values(self) -> tuple[Any, ...]:
        """Every field's value as ``value`` gives it (None for a default): two queries with
        equal values show the same board."""
        return tuple(self.value(name, None) for name in self.fields)


class SubmissionIdsField(forms.Field):
    """Submission numbers, each given once (``name=1&name=2``), as a set."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> set[int]:
        try:
            return {int(v) for v in value or []}
        except (TypeError, ValueError):
            raise forms.ValidationError("Submission numbers are whole numbers.") from None


class FinalSelectionForm(forms.Form):
    """The ticked submissions of one task on "My submissions" (none ticked: select none).
    Whose they are and how many may be ticked is the service's to judge
    (submissions.lifecycle.finals)."""

    final = SubmissionIdsField(required=False)


class RegistrationForm(forms.Form):
    """Registering for a challenge: the terms (refused, with the reason, unless accepted by the
    service) and, optionally, the team to register with."""

    accept_terms = forms.BooleanField(label="I accept the challenge's terms", required=False)
    team = forms.IntegerField(required=False, min_value=1)
