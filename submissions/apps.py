from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate

# The device classes every portal has (migration 0004 seeds them too).
SEEDED_DEVICE_CLASSES = [
    ("cpu", "CPU", "Timed on the CPU of a worker without a GPU.", False),
    ("gpu", "GPU", "Timed with CUDA on any worker GPU.", True),
]


def device_classes_seed(*, apps: Any = None, using: str = "default", **kwargs: Any) -> None:
    """Recreate the seeded device classes after migrate or flush, as Django does for content
    types: tasks default to ``cpu``, so that row must always exist."""
    from django.apps import apps as global_apps

    DeviceClass = (apps or global_apps).get_model("submissions", "DeviceClass")
    for slug, name, description, requires_gpu in SEEDED_DEVICE_CLASSES:
        DeviceClass.objects.using(using).get_or_create(
            slug=slug,
            defaults={"name": name, "description": description, "requires_gpu": requires_gpu},
        )


class SubmissionsConfig(AppConfig):
    name = "submissions"
    verbose_name = "Tasks and submissions"

    def ready(self) -> None:
        post_migrate.connect(device_classes_seed, sender=self)
