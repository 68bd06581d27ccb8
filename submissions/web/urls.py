from __future__ import annotations

from django.urls import path

from submissions.web import challenge_views, team_views, views

urlpatterns = [
    path("", views.task_list, name="task-list"),
    path("challenges/", challenge_views.challenge_list, name="challenge-list"),
    path("challenges/<slug:slug>/", challenge_views.challenge_detail, name="challenge-detail"),
    path(
        "challenges/<slug:slug>/register/",
        challenge_views.challenge_register_view,
        name="challenge-register",
    ),
    path("tasks/<slug:slug>/", views.task_detail, name="task-detail"),
    path("tasks/<slug:slug>/leaderboard.csv", views.leaderboard_csv, name="leaderboard-csv"),
    path("tasks/<slug:slug>/files/<int:pk>/", views.task_file_download, name="task-file"),
    path("tasks/<slug:slug>/submit/", views.task_upload, name="task-upload"),
    path(
        "tasks/<slug:slug>/fact-sheet/",
        challenge_views.fact_sheet_view,
        name="task-fact-sheet",
    ),
    path("tasks/<slug:slug>/team/", team_views.my_team, name="task-team"),
    path("teams/<int:pk>/", team_views.team_detail, name="team-detail"),
    path("teams/join/<str:code>/", team_views.team_join_view, name="team-join"),
    path("submissions/", views.submission_list, name="submission-list"),
    path("tasks/<slug:slug>/finals/", views.final_selection_view, name="task-finals"),
    path("submissions/<int:pk>/select/", views.submission_select_view, name="submission-select"),
    path("submissions/<int:pk>/", views.submission_detail, name="submission-detail"),
    path("submissions/<int:pk>/model/", views.submission_model_download, name="submission-model"),
    path("submissions/<int:pk>/cancel/", views.submission_cancel_view, name="submission-cancel"),
]
