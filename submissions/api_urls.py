from __future__ import annotations

from django.urls import path

from submissions import apis, quota_apis

urlpatterns = [
    path("tasks/", apis.TaskListApi.as_view(), name="api-task-list"),
    path("tasks/<slug:slug>/", apis.TaskDetailApi.as_view(), name="api-task-detail"),
    path("tasks/<slug:slug>/leaderboard/", apis.LeaderboardApi.as_view(), name="api-leaderboard"),
    path("tasks/<slug:slug>/quota/", quota_apis.TaskQuotaApi.as_view(), name="api-task-quota"),
    path("submissions/", apis.SubmissionListApi.as_view(), name="api-submission-list"),
    path("submissions/<int:pk>/", apis.SubmissionDetailApi.as_view(), name="api-submission-detail"),
    path(
        "submissions/<int:pk>/cancel/",
        apis.SubmissionCancelApi.as_view(),
        name="api-submission-cancel",
    ),
]
