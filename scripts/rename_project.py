"""`make rename NAME=acme-mcp`: give a copy of the template its own name, everywhere at once.

Replaces the project's current name (the `name` in pyproject.toml) in every tracked text file, in
its three spellings: kebab case (package, server and service names), Pascal case (the CDK stack and
metric namespace) and snake case. Run it right after copying the template; running it again with
another name renames again.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from pathlib import Path

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


def spellings(kebab: str) -> dict[str, str]:
    words = kebab.split("-")
    return {
        "kebab": kebab,
        "pascal": "".join(word.capitalize() for word in words),
        "snake": "_".join(words),
    }


def tracked_files(root: Path) -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    return [root / name for name in listed.decode().split("\0") if name]


def current_name(root: Path) -> str:
    """The project's name as pyproject.toml gives it: the one every file spells."""
    return str(tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["name"])


def rename(root: Path, new: str) -> list[Path]:
    """Rewrite every tracked text file under `root`; returns the files that changed."""
    if not NAME_PATTERN.match(new):
        raise ValueError(f"NAME must be lower-case words joined by dashes, like acme-mcp (got {new!r})")
    old = current_name(root)
    if old == new:
        raise ValueError(f"the project is already called {new}")
    old_names, new_names = spellings(old), spellings(new)
    changed = []
    for path in tracked_files(root):
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary files (images) carry no names
        updated = text
        for style in ("kebab", "pascal", "snake"):
            updated = updated.replace(old_names[style], new_names[style])
        if updated != text:
            path.write_text(updated, encoding="utf-8")
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="the new project name, lower-case words joined by dashes (acme-mcp)")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args(argv)
    try:
        changed = rename(args.root, args.name)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    names = spellings(args.name)
    print(f"Renamed to {names['kebab']} (stack {names['pascal']}) in {len(changed)} files.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
