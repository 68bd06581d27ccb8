"""Admin for notifications: operators manage each task's webhooks and read the delivery log."""

from __future__ import annotations

from django.contrib import admin
from django.db import models
from django.http import HttpRequest

from submissions.models.notifications import Notification, Webhook, WebhookDelivery

LOG_FIELDS = ["created_at", "attempt", "ok", "status_code", "error", "duration_ms"]


class _ReadOnly:
    """Log rows are written by the notifier only."""

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class DeliveryInline(_ReadOnly, admin.TabularInline):
    model = WebhookDelivery
    fields = ["notification", *LOG_FIELDS]
    readonly_fields = ["notification", *LOG_FIELDS]
    extra = 0
    max_num = 0
    ordering = ["-created_at", "-id"]
    show_change_link = True


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    list_display = ["url", "task", "on_succeeded", "on_failed", "on_cancelled", "active"]
    list_filter = ["active", "task"]
    search_fields = ["url", "task__slug"]
    fields = ["task", "url", "secret", "on_succeeded", "on_failed", "on_cancelled", "active"]
    inlines = [DeliveryInline]
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}  # Django 6's default


@admin.register(Notification)
class NotificationAdmin(_ReadOnly, admin.ModelAdmin):
    list_display = ["submission", "run", "status", "created_at", "dispatched_at", "email"]
    list_filter = ["status", "email"]
    search_fields = ["submission__id"]
    readonly_fields = ["submission", "run", "status", "created_at", "dispatched_at", "email"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(_ReadOnly, admin.ModelAdmin):
    list_display = ["notification", "webhook", *LOG_FIELDS]
    list_filter = ["ok", "webhook"]
    readonly_fields = ["notification", "webhook", *LOG_FIELDS]
