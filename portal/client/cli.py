"""``oep``: argument parsing and the entry point of the console script."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from portal.client import commands
from portal.client.errors import ClientError

Command = Callable[[argparse.Namespace], int]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="oep",
        description="Take part in the portal's ONNX model competitions from the command line.",
        epilog="Configuration: OEP_CONFIG (the file login writes), OEP_URL, OEP_TOKEN.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, run: Command, help: str) -> argparse.ArgumentParser:
        command = sub.add_parser(name, help=help, description=help)
        command.set_defaults(run=run)
        return command

    login = add("login", commands.login, "Get an API token and keep it for the other commands.")
    login.add_argument("--url", help="the portal's address, e.g. https://portal.example.org")
    login.add_argument("--username")
    login.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    login.add_argument("--token", help="use this API token instead of a username and password")

    add("tasks", commands.tasks, "List the tasks you can see.")
    add(
        "challenges",
        commands.challenges,
        "List the challenges you can see, or one challenge's phases in order.",
    ).add_argument("slug", nargs="?", help="a challenge: list its phases and your registration")
    add("task", commands.task, "Show one task's rules: shapes, metric, limits.").add_argument(
        "slug"
    )
    download = add("download", commands.download, "Download the files a task publishes.")
    download.add_argument("slug")
    download.add_argument(
        "--dir", help="where to put them (default: a folder named after the task)"
    )

    check = add(
        "check",
        commands.check,
        "Check a model locally with the server's own inspection and one run at the task's batch "
        "shape, before spending a submission.",
    )
    check.add_argument("slug")
    check.add_argument("model")
    check.add_argument(
        "--memory-limit-mb",
        type=int,
        default=0,
        help="apply a per-evaluation memory limit like the workers' (default: none)",
    )

    submit = add("submit", commands.submit, "Upload a model to a task.")
    submit.add_argument("slug")
    submit.add_argument("model")
    submit.add_argument("--description", default="")
    submit.add_argument(
        "--wait",
        action="store_true",
        help="wait for the result with a progress bar (and wait out rate limits)",
    )

    add("status", commands.status, "Show one of your submissions.").add_argument("id", type=int)
    listing = add("submissions", commands.submissions, "List your submissions, newest first.")
    listing.add_argument("--limit", type=int, default=20)
    add("quota", commands.quota, "How many submissions you have left on a task.").add_argument(
        "slug"
    )
    select = add(
        "select",
        commands.select,
        "Choose one of your succeeded submissions as a final for the task's private board.",
    )
    select.add_argument("id", type=int)
    select.add_argument("--unselect", action="store_true", help="take it back out of your finals")
    board = add("leaderboard", commands.leaderboard, "Show a task's leaderboard.")
    board.add_argument("slug")
    board.add_argument("--board", choices=["public", "private"], default="public")
    board.add_argument("--track", default="", help="one of the task's tracks (default: main)")
    board.add_argument("--limit", type=int, default=50, help="rows to show (at most 500)")
    board.add_argument("--csv", action="store_true", help="print the board as CSV")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(args.run(args))
    except ClientError as exc:
        print(str(exc), file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        return 130
