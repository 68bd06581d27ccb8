from __future__ import annotations

from django.urls import path

from submissions import apis

urlpatterns = [
    path("auth/token/", apis.TokenApi.as_view(), name="api-token"),
    path("tasks/", apis.TaskListApi.as_view(), name="api-task-list"),
    path("tasks/<slug:slug>/", apis.TaskDetailApi.as_view(), name="api-task-detail"),
    path("tasks/<slug:slug>/leaderboard/", apis.LeaderboardApi.as_view(), name="api-leaderboard"),
    path("submissions/", apis.SubmissionListApi.as_view(), name="api-submission-list"),
    path("submissions/<int:pk>/", apis.SubmissionDetailApi.as_view(), name="api-submission-detail"),
    path(
        "submissions/<int:pk>/cancel/",
        apis.SubmissionCancelApi.as_view(),
        name="api-submission-cancel",
    ),
]
