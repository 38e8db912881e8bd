"""Files of the local stack that only its user may read: the run file (the administrator's keys, the secret
of moto's admin API) and the state snapshots (every item, secret and object of the stack).

Each lies in a directory made 0700 (one left more open by an earlier version is closed again), and is
written 0600 from its first byte: created so, never opened to others and then closed. A directory that is
not this user's, or is a link, is refused: someone else could read what is written there, or choose where
it goes.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

DIRECTORY_MODE = 0o700
FILE_MODE = 0o600


class NotPrivate(PermissionError):
    """A directory the local stack would write its secrets in belongs to someone else, or is a link."""


def private_directory(directory: Path) -> Path:
    """`directory` (and missing parents) made, this user's, mode 0700; NotPrivate when it cannot be."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        directory.mkdir(mode=DIRECTORY_MODE)
    found = os.lstat(directory)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        raise NotPrivate(f"{directory} is not a directory of this user's: the local stack writes its secrets there")
    if stat.S_IMODE(found.st_mode) != DIRECTORY_MODE:
        os.chmod(directory, DIRECTORY_MODE)
    return directory


def write_private(path: Path, data: bytes | str) -> None:
    """Write `path` (replacing it) readable and writable by this user only, in a private directory."""
    content = data.encode("utf-8") if isinstance(data, str) else data
    with os.fdopen(open_private(path), "wb") as out:
        out.write(content)


def open_private(path: Path) -> int:
    """A new descriptor of `path`, created 0600 for writing (`os.fdopen` it), in a private directory. A file
    left there before is replaced, never reused: one of an earlier version may be open to others."""
    private_directory(path.parent)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    os.fchmod(descriptor, FILE_MODE)  # the umask may only have narrowed it; this says exactly what it is
    return descriptor
