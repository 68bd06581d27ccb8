from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm

from portal.accounts.services import login_attempt_begin, login_attempt_succeeded
from portal.ratelimit import Refusal


class SignupForm(UserCreationForm):
    email = forms.EmailField(required=True, help_text="For password resets only.")

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username", "email")


class ThrottledAuthenticationForm(AuthenticationForm):
    """Django's log-in form, refusing further attempts once an account or address is over its
    limit (``refusal`` then says for how long)."""

    refusal: Refusal | None = None

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username")
        if username is None or not self.cleaned_data.get("password"):
            return super().clean()
        self.refusal = login_attempt_begin(request=self.request, username=username)
        if self.refusal is not None:
            raise forms.ValidationError(self.refusal.message, code="throttled")
        cleaned = super().clean()  # raises on a wrong password: the attempt stays counted
        login_attempt_succeeded(request=self.request, username=username)
        return cleaned


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100, help_text="What the token is for, e.g. 'laptop CLI' or 'CI job'."
    )
