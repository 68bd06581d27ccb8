from __future__ import annotations

from django.urls import path

from submissions.web import (
    analytics_apis,
    apis,
    challenge_apis,
    fact_sheet_apis,
    quota_apis,
    task_file_apis,
    team_apis,
)

urlpatterns = [
    path("challenges/", challenge_apis.ChallengeListApi.as_view(), name="api-challenge-list"),
    path(
        "challenges/<slug:slug>/",
        challenge_apis.ChallengeDetailApi.as_view(),
        name="api-challenge-detail",
    ),
    path(
        "challenges/<slug:slug>/registration/",
        challenge_apis.ChallengeRegistrationApi.as_view(),
        name="api-challenge-registration",
    ),
    path("tasks/", apis.TaskListApi.as_view(), name="api-task-list"),
    path("tasks/<slug:slug>/", apis.TaskDetailApi.as_view(), name="api-task-detail"),
    path("tasks/<slug:slug>/leaderboard/", apis.LeaderboardApi.as_view(), name="api-leaderboard"),
    path(
        "tasks/<slug:slug>/analytics/",
        analytics_apis.TaskAnalyticsApi.as_view(),
        name="api-task-analytics",
    ),
    path("tasks/<slug:slug>/quota/", quota_apis.TaskQuotaApi.as_view(), name="api-task-quota"),
    path(
        "tasks/<slug:slug>/files/", task_file_apis.TaskFileListApi.as_view(), name="api-task-files"
    ),
    path(
        "tasks/<slug:slug>/files/<int:pk>/",
        task_file_apis.TaskFileDownloadApi.as_view(),
        name="api-task-file",
    ),
    path(
        "tasks/<slug:slug>/fact-sheet/",
        fact_sheet_apis.FactSheetApi.as_view(),
        name="api-fact-sheet",
    ),
    path("tasks/<slug:slug>/team/", team_apis.MyTeamApi.as_view(), name="api-my-team"),
    path("teams/join/", team_apis.TeamJoinApi.as_view(), name="api-team-join"),
    path("teams/<int:pk>/", team_apis.TeamDetailApi.as_view(), name="api-team-detail"),
    path("teams/<int:pk>/invites/", team_apis.TeamInviteApi.as_view(), name="api-team-invite"),
    path("teams/<int:pk>/leave/", team_apis.TeamLeaveApi.as_view(), name="api-team-leave"),
    path(
        "teams/<int:pk>/members/<int:user_id>/",
        team_apis.TeamMemberRemoveApi.as_view(),
        name="api-team-member",
    ),
    path("submissions/", apis.SubmissionListApi.as_view(), name="api-submission-list"),
    path("submissions/<int:pk>/", apis.SubmissionDetailApi.as_view(), name="api-submission-detail"),
    path(
        "submissions/<int:pk>/cancel/",
        apis.SubmissionCancelApi.as_view(),
        name="api-submission-cancel",
    ),
    path(
        "submissions/<int:pk>/select/",
        apis.SubmissionSelectApi.as_view(),
        name="api-submission-select",
    ),
]
