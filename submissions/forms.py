from __future__ import annotations

from django import forms


class UploadForm(forms.Form):
    file = forms.FileField(
        label="ONNX model",
        allow_empty_file=True,
        widget=forms.ClearableFileInput(attrs={"accept": ".onnx"}),
    )
    description = forms.CharField(label="Description (optional)", max_length=500, required=False)
