"""Who may see and change what: every page and endpoint, for anonymous, alice, bob, operator.

Each case names a request and the status each role must get. Every response a role receives is
also searched for what that role must never see: other people's errors and file names, worker
host names and pids, operator logs, unrevealed private scores, hidden tasks and leaderboards.
To cover a new endpoint, add a Case to CASES.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.test import Client

from accounts.models import ApiToken
from accounts.services import api_token_create
from submissions.models import Submission
from tests.conftest import onnx_upload

pytestmark = pytest.mark.django_db

ROLES = ["anonymous", "bob", "operator", "alice"]  # the owner last: her changes succeed
WORKER = "gpu-host-zq7.4242"
LOG = "operator-only-log-Zq"
PRIVATE = ["0.987654321", "0.876543219"]
HIDDEN_TITLE = "Secret Task Title Zq"
SEALED_SCORE = "0.777777"
ALICE_ERROR, BOB_ERROR = "alice-private-error-Zq", "bob-private-error-Zq"
ALICE_FILE, BOB_FILE = "alice-model-Zq.onnx", "bob-model-Zq.onnx"
STAFF_ONLY = [WORKER, LOG, *PRIVATE, HIDDEN_TITLE, SEALED_SCORE, "datasets/"]
NEVER_SHOWN_TO = {
    "anonymous": [*STAFF_ONLY, ALICE_ERROR, BOB_ERROR, ALICE_FILE, BOB_FILE],
    "alice": [*STAFF_ONLY, BOB_ERROR, BOB_FILE],
    "bob": [*STAFF_ONLY, ALICE_ERROR, ALICE_FILE],
    "operator": PRIVATE,  # outside the admin: private scores wait for the reveal, for everyone
}


@pytest.fixture(autouse=True)
def _fast_password_hashes(settings: Any) -> None:
    # Three users per case: argon2 is what production uses, but it is not what is tested here.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@dataclass
class World:
    ids: dict[str, Any]
    clients: dict[str, Client]

    def status_of(self, key: str) -> str:
        return Submission.objects.get(pk=self.ids[key]).status


def _submission(task: Any, user: Any, name: str, **fields: Any) -> Submission:
    submission = Submission(
        task=task,
        user=user,
        sha256=f"{Submission.objects.count():064d}",
        size_bytes=4,
        original_name=name,
        worker_name=WORKER,
        log=LOG,
        **fields,
    )
    submission.model_file.save(name, ContentFile(b"onnx"), save=False)
    submission.save()
    return submission


@pytest.fixture
def world(alice: Any, bob: Any, operator: Any, make_task: Any) -> World:
    digits = make_task()
    make_task(slug="secret-task", title=HIDDEN_TITLE, is_hidden=True)
    sealed = make_task(slug="sealed", leaderboard="hidden")
    done = dict(status="succeeded", score=0.5, metrics={"accuracy": 0.5})
    ids = {
        "alice_done": _submission(digits, alice, ALICE_FILE, score_private=0.987654321, **done).pk,
        "alice_failed": _submission(
            digits, alice, ALICE_FILE, status="failed", error_message=ALICE_ERROR
        ).pk,
        "alice_queued": _submission(digits, alice, ALICE_FILE).pk,
        "alice_queued_2": _submission(digits, alice, ALICE_FILE).pk,
        "bob_done": _submission(digits, bob, BOB_FILE, score_private=0.876543219, **done).pk,
        "bob_failed": _submission(
            digits, bob, BOB_FILE, status="failed", error_message=BOB_ERROR
        ).pk,
        "sealed_done": _submission(
            sealed, operator, "op.onnx", status="succeeded", score=0.777777
        ).pk,
        "alice_token": api_token_create(user=alice, name="a").token.pk,
        "alice_token_2": api_token_create(user=alice, name="b").token.pk,
    }
    ids["alice_model_path"] = Submission.objects.get(pk=ids["alice_done"]).model_file.name
    ids["dataset_path"] = digits.dataset.name
    clients = {"anonymous": Client()}
    for user in (alice, bob, operator):
        clients[user.username] = Client()
        clients[user.username].force_login(user)
    return World(ids=ids, clients=clients)


@dataclass(frozen=True)
class Case:
    method: str
    path: str  # formatted with World.ids
    anonymous: int
    alice: int
    bob: int
    operator: int
    data: Callable[[], dict[str, Any]] | None = None
    # For requests that change data: what must stay the same when the request is refused.
    unchanged: Callable[[World], Any] | None = None
    admin: bool = field(default=False)  # staff pages that show operator data by design

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


def everyone(method: str, path: str, status: int = 200, **kw: Any) -> Case:
    return Case(method, path, status, status, status, status, **kw)


def staff_only(method: str, path: str, *, anonymous: int, others: int, **kw: Any) -> Case:
    return Case(method, path, anonymous, others, others, 200, **kw)


def junk_model() -> dict[str, Any]:
    return {"file": onnx_upload(b"junk"), "task": "digits"}


def hidden_junk() -> dict[str, Any]:
    return {"file": onnx_upload(b"junk"), "task": "secret-task"}


def queued(key: str) -> Callable[[World], Any]:
    return lambda w: w.status_of(key)


def token_state(key: str) -> Callable[[World], Any]:
    return lambda w: ApiToken.objects.get(pk=w.ids[key]).revoked_at


CASES = [
    # Pages
    everyone("GET", "/"),
    everyone("GET", "/tasks/digits/"),
    everyone("GET", "/tasks/sealed/"),  # the page shows; its leaderboard does not
    staff_only("GET", "/tasks/secret-task/", anonymous=404, others=404),
    Case("GET", "/tasks/digits/submit/", 302, 200, 200, 200),
    Case("GET", "/tasks/secret-task/submit/", 302, 404, 404, 200),
    Case("POST", "/tasks/digits/submit/", 302, 400, 400, 400, data=junk_model),
    Case("POST", "/tasks/secret-task/submit/", 302, 404, 404, 400, data=junk_model),
    Case("GET", "/submissions/", 302, 200, 200, 200),
    Case("GET", "/submissions/{alice_done}/", 302, 200, 404, 404),
    Case("GET", "/submissions/{alice_failed}/", 302, 200, 404, 404),
    Case("GET", "/submissions/{bob_failed}/", 302, 404, 200, 404),
    Case(
        "POST",
        "/submissions/{alice_queued}/cancel/",
        302,
        302,
        404,
        404,
        unchanged=queued("alice_queued"),
    ),
    staff_only("GET", "/submissions/{alice_done}/model/", anonymous=302, others=302),
    everyone("GET", "/media/{alice_model_path}", 404),
    everyone("GET", "/media/{dataset_path}", 404),
    everyone("GET", "/static/../var/portal.sqlite3", 404),
    # API
    everyone("GET", "/api/tasks/"),
    everyone("GET", "/api/tasks/digits/"),
    staff_only("GET", "/api/tasks/secret-task/", anonymous=404, others=404),
    everyone("GET", "/api/tasks/digits/leaderboard/"),
    staff_only("GET", "/api/tasks/sealed/leaderboard/", anonymous=404, others=404),
    staff_only("GET", "/api/tasks/secret-task/leaderboard/", anonymous=404, others=404),
    Case("GET", "/api/tasks/digits/quota/", 401, 200, 200, 200),
    Case("GET", "/api/tasks/secret-task/quota/", 401, 404, 404, 200),
    Case("GET", "/api/submissions/", 401, 200, 200, 200),
    Case("POST", "/api/submissions/", 401, 400, 400, 400, data=junk_model),
    # A hidden task reads as an unknown one: 400 {"task": ["No task 'secret-task'."]}.
    Case("POST", "/api/submissions/", 401, 400, 400, 400, data=hidden_junk),
    Case("GET", "/api/submissions/{alice_done}/", 401, 200, 404, 404),
    Case("GET", "/api/submissions/{alice_failed}/", 401, 200, 404, 404),
    Case("GET", "/api/submissions/{bob_done}/", 401, 404, 200, 404),
    Case(
        "POST",
        "/api/submissions/{alice_queued_2}/cancel/",
        401,
        200,
        404,
        404,
        unchanged=queued("alice_queued_2"),
    ),
    Case("GET", "/api/auth/tokens/", 401, 200, 200, 200),
    Case(
        "DELETE",
        "/api/auth/tokens/{alice_token}/",
        401,
        204,
        404,
        404,
        unchanged=token_state("alice_token"),
    ),
    everyone("POST", "/api/auth/token/", 400, data=lambda: {"username": "alice", "password": "x"}),
    everyone("GET", "/api/schema/"),
    everyone("GET", "/api/docs/"),
    # Accounts
    everyone("GET", "/accounts/login/"),
    Case("GET", "/accounts/signup/", 200, 302, 302, 302),
    Case("GET", "/accounts/profile/", 302, 200, 200, 200),
    Case("POST", "/accounts/tokens/new/", 302, 200, 200, 200, data=lambda: {"name": "n"}),
    Case(
        "POST",
        "/accounts/tokens/{alice_token_2}/revoke/",
        302,
        302,
        404,
        404,
        unchanged=token_state("alice_token_2"),
    ),
    Case("GET", "/accounts/password/change/", 302, 200, 200, 200),
    Case(
        "POST",
        "/accounts/password/change/",
        302,
        200,  # the form again: the old password is wrong
        200,
        200,
        data=lambda: {"old_password": "x", "new_password1": "y", "new_password2": "y"},
    ),
    everyone("GET", "/accounts/password/reset/"),
    everyone("POST", "/accounts/password/reset/", 302, data=lambda: {"email": "a@example.org"}),
    everyone("GET", "/accounts/password/reset/MQ/bad-token/"),  # "this link does not work"
    Case("POST", "/accounts/signup/", 400, 302, 302, 302, data=lambda: {"username": ""}),
    # Admin and the queue dashboard
    staff_only("GET", "/admin/", anonymous=302, others=302, admin=True),
    staff_only("GET", "/admin/submissions/submission/", anonymous=302, others=302, admin=True),
    staff_only(
        "GET",
        "/admin/submissions/submission/{alice_done}/change/",
        anonymous=302,
        others=302,
        admin=True,
    ),
    staff_only("GET", "/admin/submissions/task/", anonymous=302, others=302, admin=True),
    staff_only("GET", "/admin/accounts/apitoken/", anonymous=302, others=302, admin=True),
    staff_only("GET", "/admin/django-rq/", anonymous=302, others=302, admin=True),
]


def _request(client: Client, case: Case, path: str) -> Any:
    data = case.data() if case.data else {}
    if case.method == "GET":
        return client.get(path)
    if case.method == "DELETE":
        return client.delete(path)
    return client.post(path, data)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_authorization_matrix(world: World, case: Case, queue: Any) -> None:
    path = case.path.format(**world.ids)
    problems = []
    for role in ROLES:
        before = case.unchanged(world) if case.unchanged else None
        response = _request(world.clients[role], case, path)
        expected = getattr(case, role)
        if response.status_code != expected:
            problems.append(f"{role}: {response.status_code}, expected {expected}")
        to_login = response.status_code == 302 and "/login/" in response["Location"]
        refused = to_login or response.status_code in (401, 403, 404, 405)
        if refused and case.unchanged and case.unchanged(world) != before:
            problems.append(f"{role}: was refused but the data changed")
        # Where signed-in users get an answer and anonymous a redirect, it must be to log in.
        login_wall = case.anonymous == 302 and case.alice != 302
        if role == "anonymous" and login_wall and not to_login:
            problems.append(f"{role}: redirected to {response['Location']}, not to log in")
        body = b"".join(response) if response.streaming else response.content
        text = body.decode(errors="replace")
        if not (case.admin and role == "operator"):
            leaks = [secret for secret in NEVER_SHOWN_TO[role] if secret in text]
            if leaks:
                problems.append(f"{role}: response shows {leaks}")
    assert not problems, "\n".join(problems)


def test_private_scores_appear_once_the_operator_reveals_them(world: World) -> None:
    alice = world.clients["alice"]
    path = f"/api/submissions/{world.ids['alice_done']}/"
    assert "score_private" not in alice.get(path).json()
    Submission.objects.get(pk=world.ids["alice_done"]).task.__class__.objects.filter(
        slug="digits"
    ).update(private_revealed=True)
    assert alice.get(path).json()["score_private"] == pytest.approx(0.987654321)
    page = alice.get(f"/submissions/{world.ids['alice_done']}/").content.decode()
    assert "0.9877" in page  # evaluation.formats.score: four significant digits


def test_the_operator_downloads_the_model_file_it_was_given(world: World) -> None:
    response = world.clients["operator"].get(f"/submissions/{world.ids['alice_done']}/model/")
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == b"onnx"
    assert ALICE_FILE in response["Content-Disposition"]
