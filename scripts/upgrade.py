"""What `copier update` runs after it brought a newer release (copier.yml's `_tasks`).

1. cdk.json is the team's, but three things in it are the platform's: how the CLI runs the app (`app`), what
   `cdk watch` watches (`watch`) and the CDK feature flags (context keys starting with `@`). They are copied
   from infra/cdk.platform.json (the platform's, so the release brought it); every other key stays the team's.
2. The lock is derived from the platform's pins (pyproject.toml, just updated) and the team's
   (functions/tools/requirements.txt): `make lock` writes it again, checks the wheels for Lambda and
   installs it; `make install` brings the rest (Node packages, the browser) in line.

Copier also runs its tasks in the scratch copies it renders to compute the update's diff; those are not a git
project, and there this does nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

# The team's room: what `copier update` never touches (copier.yml's `_exclude`, operation `update`).
TEAM_ROOM = ("functions/tools", "tests/tools", "events/examples", "cdk.json", "README.md")
PLATFORM_CONFIG = Path("infra") / "cdk.platform.json"


def is_platform_key(key: str) -> bool:
    return key.startswith("@")


def with_platform_part(team: Mapping[str, Any], platform: Mapping[str, Any]) -> dict[str, Any]:
    """The team's cdk.json with the platform's part as `platform` has it: its top-level keys (but context), and the
    context's `@` keys (flags the platform dropped go too); the team's keys and their order kept."""
    merged = {key: value for key, value in team.items() if key == "context" or key not in platform}
    merged.update({key: value for key, value in platform.items() if key != "context"})
    team_context = {key: value for key, value in dict(team.get("context", {})).items() if not is_platform_key(key)}
    merged["context"] = {**team_context, **dict(platform.get("context", {}))}
    order = [*platform.keys(), *(key for key in team if key not in platform)]
    return {key: merged[key] for key in order if key in merged}


def apply_platform_config(root: Path) -> bool:
    """Rewrite cdk.json when its platform part differs from the release's; True when it changed."""
    cdk_json = root / "cdk.json"
    team = json.loads(cdk_json.read_text(encoding="utf-8"))
    platform = json.loads((root / PLATFORM_CONFIG).read_text(encoding="utf-8"))
    merged = with_platform_part(team, platform)
    if merged == team:
        return False
    cdk_json.write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
    return True


def in_git_project(root: Path) -> bool:
    done = subprocess.run(
        ["git", "rev-parse", "--is-inside-work-tree"], cwd=root, capture_output=True, text=True, check=False
    )
    return done.returncode == 0 and done.stdout.strip() == "true"


def run(command: Sequence[str], root: Path) -> None:
    print(f"upgrade: {' '.join(command)}", flush=True)
    subprocess.run(command, cwd=root, check=True)


def upgrade(root: Path, *, runner: Callable[[Sequence[str], Path], None] = run, install: bool = True) -> list[str]:
    if not in_git_project(root):
        return []
    done = []
    if apply_platform_config(root):
        done.append(f"cdk.json: the platform's part ({PLATFORM_CONFIG}) applied, your keys kept")
    if install:
        runner(["make", "--no-print-directory", "lock"], root)
        runner(["make", "--no-print-directory", "install"], root)
        done.append("requirements-dev.lock written again from pyproject.toml and functions/tools/requirements.txt")
    return done


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path.cwd())
    parser.add_argument("--no-install", action="store_true", help="apply cdk.json's platform part only")
    args = parser.parse_args(argv)
    try:
        for line in upgrade(args.root.resolve(), install=not args.no_install):
            print(f"upgrade: {line}")
    except subprocess.CalledProcessError as failed:
        print(f"upgrade: `{' '.join(failed.cmd)}` failed; fix it, then run it again", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
