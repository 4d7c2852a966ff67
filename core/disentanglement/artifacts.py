"""Atomic artifact writes and content hashes.

Every artifact is written to a temporary file beside its destination and renamed
into place only when complete, so a crash or a bad input never leaves a
half-written file that a later rule would mistake for a finished one.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


def umask_file_mode() -> int:
    """The mode a plainly created file gets (0o666 less the umask), so collaborators can read shared results."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the destination's folder; rename it to `path` on success, delete it on error.
    An OSError on the way (a full disk, a folder in the way) is raised with `path` as its filename."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise OSError(err.errno, f"cannot write here: {err.strerror}", str(path)) from err
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        os.chmod(tmp, umask_file_mode())  # mkstemp creates 0600; the artifact should read like any other file
        os.replace(tmp, path)
    except OSError as err:  # ENOSPC, a directory in the way, ...: name the artifact, not the temporary file
        raise OSError(err.errno, err.strerror, str(path)) from err
    finally:
        tmp.unlink(missing_ok=True)


def write_json(obj: object, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def write_jsonl(rows: list[dict], path: str | os.PathLike) -> None:
    """One JSON object per line, replacing the whole file atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text("".join(json.dumps(row) + "\n" for row in rows))


def save_torch(obj: object, path: str | os.PathLike) -> None:
    """torch.save, atomically and byte-reproducibly.

    torch.save names the zip archive's folder after the file it writes to; saving to the random temporary name would
    make two identical checkpoints differ in their bytes, and so in their sha256. Saved to a buffer, the folder is
    always `archive`.
    """
    import torch  # only the checkpoint writers need torch; the table and plot jobs import this module without it

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    with atomic_path(path) as tmp:
        tmp.write_bytes(buffer.getvalue())


def sha256_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_json(document: object) -> str:
    """The sha256 of a JSON document's canonical form (keys sorted): what names a grid's record and seals a look file."""
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()
