"""The test tiers keep their promises: the unit tier synthesizes nothing and starts no stack, and the
shared stacks' users are real modules (their tests run together, on one worker)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import REPO, SHARED_STACKS

# What only the slower tiers may use: the CDK (jsii starts Node), the synthesized app, the stack process.
SLOW_IMPORTS = ("aws_cdk", "infra", "local_stack.synth", "local_stack.stack")
SLOW_CALLS = ("local_stack_process", "recording_stack_process", "synthesize")


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_no_unit_test_synthesizes_the_cdk_app_or_starts_a_stack() -> None:
    offenders = {}
    for path in sorted((REPO / "tests" / "unit").glob("*.py")):
        slow = sorted(
            name
            for name in imported_modules(path)
            if any(name == prefix or name.startswith(f"{prefix}.") for prefix in SLOW_IMPORTS)
            or name.rsplit(".", 1)[-1] in SLOW_CALLS
        )
        if slow:
            offenders[path.name] = slow
    assert offenders == {}


def test_every_listed_user_of_a_shared_stack_is_a_test_module() -> None:
    # The other way round is checked at collection: a module that asks for a shared stack and is not
    # listed stops the run (tests/conftest.py), since its tests would start the stack a second time.
    listed = [module for shared in SHARED_STACKS.values() for module in shared.users]
    assert sorted(set(listed)) == sorted(listed)
    assert [module for module in listed if not (REPO / module).is_file()] == []
