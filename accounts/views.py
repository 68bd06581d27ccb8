"""Account pages: log in (throttled), sign up, profile with API tokens, password reset."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from accounts.forms import (
    NotificationPreferenceForm,
    SignupForm,
    ThrottledAuthenticationForm,
    TokenCreateForm,
)
from accounts.selectors import api_tokens_of, notification_preference_of
from accounts.services import (
    NewToken,
    api_token_create,
    api_token_revoke,
    notification_preference_set,
)
from plumbing.ratelimit import client_ip, rate_limit_hit, refused_page
from plumbing.refusal_responses import attempt


class LoginView(auth_views.LoginView):
    form_class = ThrottledAuthenticationForm

    def form_invalid(self, form: Any) -> HttpResponse:
        response = super().form_invalid(form)
        if form.refusal is not None:
            return refused_page(response, form.refusal)
        return response


class PasswordResetView(auth_views.PasswordResetView):
    """Mail goes out at most a few times an hour per client address."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        refusal = rate_limit_hit(scope="password_reset_ip", ident=client_ip(request))
        if refusal is not None:
            form = self.get_form()
            form.add_error(None, refusal.message)
            return refused_page(self.render_to_response(self.get_context_data(form=form)), refusal)
        return super().post(request, *args, **kwargs)


def signup(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("profile")
    form = SignupForm(request.POST or None)
    if request.method == "POST":
        refusal = rate_limit_hit(scope="signup_ip", ident=client_ip(request))
        if refusal is not None:
            form.add_error(None, refusal.message)
            return refused_page(
                render(request, "registration/signup.html", {"form": form}), refusal
            )
        if form.is_valid():
            user = form.save()
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            messages.success(request, f"Welcome, {user.username}. Your account is ready.")
            return redirect("profile")
    status = 400 if request.method == "POST" else 200
    return render(request, "registration/signup.html", {"form": form}, status=status)


def _profile(
    request: HttpRequest, form: TokenCreateForm, *, new_token: NewToken | None = None
) -> HttpResponse:
    context = {
        "form": form,
        "tokens": api_tokens_of(user=request.user),
        "new_token": new_token,
        "notification_form": NotificationPreferenceForm(
            instance=notification_preference_of(user=request.user)
        ),
    }
    return render(request, "accounts/profile.html", context, status=400 if form.errors else 200)


@never_cache
@login_required
def profile(request: HttpRequest) -> HttpResponse:
    return _profile(request, TokenCreateForm())


@never_cache  # the page that shows a new secret must never be stored by a cache or browser
@login_required
@require_POST
def token_create(request: HttpRequest) -> HttpResponse:
    form = TokenCreateForm(request.POST)
    if not form.is_valid():
        return _profile(request, form)
    name = form.cleaned_data["name"]
    new = attempt(request, lambda: api_token_create(user=request.user, name=name), form=form)
    if new is None:
        return _profile(request, form)
    return _profile(request, TokenCreateForm(), new_token=new)


@login_required
@require_POST
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = api_tokens_of(user=request.user).filter(pk=pk).first()
    if token is None:
        raise Http404("No such token of yours.")
    if api_token_revoke(user=request.user, token_id=pk):
        messages.success(request, f"Token “{token.name}” was revoked; it no longer works.")
    return redirect("profile")


@login_required
@require_POST
def notifications_update(request: HttpRequest) -> HttpResponse:
    form = NotificationPreferenceForm(request.POST)
    if form.is_valid():  # checkboxes: always valid, an unticked one is False
        notification_preference_set(user=request.user, **form.cleaned_data)
        messages.success(request, "Your e-mail notification settings were saved.")
    return redirect("profile")
