from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate

# The device classes every portal has (migration 0004 seeds them too).
# (slug, name, description, requires_gpu, timing_sessions): a CPU's timing is the same from one
# session to the next, a GPU's is not (docs/benchmarks.md, "Latency between sessions").
SEEDED_DEVICE_CLASSES = [
    ("cpu", "CPU", "Timed on the CPU of a worker without a GPU.", False, 1),
    ("gpu", "GPU", "Timed with CUDA on any worker GPU.", True, 3),
]


def device_classes_seed(*, apps: Any = None, using: str = "default", **kwargs: Any) -> None:
    """Recreate the seeded device classes after migrate or flush, as Django does for content
    types: tasks default to ``cpu``, so that row must always exist."""
    from django.apps import apps as global_apps

    DeviceClass = (apps or global_apps).get_model("submissions", "DeviceClass")
    # A migration to an earlier state passes that state's model, before timing_sessions.
    has_sessions = any(f.name == "timing_sessions" for f in DeviceClass._meta.get_fields())
    for slug, name, description, requires_gpu, sessions in SEEDED_DEVICE_CLASSES:
        defaults = {"name": name, "description": description, "requires_gpu": requires_gpu}
        if has_sessions:
            defaults["timing_sessions"] = sessions
        DeviceClass.objects.using(using).get_or_create(slug=slug, defaults=defaults)


class SubmissionsConfig(AppConfig):
    name = "submissions"
    verbose_name = "Tasks and submissions"

    def ready(self) -> None:
        post_migrate.connect(device_classes_seed, sender=self)
