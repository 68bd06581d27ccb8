from __future__ import annotations

from django.urls import path

from submissions import views

urlpatterns = [
    path("", views.task_list, name="task-list"),
    path("tasks/<slug:slug>/", views.task_detail, name="task-detail"),
    path("tasks/<slug:slug>/leaderboard.csv", views.leaderboard_csv, name="leaderboard-csv"),
    path("tasks/<slug:slug>/submit/", views.task_upload, name="task-upload"),
    path("submissions/", views.submission_list, name="submission-list"),
    path("submissions/<int:pk>/", views.submission_detail, name="submission-detail"),
    path("submissions/<int:pk>/model/", views.submission_model_download, name="submission-model"),
    path("submissions/<int:pk>/cancel/", views.submission_cancel_view, name="submission-cancel"),
]
