from __future__ import annotations

from django.urls import path

from workers import apis, views

urlpatterns = [
    path("workers/", views.workers_page, name="workers"),
    path("workers/cards/", views.worker_cards_fragment, name="worker-cards"),
    path("api/workers/", apis.WorkerListApi.as_view(), name="api-workers"),
    path("api/queue/", apis.QueueApi.as_view(), name="api-queue"),
    path("metrics", apis.metrics_view, name="metrics"),
]
