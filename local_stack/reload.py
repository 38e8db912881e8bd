"""`make run` reloads: an edit under `functions/` restarts the function interpreters with the edited code.

`SourceWatcher` polls the modification times and sizes of the function sources (no file-system
events, no dependency) and, once an edit has settled (two looks alike), calls back with what changed.
The stack then runs its start-up import check again and, if the tools import, builds the asset anew
and hands it to every function's pool (`FunctionPool.reload`): idle interpreters stop at once, busy
ones when their invocation ends, and the next invocation starts a fresh interpreter on the new code.
A tool that no longer imports is reported with its file and line, and the previous code goes on
serving until the next edit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

POLL_SECONDS: Final = 0.5

Snapshot = dict[str, tuple[int, int]]


def snapshot(root: Path, packages: Iterable[str]) -> Snapshot:
    """Each source file under `root/<package>` (bytecode caches aside): its mtime (ns) and size."""
    files: Snapshot = {}
    for package in packages:
        for path in (root / package).rglob("*"):
            if "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo"):
                continue
            try:
                stat = path.stat()
            except OSError:  # removed while looked at: the next look sees it gone
                continue
            if path.is_file():
                files[path.relative_to(root).as_posix()] = (stat.st_mtime_ns, stat.st_size)
    return files


def changed(before: Snapshot, after: Snapshot) -> list[str]:
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))


class SourceWatcher:
    """Calls `on_change(paths)` from its own thread after each settled edit under `root`'s packages."""

    def __init__(
        self,
        root: Path,
        packages: Iterable[str],
        on_change: Callable[[list[str]], None],
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self.root = root
        self.packages = tuple(packages)
        self.on_change = on_change
        self.poll_seconds = poll_seconds
        self._stopped = threading.Event()
        self._current = snapshot(root, self.packages)
        self._thread = threading.Thread(target=self._watch, name="local-reload", daemon=True)

    def start(self) -> SourceWatcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)

    def _watch(self) -> None:
        while not self._stopped.wait(self.poll_seconds):
            seen = snapshot(self.root, self.packages)
            if seen == self._current:
                continue
            while not self._stopped.wait(self.poll_seconds):  # an editor may write in several goes
                settled = snapshot(self.root, self.packages)
                if settled == seen:
                    break
                seen = settled
            paths = changed(self._current, seen)
            self._current = seen
            if paths and not self._stopped.is_set():
                self.on_change(paths)
