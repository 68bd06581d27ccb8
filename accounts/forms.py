from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm

from accounts.models import NotificationPreference
from accounts.services import login_attempt_begin, login_attempt_succeeded
from plumbing.ratelimit import Refusal


class SignupForm(UserCreationForm):
    email = forms.EmailField(required=True, help_text="For password resets only.")

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username", "email")


class ThrottledLoginMixin:
    """Refuses further log-in attempts once an account or address is over its limit
    (``refusal`` then says for how long). For AuthenticationForm and its admin subclass."""

    refusal: Refusal | None = None
    cleaned_data: dict[str, Any]
    request: Any

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username")
        if username is None or not self.cleaned_data.get("password"):
            return super().clean()  # type: ignore[misc,no-any-return]
        self.refusal = login_attempt_begin(request=self.request, username=username)
        if self.refusal is not None:
            raise forms.ValidationError(self.refusal.message, code="throttled")
        cleaned = super().clean()  # type: ignore[misc]  # a wrong password raises: it counts
        login_attempt_succeeded(request=self.request, username=username)
        return cleaned  # type: ignore[no-any-return]


class ThrottledAuthenticationForm(ThrottledLoginMixin, AuthenticationForm):
    pass


class ThrottledAdminAuthenticationForm(ThrottledLoginMixin, AdminAuthenticationForm):
    """The admin's log-in page is a way in too: it shares the same limits."""


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100, help_text="What the token is for, e.g. 'laptop CLI' or 'CI job'."
    )


class NotificationPreferenceForm(forms.ModelForm):
    class Meta:
        model = NotificationPreference
        fields = ("email_on_failure", "email_on_success", "email_announcements")
