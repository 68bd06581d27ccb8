"""Create the demo: users, the digits, depth and super-resolution tasks, a two-phase challenge
(efficient super-resolution, with a main board and an efficiency track on each phase), and
baseline submissions (queued).

The tasks are timed on the ``gpu`` device class when this machine has a GPU the workers can use
(the worker's own device rule), and on ``cpu`` otherwise, so the demo's workers can run them.

Idempotent: running it again creates only what is missing.
"""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import numpy as np
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management.base import BaseCommand
from django.utils import timezone

from submissions.boards.tracks import track_create
from submissions.challenges.services import challenge_register
from submissions.demo import baselines, datasets, super_resolution
from submissions.demo.tasks import (
    CHALLENGE,
    CHALLENGE_PHASES,
    DEMO_USERS,
    EFFICIENCY_TRACK,
    TASKS,
)
from submissions.lifecycle.services import submission_create
from submissions.models import Announcement, Challenge, DeviceClass, Submission, Task, Track
from submissions.models.task_files import TaskFile
from submissions.notifications.announcements import announcement_post
from submissions.tasks.datasets import task_dataset_replace
from submissions.tasks.files import task_file_publish
from workers.classes import detected_device

TRAINING_TITLE = "Training rows"
STARTER_TITLE = "Starter script"


class Command(BaseCommand):
    help = "Create demo users, tasks and baseline submissions."

    def handle(self, *args: Any, **options: Any) -> None:
        users = get_user_model().objects
        for username, password, staff in DEMO_USERS:
            if not users.filter(username=username).exists():
                users.create_user(username, password=password, is_staff=staff, is_superuser=staff)
        digits = self._task("digits", lambda: datasets.load_digits_test())
        self._publish(digits, "digits-train.npz", datasets.digits_training_rows)
        self._baselines(digits, baselines.digits_baselines(datasets.load_digits_train()))
        depth = self._task("depth-448", lambda: datasets.build_depth_dataset(n=32, seed=0))
        self._publish(depth, "depth-train.npz", datasets.build_depth_training)
        self._baselines(depth, baselines.depth_baselines())
        sr = self._task("sr-x2", lambda: super_resolution.build_sr_dataset(n=64, seed=0))
        # No starter: it fits classifiers and per-pixel regressors, not an upscaler.
        self._publish(sr, "sr-x2-train.npz", super_resolution.build_sr_training, starter=False)
        self._baselines(sr, super_resolution.sr_baselines())
        self._challenge()
        self.stdout.write(
            self.style.SUCCESS(
                "Demo ready: tasks 'digits', 'depth-448' and 'sr-x2', and the challenge "
                f"'{CHALLENGE['slug']}'."
            )
        )

    def _challenge(self) -> None:
        """The challenge, its phases with an efficiency track each, the demo's participants
        registered, and the development phase's baselines."""
        now = timezone.now()
        challenge, created = Challenge.objects.get_or_create(
            slug=CHALLENGE["slug"], defaults=CHALLENGE
        )
        phases = []
        for order, (slug, seed, opens, closes) in enumerate(CHALLENGE_PHASES, start=1):
            phase = self._task(
                slug,
                lambda seed=seed: super_resolution.build_sr_dataset(n=64, seed=seed),
                challenge=challenge,
                phase_order=order,
                opens_at=now + timedelta(days=opens),
                closes_at=now + timedelta(days=closes),
            )
            if not Track.objects.filter(task=phase, slug=EFFICIENCY_TRACK["slug"]).exists():
                track_create(task_id=phase.pk, **EFFICIENCY_TRACK)
            phases.append(phase)
        if created:
            challenge.starts_at, challenge.ends_at = phases[0].opens_at, phases[-1].closes_at
            challenge.save(update_fields=["starts_at", "ends_at"])
            self.stdout.write(f"created challenge {challenge.slug}")
        models = super_resolution.sr_baselines()
        users = get_user_model().objects
        entrants = [users.get(username=name) for name, _, staff in DEMO_USERS if not staff]
        # the baselines' accounts enter as any participant does
        entrants += [self._baseline_user(baseline.name) for baseline in models]
        for user in entrants:
            challenge_register(user=user, challenge_id=challenge.pk, accept_terms=True)
        self._baselines(phases[0], models)
        if not Announcement.objects.filter(challenge=challenge).exists():
            announcement_post(
                announcement=Announcement(
                    challenge=challenge,
                    title="Development phase open",
                    body="Submit to the development phase now; the test phase opens when it "
                    "closes. Each phase ranks PSNR and, on its *Efficiency* tab, speed.",
                    email=False,  # the demo's accounts have no addresses
                )
            )

    def _task(self, slug: str, arrays: Any, **fields: Any) -> Task:
        task = Task.objects.filter(slug=slug).first()
        if task is not None:
            return task
        device, _ = detected_device()
        device_class = DeviceClass.objects.get(slug="gpu" if device == "cuda" else "cpu")
        task = Task(slug=slug, device_class=device_class, **TASKS[slug], **fields)
        buffer = io.BytesIO()
        np.savez(buffer, **arrays())
        task.dataset.save(f"{slug}.npz", ContentFile(buffer.getvalue()), save=False)
        task.save()
        task_dataset_replace(task_id=task.pk, note="demo dataset")  # its version 1
        self.stdout.write(f"created task {slug}")
        return task

    def _publish(self, task: Task, filename: str, rows: Any, *, starter: bool = True) -> None:
        """The task's training rows and the starter script, on its page's data section."""
        published = set(TaskFile.objects.filter(task=task).values_list("title", flat=True))
        if TRAINING_TITLE not in published:
            task_file_publish(
                task=task,
                title=TRAINING_TITLE,
                filename=filename,
                content=datasets.npz_bytes(rows()),
                description="inputs and targets as in the hidden set; no row of it is hidden.",
            )
        if not starter:
            return
        task_file_publish(
            task=task,
            title=STARTER_TITLE,
            filename="starter.py",
            content=datasets.STARTER_PATH.read_bytes(),
            description=f"Fits a trivial model with numpy and exports ONNX without PyTorch: "
            f"python starter.py {filename}",
            position=1,
        )

    def _baseline_user(self, name: str) -> Any:
        user, created = get_user_model().objects.get_or_create(username=f"baseline-{name}")
        if created:
            user.set_unusable_password()
            user.save()
        return user

    def _baselines(self, task: Task, models: list[baselines.Baseline]) -> None:
        for baseline in models:
            user = self._baseline_user(baseline.name)
            if Submission.objects.filter(user=user, task=task).exists():
                continue
            upload = SimpleUploadedFile(f"{baseline.name}.onnx", baseline.onnx_bytes)
            submission = submission_create(
                user=user, task=task, upload=upload, description=baseline.description
            )
            Submission.objects.filter(pk=submission.pk).update(is_baseline=True)
            self.stdout.write(f"queued baseline {baseline.name} on {task.slug}")
