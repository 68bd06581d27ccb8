from __future__ import annotations

from django.urls import path

from accounts import apis

urlpatterns = [
    path("auth/token/", apis.TokenObtainApi.as_view(), name="api-token"),
    path("auth/tokens/", apis.TokenListApi.as_view(), name="api-token-list"),
    path("auth/tokens/<int:pk>/", apis.TokenRevokeApi.as_view(), name="api-token-revoke"),
]
