"""The project's name and what is named after it: `projectName` in cdk.json (the team's, set by `copier copy`
or `make rename`), in the spellings the stack uses. No CDK import: the local stack reads it too."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
# The name a copy gets when cdk.json names none (the template's own).
TEMPLATE_PROJECT_NAME = "serverless-mcp-tasks"
PROJECT_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


def check_project_name(name: str) -> str:
    if not PROJECT_NAME_PATTERN.match(name) or len(name) > 40:
        raise ValueError(
            f"context 'projectName' must be lower-case words joined by dashes, at most 40 characters, like acme-mcp "
            f"(got {name!r})"
        )
    return name


def pascal(name: str) -> str:
    return "".join(word.capitalize() for word in name.split("-"))


def project_name(context: Mapping[str, Any]) -> str:
    return check_project_name(str(context.get("projectName") or TEMPLATE_PROJECT_NAME))


def stack_name(context: Mapping[str, Any]) -> str:
    """`stackName` where it is set, else the project's name in Pascal case (acme-mcp: AcmeMcp)."""
    return str(context.get("stackName") or pascal(project_name(context)))


def project_context(root: Path = REPO_ROOT) -> dict[str, Any]:
    """cdk.json's context as the project has it."""
    return dict(json.loads((root / "cdk.json").read_text(encoding="utf-8")).get("context", {}))
