"""A worker's local copy of a file kept in remote storage (S3): fetched once per version.

Datasets are large and read by every evaluation, so a worker host keeps one copy on local disk.
The copy is named after the stored object's version (its S3 ETag), so a dataset the operator
replaces in the bucket under the same name is fetched again instead of being scored against a
stale copy. Several workers (and several worker containers sharing the cache volume) may ask
for the same file at once: a file lock lets one of them download while the others wait, and the
copy appears under its final name only once complete (write to a unique temporary name, then an
atomic rename), so nobody ever reads a half-written file.

A dataset version (submissions/models/datasets.py) knows its sha256: its copy is named after it,
and the bytes downloaded are checked against it, so a worker scores exactly the version the
result will record, never whatever the stored name holds now.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError
from django.core.files.storage import Storage

CHUNK_BYTES = 1024 * 1024


def _version(stored: Any, storage: Storage, name: str) -> str:
    """A token that changes whenever the stored object is replaced."""
    obj = getattr(stored, "obj", None)  # django-storages' S3File: the HEAD of open() loaded it
    if obj is not None and getattr(obj, "e_tag", None):
        return hashlib.sha256(obj.e_tag.strip('"').encode()).hexdigest()[:16]
    modified = storage.get_modified_time(name)
    token = f"{storage.size(name)}:{modified.isoformat()}"
    return hashlib.sha256(token.encode()).hexdigest()[:16]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


class DatasetMismatch(Exception):
    """The stored file is not the bytes its dataset version recorded."""


def _download(stored: Any, target: Path, sha256: str | None = None) -> None:
    fd, partial = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as raw:
            dst = _Hashing(raw)
            obj = getattr(stored, "obj", None)
            if obj is not None and getattr(obj, "e_tag", None):
                # IfMatch: when the object is replaced after we named the copy by its ETag, S3
                # refuses (412) instead of handing us the new bytes under the old version's name.
                body = obj.get(IfMatch=obj.e_tag)["Body"]
                for chunk in body.iter_chunks(CHUNK_BYTES):
                    dst.write(chunk)
            else:
                shutil.copyfileobj(stored, dst, CHUNK_BYTES)
        if sha256 is not None and dst.digest.hexdigest() != sha256:
            raise DatasetMismatch(
                f"the stored file {target.name} has sha256 {dst.digest.hexdigest()}, not the "
                f"{sha256} its dataset version recorded: it was changed in storage"
            )
        os.replace(partial, target)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


class _Hashing:
    """A file being written, hashed as it goes."""

    def __init__(self, raw: Any) -> None:
        self.raw, self.digest = raw, hashlib.sha256()

    def write(self, chunk: bytes) -> int:
        self.digest.update(chunk)
        return int(self.raw.write(chunk))


def _target(cache_dir: Path, name: str, version: str) -> Path:
    stem, dot, suffix = Path(name).name.partition(".")
    return cache_dir / Path(name).parent / f"{stem}.{version}{dot}{suffix}"


def _cached_copy_once(storage: Storage, name: str, cache_dir: Path, sha256: str | None) -> Path:
    if sha256 is not None:  # known content: a copy already here is it, without asking storage
        target = _target(cache_dir, name, sha256[:16])
        if target.exists():
            return target
    with storage.open(name, "rb") as stored:
        if sha256 is None:
            target = _target(cache_dir, name, _version(stored, storage, name))
            if target.exists():
                return target
        with _locked(target.with_name(target.name + ".lock")):
            if not target.exists():  # another process may have finished it while we waited
                _download(stored, target, sha256)
    return target


def cached_copy(
    storage: Storage, name: str, cache_dir: Path, attempts: int = 3, sha256: str | None = None
) -> Path:
    """The stored file ``name`` on local disk under ``cache_dir``, downloaded once per version:
    the version ``sha256`` names and checks when given, else the stored object's own."""
    for attempt in range(1, attempts + 1):
        try:
            return _cached_copy_once(storage, name, cache_dir, sha256)
        except ClientError as exc:
            replaced = exc.response.get("Error", {}).get("Code") == "PreconditionFailed"
            if not replaced or attempt == attempts:
                raise
    raise AssertionError("unreachable")
