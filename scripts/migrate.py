"""Move a project's files when a release changes where the team's room keeps them (copier.yml's `_migrations`).

A release that moves part of the team's room ships a migration such as

    _migrations:
      - version: v2.0.0
        command: ["{{ _copier_python }}", "scripts/migrate.py", "move", "events/examples", "tests/tools/events"]
        when: "{{ _stage == 'after' }}"

and `make update` across that release moves the team's files the same way, after the release's own files are in
place. A move is idempotent (nothing to move, or already moved: nothing happens), never overwrites a file of the
destination (the two are named, and nothing moves), and keeps the files' git history (`git mv` where git tracks
them). Standard library only.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path


class Refused(Exception):
    """Nothing moved; the message says why."""


def _files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]


def _tracked(root: Path, path: Path) -> bool:
    done = subprocess.run(
        ["git", "ls-files", "--error-unmatch", str(path.relative_to(root))], cwd=root, capture_output=True, check=False
    )
    return done.returncode == 0


def move(root: Path, source: str, destination: str) -> list[str]:
    """Move `source` (a file or a folder) to `destination`, file by file; returns what moved."""
    src, dst = root / source, root / destination
    if not src.exists():
        return []
    pairs = [(file, dst / file.relative_to(src)) if src.is_dir() else (file, dst) for file in _files(src)]
    clashes = [str(target.relative_to(root)) for _, target in pairs if target.exists()]
    if clashes:
        raise Refused(f"{source} -> {destination}: {', '.join(clashes)} exist already; move them by hand")
    moved = []
    for file, target in pairs:
        target.parent.mkdir(parents=True, exist_ok=True)
        if _tracked(root, file):
            subprocess.run(["git", "mv", str(file), str(target)], cwd=root, check=True, capture_output=True)
        else:
            file.rename(target)
        moved.append(f"{file.relative_to(root)} -> {target.relative_to(root)}")
    for folder in sorted((p for p in [src, *src.rglob("*")] if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()
    parent = src.parent
    while parent != root and parent.is_dir() and not any(parent.iterdir()):  # as git leaves no empty folder
        parent.rmdir()
        parent = parent.parent
    return moved


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    moving = sub.add_parser("move", help="move a file or folder of the team's room")
    moving.add_argument("source")
    moving.add_argument("destination")
    parser.add_argument("--root", type=Path, default=Path.cwd())
    args = parser.parse_args(argv)
    try:
        for line in move(args.root.resolve(), args.source, args.destination):
            print(f"migrate: {line}")
    except Refused as refused:
        print(f"migrate: {refused}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
