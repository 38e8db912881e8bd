"""The README's code that stands for a file of the project: it must be that file's code, as written.

A block between `<!-- file:<path> -->` and `<!-- file:end -->` is the file at <path> without its
module docstring (the prose around the block says the same): everything from the first statement
after the docstring to the end, byte for byte.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_runtime import Catalog
from mcp_runtime.transport import McpHttpTransport
from tests.support import REPO, register_tool_modules, template_readme
from tests.unit.conftest import Client, make_server, result_of

pytestmark = template_readme

# The walkthrough's registration: the prose and the first code block after the walkthrough's file.
REGISTER_BLOCK = re.compile(r"<!-- walkthrough:end -->\n(?P<prose>.*?)```python\n(?P<code>.*?)```\n", re.DOTALL)
WALKTHROUGH_BLOCK = re.compile(r"<!-- walkthrough:start -->\n```python\n(.*?)```\n<!-- walkthrough:end -->", re.DOTALL)
FILE_BLOCK = re.compile(r"<!-- file:(?P<path>[^ ]+) -->\n```python\n(?P<code>.*?)```\n<!-- file:end -->", re.DOTALL)


def readme() -> str:
    return (REPO / "README.md").read_text(encoding="utf-8")


def without_module_docstring(source: str) -> str:
    module = ast.parse(source)
    first = module.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        first = module.body[1]
    return "".join(source.splitlines(keepends=True)[first.lineno - 1 :])


def file_blocks() -> list[tuple[str, str]]:
    return [(match["path"], match["code"]) for match in FILE_BLOCK.finditer(readme())]


def test_the_readmes_count_words_answers_what_its_inspector_command_prints(tmp_path: Path) -> None:
    """Tested from the README alone: each block of it (FastMCP's form; a README of 1.0.0 also shows the
    native one) runs as a tool, with the Inspector's call from the README."""
    blocks = re.findall(r"```python\n(.*?)```", readme(), re.DOTALL)
    shown = [code for code in blocks if "def count_words(" in code]
    call = re.search(r"tools/call count_words 'text:=([^']*)'", readme())
    prints = re.search(r"The last command prints `([^`]+)`", readme())
    assert shown and call and prints, "the README lost its count_words, its Inspector call, or what it prints"
    for index, code in enumerate(shown):
        name = f"readme_count_words_{index}"
        (tmp_path / f"{name}.py").write_text(code, encoding="utf-8")
        sys.path.insert(0, str(tmp_path))
        try:
            module = importlib.import_module(name)
        finally:
            sys.path.remove(str(tmp_path))
            sys.modules.pop(name, None)
        server = make_server(fixtures=False, patterns=False)
        server.tools.include(module)
        result = result_of(Client(McpHttpTransport(server)).call_tool("count_words", {"text": call.group(1)}))
        assert result["structuredContent"] == json.loads(prints.group(1))


# A block whose file the project deleted (an example) is left out: it stands alone, tested from the README.
@pytest.mark.parametrize(("path", "code"), [(path, code) for path, code in file_blocks() if (REPO / path).is_file()])
def test_a_file_block_is_the_files_code(path: str, code: str) -> None:
    assert code == without_module_docstring((REPO / path).read_text(encoding="utf-8"))


@pytest.fixture
def tools_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of functions/tools importable as `tools`, in place of the real one."""
    copy = tmp_path / "tools"
    shutil.copytree(REPO / "functions" / "tools", copy, ignore=shutil.ignore_patterns("__pycache__"))
    saved = {name: module for name, module in sys.modules.items() if name == "tools" or name.startswith("tools.")}
    for name in saved:
        del sys.modules[name]
    monkeypatch.syspath_prepend(str(tmp_path))
    yield copy
    for name in [name for name in sys.modules if name == "tools" or name.startswith("tools.")]:
        del sys.modules[name]
    sys.modules.update(saved)


def test_the_walkthroughs_registration_is_one_line_added_where_the_readme_says(tools_copy: Path) -> None:
    walkthrough = WALKTHROUGH_BLOCK.search(readme())
    register = REGISTER_BLOCK.search(readme())
    assert walkthrough and register, "the README lost its walkthrough or its registration snippet"
    (tools_copy / "export_dataset.py").write_text(walkthrough.group(1), encoding="utf-8")

    line = register["code"]
    assert line.count("\n") == 1, "the registration snippet is more than the one line to add"
    prose = " ".join(register["prose"].split())
    assert "in `functions/tools/__init__.py`, add this one line as the last of `MODULES = _modules(...)`" in prose
    init = tools_copy / "__init__.py"
    if "\nMODULES = _modules(" not in init.read_text(encoding="utf-8"):
        pytest.skip("functions/tools/__init__.py is the team's own now: the walkthrough describes the template's")
    # A project that followed the walkthrough already has the line: the copy starts from before it.
    init.write_text("".join(text for text in init.read_text().splitlines(keepends=True) if text != line))
    before = registered_names(tools_copy)
    register_tool_modules(init, "export_dataset")
    assert line in init.read_text(encoding="utf-8")
    assert registered_names(tools_copy) == [*before, "export_dataset"]


def registered_names(tools_copy: Path) -> list[str]:
    """The modules the copy serves everywhere (MODULES), in their order."""
    for name in [name for name in sys.modules if name == "tools" or name.startswith("tools.")]:
        del sys.modules[name]
    tools = importlib.import_module("tools")
    assert Path(tools.__file__).parent == tools_copy
    tools.register(Catalog(), table_backed=False)
    return [module.__name__.removeprefix("tools.") for module in tools.MODULES]


def github_anchor(heading: str) -> str:
    """GitHub's id for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_inside_the_readme_names_one_of_its_headings() -> None:
    text = re.sub(r"```.*?```", "", readme(), flags=re.DOTALL)
    anchors = {github_anchor(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}
    links = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert links and links <= anchors, sorted(links - anchors)


def test_the_contents_list_every_section() -> None:
    text = readme()
    contents = text[text.index("## Contents") : text.index("## The two commands")]
    sections = [line[3:] for line in text.splitlines() if line.startswith("## ") and line != "## Contents"]
    assert [github_anchor(section) for section in sections if f"(#{github_anchor(section)})" not in contents] == []


# The pages whose relative links must resolve: the README, CONTRIBUTING.md and the reference in docs/.
LINKED_PAGES = ("README.md", "CONTRIBUTING.md", *(f"docs/{page.name}" for page in sorted((REPO / "docs").glob("*.md"))))
LINK = re.compile(r"\]\(([^)\s]+)\)")


def prose_of(text: str) -> str:
    """The text without fenced code blocks, where a `[...](...)` is code, not a link."""
    return re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)


def heading_anchors(page: Path) -> set[str]:
    """The ids GitHub gives the page's headings; a repeated heading gets -1, -2, ... as there."""
    anchors: set[str] = set()
    for line in prose_of(page.read_text(encoding="utf-8")).splitlines():
        if re.match(r"#{1,6} ", line):
            base = github_anchor(line.lstrip("#"))
            anchor, count = base, 0
            while anchor in anchors:
                count += 1
                anchor = f"{base}-{count}"
            anchors.add(anchor)
    return anchors


def test_the_anchor_of_a_repeated_heading_is_numbered_as_github_numbers_it(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# How it fits\n\n```sh\n# not a heading\n```\n\n## How it fits\n\n## `make run`: refuses\n")
    assert heading_anchors(page) == {"how-it-fits", "how-it-fits-1", "make-run-refuses"}


@pytest.mark.parametrize("page", LINKED_PAGES)
def test_every_relative_link_names_a_file_that_exists_and_one_of_its_headings(page: str) -> None:
    source = REPO / page
    broken = []
    for target in LINK.findall(prose_of(source.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: and the like
            continue
        path, _, anchor = target.partition("#")
        linked = (source.parent / path).resolve() if path else source
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and anchor not in heading_anchors(linked):
            broken.append(f"{target}: no heading #{anchor}")
    assert broken == []


def test_the_scale_sheet_works_with_the_worker_concurrency_cdk_json_deploys() -> None:
    import json

    context = json.loads((REPO / "cdk.json").read_text())["context"]
    reserved = context["workerReservedConcurrency"]
    sheet = (REPO / "docs" / "performance.md").read_text().split("## Scale sheet", 1)[1]
    (row,) = [line for line in sheet.splitlines() if line.startswith("| Lambda concurrency")]
    assert f"`workerReservedConcurrency` {reserved} (cdk.json)" in row
    assert "800 concurrency" not in sheet  # what the sheet assumed while cdk.json deployed 50
