"""`mcp_runtime` is the tool-authoring API: every name it lists resolves, and importing it is free."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import mcp_runtime
from tests.support import REPO


def test_every_listed_name_resolves_to_the_object_its_module_defines() -> None:
    for name in mcp_runtime.__all__:
        value = getattr(mcp_runtime, name)
        assert getattr(value, "__name__", name) == name, name
        assert name in dir(mcp_runtime)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        _ = mcp_runtime.McpServer  # type: ignore[attr-defined]


def test_importing_the_package_imports_neither_pydantic_nor_boto3() -> None:
    code = (
        "import json, sys\nimport mcp_runtime\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'boto3', 'botocore')"
        " or m.startswith('mcp_runtime.'))))"
    )
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": f"{REPO / 'functions'}{os.pathsep}{REPO}"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []
