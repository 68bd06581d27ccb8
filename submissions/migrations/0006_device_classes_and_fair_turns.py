"""Device classes (each with its own queue), the per-user queued limit, and run priority.

Tasks that required a GPU move to the ``gpu`` class; ``requires_gpu`` is then read from the class.
"""

from typing import Any

import django.db.models.deletion
import django.core.validators
from django.db import migrations, models

SEEDED = [
    ("cpu", "CPU", "Timed on the CPU of a worker without a GPU.", False),
    ("gpu", "GPU", "Timed with CUDA on any worker GPU.", True),
]


def seed_classes(apps: Any, schema_editor: Any) -> None:
    DeviceClass = apps.get_model("submissions", "DeviceClass")
    for slug, name, description, requires_gpu in SEEDED:
        DeviceClass.objects.get_or_create(
            slug=slug,
            defaults={"name": name, "description": description, "requires_gpu": requires_gpu},
        )


def classes_from_requires_gpu(apps: Any, schema_editor: Any) -> None:
    Task = apps.get_model("submissions", "Task")
    Task.objects.filter(requires_gpu=True).update(device_class="gpu")


def requires_gpu_from_classes(apps: Any, schema_editor: Any) -> None:
    Task = apps.get_model("submissions", "Task")
    Task.objects.filter(device_class__requires_gpu=True).update(requires_gpu=True)


class Migration(migrations.Migration):
    dependencies = [
        ("submissions", "0005_submission_static_costs"),
    ]

    operations = [
        migrations.CreateModel(
            name="DeviceClass",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("slug", models.SlugField(max_length=32, unique=True)),
                ("name", models.CharField(max_length=100)),
                ("description", models.TextField(blank=True)),
                (
                    "requires_gpu",
                    models.BooleanField(
                        default=True,
                        help_text="Submissions fail unless the CUDA execution provider runs them.",
                    ),
                ),
                (
                    "gpu_name_contains",
                    models.CharField(
                        blank=True,
                        help_text="CUDA workers whose GPU name contains this text (any case) serve this class, e.g. 'A40'. Empty: only workers started with EVAL_DEVICE_CLASSES naming it.",
                        max_length=100,
                    ),
                ),
            ],
            options={"ordering": ["slug"], "verbose_name_plural": "device classes"},
        ),
        migrations.RunPython(seed_classes, migrations.RunPython.noop),
        migrations.AddField(
            model_name="task",
            name="device_class",
            field=models.ForeignKey(
                default="cpu",
                help_text="The hardware submissions are timed on; only workers of this class take them.",
                on_delete=django.db.models.deletion.PROTECT,
                related_name="tasks",
                to="submissions.deviceclass",
                to_field="slug",
            ),
        ),
        migrations.RunPython(classes_from_requires_gpu, requires_gpu_from_classes),
        migrations.RemoveField(model_name="task", name="requires_gpu"),
        migrations.AddField(
            model_name="task",
            name="queued_per_user",
            field=models.PositiveIntegerField(
                default=5,
                help_text="How many submissions one user may have queued or running at once.",
                validators=[django.core.validators.MinValueValidator(1)],
            ),
        ),
        migrations.AddField(
            model_name="submission",
            name="priority",
            field=models.PositiveSmallIntegerField(default=0),
        ),
    ]
