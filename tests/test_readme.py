"""The README's code that stands for a file of the project: it must be that file's code, as written.

A block between `<!-- file:<path> -->` and `<!-- file:end -->` is the file at <path> without its
module docstring (the prose around the block says the same): everything from the first statement
after the docstring to the end, byte for byte.
"""

from __future__ import annotations

import ast
import importlib
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_runtime.tools import ToolRegistry
from tests.support import REPO

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


def test_the_readmes_count_words_is_the_files_code() -> None:
    shown = [code for code in re.findall(r"```python\n(.*?)```", readme(), re.DOTALL) if "def count_words(" in code]
    assert shown == [without_module_docstring((REPO / "functions/tools/count_words.py").read_text(encoding="utf-8"))]
    assert "functions/tools/count_words.py" in [path for path, _ in file_blocks()]


@pytest.mark.parametrize(("path", "code"), file_blocks())
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
    where = re.search(r"in `functions/tools/__init__.py`, after the line `([^`]+)`", prose)
    assert where, "the README does not say where the line goes"
    init = tools_copy / "__init__.py"
    # A project that followed the walkthrough already has the line: the copy starts from before it.
    lines = [text for text in init.read_text(encoding="utf-8").splitlines(keepends=True) if text != line]
    (anchor,) = [i for i, text in enumerate(lines) if text.strip() == where.group(1)]
    lines.insert(anchor + 1, line)
    init.write_text("".join(lines), encoding="utf-8")

    tools = importlib.import_module("tools")
    assert Path(tools.__file__).parent == tools_copy
    registry = ToolRegistry()
    tools.register(registry, table_backed=False)
    assert {spec.name for spec in registry} >= {"count_words", "archive_project", "deploy_release", "export_dataset"}


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
