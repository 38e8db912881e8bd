"""Name the project: `projectName` in cdk.json (and README.md's title), the one place its name lives.

`copier copy` runs this with the name it asked for; `make rename NAME=acme-mcp` runs it in a copy made
another way. The stack (`AcmeMcp`), the server, the service and the metrics are named after it at synth
(infra/naming.py); no other file spells it, so a platform update never meets the team's name in its files.
Standard library only: `copier copy` runs it before any venv exists.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
MAX_LENGTH = 40  # the Cognito domain prefix made of the stack's name and the account (63 at most) must fit
_PROJECT_NAME = re.compile(r'("projectName"\s*:\s*)"[^"]*"')
_CONTEXT = re.compile(r'("context"\s*:\s*\{)(\s*)')


def spellings(kebab: str) -> dict[str, str]:
    words = kebab.split("-")
    return {"kebab": kebab, "pascal": "".join(word.capitalize() for word in words), "snake": "_".join(words)}


def current_name(root: Path) -> str | None:
    context = json.loads((root / "cdk.json").read_text(encoding="utf-8")).get("context", {})
    name = context.get("projectName")
    return str(name) if name else None


def with_project_name(text: str, name: str) -> str:
    """cdk.json's text with `projectName` set, the rest of the file (the team's keys, its layout) untouched."""
    if _PROJECT_NAME.search(text):
        return _PROJECT_NAME.sub(lambda match: f'{match[1]}"{name}"', text, count=1)
    opening = _CONTEXT.search(text)
    if opening is None:
        raise ValueError('cdk.json has no "context" object to hold projectName')
    indent = opening[2] if "\n" in opening[2] else "\n    "
    return text[: opening.end(1)] + f'{indent}"projectName": "{name}",' + text[opening.end(1) :]


def rename(root: Path, new: str) -> list[Path]:
    """Set the project's name; returns the files that changed."""
    if not NAME_PATTERN.match(new) or len(new) > MAX_LENGTH:
        raise ValueError(
            f"NAME must be lower-case words joined by dashes, at most {MAX_LENGTH} characters, like acme-mcp "
            f"(got {new!r})"
        )
    old = current_name(root)
    if old == new:
        raise ValueError(f"the project is already called {new}")
    changed = []
    cdk_json = root / "cdk.json"
    text = cdk_json.read_text(encoding="utf-8")
    json.loads(updated := with_project_name(text, new))  # still JSON, or nothing is written
    cdk_json.write_text(updated, encoding="utf-8")
    changed.append(cdk_json)
    readme = root / "README.md"
    if readme.exists():
        lines = readme.read_text(encoding="utf-8").splitlines(keepends=True)
        if lines and lines[0].startswith("# ") and lines[0] != f"# {new}\n":
            lines[0] = f"# {new}\n"
            readme.write_text("".join(lines), encoding="utf-8")
            changed.append(readme)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="the project's name, lower-case words joined by dashes (acme-mcp)")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args(argv)
    try:
        changed = rename(args.root, args.name)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    names = spellings(args.name)
    print(f"Named {names['kebab']} (stack {names['pascal']}): {', '.join(p.name for p in changed)}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
