"""The README's code that stands for a file of the project: it must be that file's code, as written.

A block between `<!-- file:<path> -->` and `<!-- file:end -->` is the file at <path> without its
module docstring (the prose around the block says the same): everything from the first statement
after the docstring to the end, byte for byte.
"""

from __future__ import annotations

import ast
import re

import pytest

from tests.support import REPO

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
