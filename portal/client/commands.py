"""The ``oep`` commands: each takes the parsed arguments and returns the exit status."""

from __future__ import annotations

import argparse
import getpass
import hashlib
import json
import socket
import sys
import time
from pathlib import Path
from typing import Any

from evaluation import formats
from evaluation.sizes import mib_text
from portal.client import display
from portal.client.api import PortalApi, Refused, copy_stream
from portal.client.config import config_load, config_save
from portal.client.errors import ClientError

POLL_S = 1.0


def _api(args: argparse.Namespace, *, wait: bool = False) -> PortalApi:
    config = config_load()
    return PortalApi(config.url, config.token, wait_on_rate_limit=wait)


def _ask(prompt: str, default: str = "") -> str:
    shown = f"{prompt} [{default}]: " if default else f"{prompt}: "
    try:
        answer = input(shown).strip()
    except EOFError:
        answer = ""
    return answer or default


def login(args: argparse.Namespace) -> int:
    current = config_load()
    url = (args.url or _ask("Portal URL", current.url)).rstrip("/")
    if args.token:
        api = PortalApi(url, args.token)
        api.get("/api/submissions/", limit=1)  # a refused token fails here, not on first use
        token, who = args.token, "with the given token"
    else:
        username = args.username or _ask("Username")
        if args.password_stdin:
            password = sys.stdin.readline().rstrip("\n")
        else:
            password = getpass.getpass("Password: ")
        name = f"oep on {socket.gethostname()}"[:100]
        answer = PortalApi(url).post_json(
            "/api/auth/token/",
            {"username": username, "password": password, "name": name},
            authenticated=False,
        )
        token, who = answer["token"], f"as {username}"
    path = config_save(url=url, token=token)
    print(f"Logged in to {url} {who}; the token is saved in {path} (readable by you only).")
    return 0


def tasks(args: argparse.Namespace) -> int:
    rows = [
        [
            t["slug"],
            t["title"],
            t["metric"],
            "x".join(str(d) for d in t["batch_shape"]) + f" {t['input_dtype']}",
            "open" if t["is_open"] else "closed",
        ]
        for t in _api(args).get("/api/tasks/")
    ]
    display.table(["TASK", "TITLE", "METRIC", "INPUT", "STATE"], rows)
    return 0


def _options(options: dict[str, Any]) -> str:
    """The task's metric options as the API gives them: "crop_border 2 · y_channel false"."""
    return " · ".join(f"{name} {json.dumps(value)}" for name, value in options.items())


def challenges(args: argparse.Namespace) -> int:
    """The challenges you can see; with a slug, that challenge's phases in order."""
    api = _api(args)
    if args.slug:
        c = api.get(f"/api/challenges/{args.slug}/")
        rows = [
            [str(p["number"]), p["task"], p["title"], p["state"], p["opens_at"] or "-",
             p["closes_at"] or "-"]
            for p in c["phases"]
        ]  # fmt: skip
        display.table(["PHASE", "TASK", "TITLE", "STATE", "OPENS", "CLOSES"], rows)
        print(f"Registration: {c['registration'] or 'not registered'}")
        return 0
    rows = [
        [c["slug"], c["title"], c["visibility"], c["starts_at"] or "-", c["ends_at"] or "-"]
        for c in api.get("/api/challenges/")
    ]
    display.table(["CHALLENGE", "TITLE", "VISIBILITY", "STARTS", "ENDS"], rows)
    return 0


def task(args: argparse.Namespace) -> int:
    t = _api(args).get(f"/api/tasks/{args.slug}/")
    direction = "higher is better" if t["higher_is_better"] else "lower is better"
    display.fields(
        [
            ("Task", f"{t['slug']}: {t['title']}"),
            ("Metric", f"{t['metric_label']} ({t['metric']}, {direction})"),
            *([("Options", _options(t["metric_options"]))] if t.get("metric_options") else []),
            ("Input", f"{t['batch_shape']} {t['input_dtype']} (batch {t['batch_size']})"),
            ("Output", f"{[t['batch_size'], *t['output_shape']]}"),
            ("Device", t["device_class"] + (" (GPU required)" if t["requires_gpu"] else "")),
            ("Model size", f"up to {mib_text(t['max_model_bytes'])}"),
            ("Time limit", f"{t['time_limit_s']:g} s"),
            ("Per day", t["submissions_per_day"]),
            ("In total", t["submissions_total"] or "no limit"),
            ("Opens", display.local_time(t["opens_at"])),
            ("Closes", display.local_time(t["closes_at"])),
            ("State", "open" if t["is_open"] else "closed"),
        ]
    )
    if t.get("device_notice"):
        print(f"\n{t['device_notice']}")
    if t.get("description"):
        print(f"\n{t['description']}")
    return 0


def check(args: argparse.Namespace) -> int:
    from evaluation.inspect import ModelRejected  # onnx and onnxruntime: only for this command
    from evaluation.runner import EvaluationError
    from portal.client.check import RUN, UPLOAD, model_check

    path = Path(args.model)
    if not path.is_file():
        raise ClientError(f"no such file: {path}")
    task_data = _api(args).get(f"/api/tasks/{args.slug}/")
    try:
        report = model_check(path, task_data, memory_limit_mb=args.memory_limit_mb)
    except ModelRejected as exc:
        raise ClientError(f"{UPLOAD}: {exc}") from exc
    except EvaluationError as exc:
        raise ClientError(f"{RUN}: {exc}") from exc
    info = report.info
    print(
        f"OK: {path.name} passes the portal's checks for '{args.slug}': input '{info.input_name}' "
        f"{info.input_shape} {info.input_dtype}, output {list(report.output_shape)} "
        f"{report.output_dtype}, finite, {report.seconds_per_batch * 1000:.1f} ms per batch here "
        "on CPU. The score needs the hidden data: submit to get it."
    )
    return 0


def _quota_hint(api: PortalApi, slug: str) -> str:
    try:
        quota = api.get(f"/api/tasks/{slug}/quota/")
    except ClientError:
        return ""
    if quota["left"] > 0 or quota["left_total"] == 0 or not quota["next_slot_at"]:
        return ""
    return f"\nNext free slot: {display.local_time(quota['next_slot_at'])}."


def submit(args: argparse.Namespace) -> int:
    path = Path(args.model)
    if not path.is_file():
        raise ClientError(f"no such file: {path}")
    api = _api(args, wait=args.wait)
    fields = {"task": args.slug, "description": args.description}
    try:
        created = api.post_file("/api/submissions/", fields, "file", path)
    except Refused as exc:
        raise ClientError(str(exc) + _quota_hint(api, args.slug)) from exc
    print(
        f"Submission {created['id']} is {created['status']}: {api.absolute(created['url'])}",
        flush=True,  # the id is there even if the wait is cut short
    )
    if created.get("notice"):
        print(created["notice"], file=sys.stderr)
    if not args.wait:
        return 0
    return _wait_for(api, created["id"])


def _wait_for(api: PortalApi, submission_id: int) -> int:
    bar = display.ProgressBar()
    try:
        while True:
            # The server holds the answer up to POLL_S until the submission is final, so its
            # result shows the moment it is saved; the bar moves once a POLL_S meanwhile.
            began = time.monotonic()
            current = api.get(f"/api/submissions/{submission_id}/", wait=POLL_S)
            bar.show(current)
            if current["status"] in display.FINAL:
                break
            time.sleep(max(0.0, POLL_S - (time.monotonic() - began)))  # answered without a wait
    except KeyboardInterrupt:
        bar.close()
        raise ClientError(
            f"Stopped waiting; submission {submission_id} goes on (`oep status {submission_id}`).",
            exit_status=130,
        ) from None
    bar.close()
    return _final(current)


def _score(s: dict[str, Any]) -> str:
    """The score, or "blind" while the task's board hides scores, or "withheld" while the task
    is withdrawn (the API then omits them)."""
    if s.get("task_withdrawn"):
        return "withheld"
    return "blind" if s.get("scores_blind") else formats.score(s.get("score"))


def _other_metrics(s: dict[str, Any]) -> dict[str, str]:
    """The metrics besides the score, labelled and written as the site writes them."""
    primary = str((s.get("display") or {}).get("metric_label", ""))
    shown = formats.metrics(s.get("metrics") or {})
    return {label: value for label, value in shown.items() if label != primary}


def _task(s: dict[str, Any]) -> str:
    """The task's slug; the API leaves it out (null) while the organisers have withdrawn it."""
    return str(s["task"]) if s.get("task") else "a withdrawn task"


def _final(s: dict[str, Any]) -> int:
    if s["status"] == "succeeded" and s.get("task_withdrawn"):
        print(f"Submission {s['id']} succeeded; its task is withdrawn, so no result is shown.")
        return 0
    if s["status"] == "succeeded":
        print(
            f"Submission {s['id']} succeeded: score {_score(s)}, "
            f"p50 {formats.latency(s['latency_p50_ms'])} per batch on {s['device_name']}."
        )
        return 0
    reason = s.get("error_message") or "no reason given"
    raise ClientError(f"Submission {s['id']} {s['status']}: {reason}")


def status(args: argparse.Namespace) -> int:
    s = _api(args).get(f"/api/submissions/{args.id}/")
    pairs: list[tuple[str, Any]] = [
        ("Submission", s["id"]),
        ("Task", _task(s)),
        ("File", f"{s['original_name']} ({formats.size(s['size_bytes'])})"),
        ("Status", s["status"] + (f" ({s['progress']:.0%})" if s["status"] == "running" else "")),
        ("Submitted", display.local_time(s["created_at"])),
        ("Finished", display.local_time(s["finished_at"])),
    ]
    if s.get("queue_position"):
        pairs.append(("Queue", f"{s['queue_position']} ahead"))
    if s["status"] == "succeeded" and not s.get("task_withdrawn"):
        pairs += [
            ("Score", _score(s)),
            (
                "Metrics",
                ", ".join(f"{k} {v}" for k, v in _other_metrics(s).items()),
            ),
            (
                "Latency",
                f"p50 {formats.latency(s['latency_p50_ms'])} "
                f"{formats.spread(s.get('latency_spread'))} per batch".replace("  ", " "),
            ),
            ("Throughput", formats.throughput(s.get("throughput"))),
            ("Ran on", f"{s['device_name']} ({s['provider']})"),
        ]
    if s.get("flops") is not None:
        partial = "≥ " if s.get("costs_complete") is False else ""
        pairs.append(
            (
                "Costs",
                f"{partial}{formats.si(s['flops'])} FLOPs at the batch shape, "
                f"{formats.si(s['parameters'])} parameters",
            )
        )
        if s.get("costs_incomplete_reason"):
            pairs.append(("Incomplete", f"not counted in full: {s['costs_incomplete_reason']}"))
    if s.get("selected"):
        pairs.append(("Final", "selected for the private board"))
    for notice in s.get("notices") or []:
        pairs.append(("Notice", notice))
    if s.get("error_message"):
        pairs.append(("Error", s["error_message"]))
    if s.get("description"):
        pairs.append(("Description", s["description"]))
    display.fields(pairs)
    return 0


def select(args: argparse.Namespace) -> int:
    """Select (or with --unselect, unselect) a final; the server says why when it refuses."""
    method = "DELETE" if args.unselect else "POST"
    s = _api(args).request(method, f"/api/submissions/{args.id}/select/").json()
    state = "is one of your finals" if s.get("selected") else "is not one of your finals"
    print(f"Submission {s['id']} ({_task(s)}) {state}.")
    return 0


def submissions(args: argparse.Namespace) -> int:
    page = _api(args).get("/api/submissions/", limit=args.limit)
    rows = [
        [
            s["id"],
            _task(s),
            s["status"],
            _score(s),
            display.local_time(s["created_at"]),
            s["original_name"],
        ]
        for s in page["results"]
    ]
    display.table(["ID", "TASK", "STATUS", "SCORE", "SUBMITTED", "FILE"], rows)
    if page["count"] > len(rows):
        print(f"({len(rows)} of {page['count']}; --limit for more)", file=sys.stderr)
    return 0


def quota(args: argparse.Namespace) -> int:
    q = _api(args).get(f"/api/tasks/{args.slug}/quota/")
    total = "no limit" if q["total"] is None else f"{q['used_total']} of {q['total']} used"
    display.fields(
        [
            ("Left now", q["left"]),
            ("Last 24 hours", f"{q['used_today']} of {q['per_day']} used"),
            ("In total", total),
            ("Waiting to start", q["waiting"]),
            ("Next free slot", display.local_time(q["next_slot_at"])),
        ]
    )
    return 0


def _ranked_latency(row: dict[str, Any]) -> str:
    """The p50 the board ranks on and shows: a finalist's re-measured one, marked, where the
    server has one (an older server sends only the evaluation's own)."""
    ms = row.get("ranked_latency_p50_ms", row["latency_p50_ms"])
    again = " (re-measured)" if row.get("remeasured_sessions") else ""
    return formats.latency(ms) + again


def leaderboard(args: argparse.Namespace) -> int:
    api = _api(args)
    which = {"board": args.board, **({"track": args.track} if args.track else {})}
    if args.csv:  # the server's CSV, the same file as the page's download link
        response = api.request("GET", f"/tasks/{args.slug}/leaderboard.csv", params=which)
        sys.stdout.write(response.content.decode("utf-8"))
        return 0
    board = api.get(f"/api/tasks/{args.slug}/leaderboard/", **which, page_size=args.limit)
    rows = [
        [
            r["rank"],
            r["user"] + (" (baseline)" if r["is_baseline"] else ""),
            formats.score(r["score"]),
            _ranked_latency(r),
            r["submission_id"],
            display.local_time(r["submitted_at"]),
        ]
        for r in board["rows"]
    ]
    direction = "higher" if board["higher_is_better"] else "lower"
    label = formats.metric_label(board["metric"])
    track = f", track {board['track']}" if board.get("track") else ""
    print(f"{board['task']}: {board['board']} board{track}, {label} ({direction} is better)")
    print(board["ranking"]["description"])
    display.table(["RANK", "USER", "SCORE", "P50 / BATCH", "SUBMISSION", "SUBMITTED"], rows)
    return 0


def download(args: argparse.Namespace) -> int:
    """Each file of the task's data section into ``--dir`` (default ./SLUG), checked by sha256."""
    api = _api(args)
    files = api.get(f"/api/tasks/{args.slug}/files/")
    target = Path(args.dir or args.slug)
    target.mkdir(parents=True, exist_ok=True)
    if not files:
        print(f"Task '{args.slug}' publishes no files.")
    for entry in files:
        _download_one(api, entry, target)
    return 0


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _download_one(api: PortalApi, entry: dict[str, Any], target: Path) -> None:
    name = Path(str(entry["name"])).name  # a name, never a path out of the target folder
    if name in ("", ".", "..") or name.startswith("."):
        raise ClientError(f"refusing to write a file named {entry['name']!r}")
    path = target / name
    if path.is_file() and _sha256(path) == entry["sha256"]:
        print(f"{path}: already here")
        return
    partial = path.with_name(path.name + ".part")
    with api.stream(entry["url"]) as response, partial.open("wb") as out:
        for _ in copy_stream(response, out):
            pass
    if _sha256(partial) != entry["sha256"]:
        partial.unlink()
        raise ClientError(f"{name}: the download does not match its sha256; try again")
    partial.replace(path)
    print(f"{path}: {path.stat().st_size} bytes")
