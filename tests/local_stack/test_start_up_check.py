"""The start-up check of `make run` (and of the asset build) on a tool module as a teammate leaves it: a
component that cannot be described is named with its file, line and reason; an import of the libraries a
port replaces advises the facade's import line, never a dependency."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.unit.test_fail_alone import BROKEN_SOURCE


def test_the_start_up_check_refuses_a_module_naming_file_line_tool_and_reason(tmp_path: Path) -> None:
    from infra.packaging import tools_refusal

    source = tmp_path / "functions"
    (source / "tools").mkdir(parents=True)
    (source / "tools" / "__init__.py").write_text("from . import teammate\n", encoding="utf-8")
    (source / "tools" / "teammate.py").write_text(BROKEN_SOURCE, encoding="utf-8")
    runtime = Path(__file__).resolve().parents[2] / "functions"
    site = [p for p in sys.path if p.endswith("site-packages")]

    refusal = tools_refusal([str(source), str(runtime), *site], source)

    assert refusal is not None
    assert refusal.splitlines()[0] == "a tool cannot be described (fix it, or remove it):"
    assert (
        "  functions/tools/teammate.py, line 14: tool 'holds_a_lock' (module tools.teammate): "
        "TypeError: parameter 'lock'"
    ) in refusal
    assert "functions/tools/teammate.py, line 20: tool 'still_works' (module tools.teammate): " in refusal


def test_an_import_of_fastmcp_tasks_left_in_a_module_advises_the_facades_import_line_never_adding_it() -> None:
    from infra.packaging import missing_dependency_hint

    hint = missing_dependency_hint("Traceback ...\nModuleNotFoundError: No module named 'fastmcp_tasks'\n")

    assert hint is not None and "make add-dependency" not in hint
    assert hint.startswith("fastmcp_tasks is not needed here (tasks are the runtime's own, task=True): ")
    assert "from mcp_runtime.fastmcp import Context, FastMCP, ToolError, TasksExtension" in hint
    fastmcp_hint = missing_dependency_hint("ModuleNotFoundError: No module named 'fastmcp.exceptions'\n")
    assert fastmcp_hint is not None and fastmcp_hint.startswith("fastmcp is not shipped: ")
