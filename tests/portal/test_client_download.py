"""``oep download``: the task's files, checked by sha256, the token sent to the portal only.

The portal's file listing is item 1 of issue 15, built in parallel: until it lands, a small HTTP
server here answers the documented shape ``GET /api/tasks/{slug}/files/`` →
``[{"name", "size", "sha256", "url"}]``, and a second one stands for a storage host.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.portal.client_support import Oep

TRAIN = b"training rows" * 1000
STARTER = b"print('hello')\n"


class Recorder(BaseHTTPRequestHandler):
    routes: dict[str, bytes] = {}
    seen: list[tuple[str, str | None]] = []

    def do_GET(self) -> None:
        self.seen.append((self.path, self.headers.get("Authorization")))
        body = self.routes.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def servers() -> Iterator[tuple[str, str, type[Recorder]]]:
    class Portal(Recorder):
        routes, seen = {}, []

    class Storage(Recorder):
        routes, seen = {}, []

    started = [ThreadingHTTPServer(("127.0.0.1", 0), h) for h in (Portal, Storage)]
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in started]
    for thread in threads:
        thread.start()
    portal, storage = (f"http://127.0.0.1:{s.server_address[1]}" for s in started)
    Storage.routes["/bucket/starter.py?sig=1"] = STARTER
    Portal.routes["/media/train.npz"] = TRAIN
    listing = [
        {
            "name": "train.npz",
            "size": len(TRAIN),
            "sha256": hashlib.sha256(TRAIN).hexdigest(),
            "url": "/media/train.npz",
        },
        {
            "name": "starter.py",
            "size": len(STARTER),
            "sha256": hashlib.sha256(STARTER).hexdigest(),
            "url": f"{storage}/bucket/starter.py?sig=1",
        },
    ]
    Portal.routes["/api/tasks/digits/files/"] = json.dumps(listing).encode()
    Portal.routes["/api/tasks/tampered/files/"] = json.dumps(
        [{**listing[0], "sha256": "0" * 64}]
    ).encode()
    yield portal, storage, Storage
    for server in started:  # what we start we stop
        server.shutdown()
        server.server_close()


def test_download_fetches_each_file_checks_it_and_keeps_the_token_home(
    servers: tuple[str, str, type[Recorder]], tmp_path: Path
) -> None:
    portal, _, storage = servers
    oep = Oep(tmp_path, url=portal, token="secret")
    result = oep("download", "digits", "--dir", str(tmp_path / "data"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "data" / "train.npz").read_bytes() == TRAIN
    assert (tmp_path / "data" / "starter.py").read_bytes() == STARTER
    assert storage.seen == [("/bucket/starter.py?sig=1", None)]  # no token to a storage host

    again = oep("download", "digits", "--dir", str(tmp_path / "data"))
    assert again.stdout.count("already here") == 2


def test_a_download_that_does_not_match_its_sha256_is_not_kept(
    servers: tuple[str, str, type[Recorder]], tmp_path: Path
) -> None:
    portal, _, _ = servers
    result = Oep(tmp_path, url=portal)("download", "tampered", "--dir", str(tmp_path / "data"))
    assert result.returncode == 1
    assert result.stderr == "train.npz: the download does not match its sha256; try again\n"
    assert list((tmp_path / "data").iterdir()) == []
