"""The asset's bytecode: written for the target interpreter, reproducibly, and a loud synth without it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Annotations, Match

from infra import bundling, packaging
from tests.infra.conftest import NO_BUNDLING

pytestmark = pytest.mark.infra

PYC_MAGIC_CPYTHON_313 = (3571).to_bytes(2, "little") + b"\r\n"
PYC_UNCHECKED_HASH = (1).to_bytes(4, "little")
SOURCES = {"pkg/__init__.py": "", "pkg/mod.py": "def f(x):\n    return {'x': x, 'y': [1, 2, 3]}\n"}


def tree(root: Path) -> Path:
    for name, text in SOURCES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def pycs(root: Path) -> dict[str, bytes]:
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.rglob("*.pyc"))}


def test_the_host_interpreter_compiles_hash_based_unchecked_bytecode_that_is_the_same_bytes_each_time(
    tmp_path: Path,
) -> None:
    version = packaging.host_target().python_version
    compiler = packaging.find_compiler(version)
    assert compiler is not None
    first, second = tree(tmp_path / "one"), tree(tmp_path / "two")
    for root in (first, second):
        compiler.compile_tree(root)
        packaging.stabilize_mtimes(root)
    tag = importlib.util.cache_from_source("mod.py").split("/")[-1]  # __pycache__/mod.<tag>.pyc
    compiled = pycs(first)
    assert set(compiled) == {f"pkg/__pycache__/{tag}", f"pkg/__pycache__/{tag.replace('mod', '__init__')}"}
    assert compiled == pycs(second)  # built in another directory: same bytes (no build path, no mtime)
    header = compiled[f"pkg/__pycache__/{tag}"][:16]
    assert header[:8] == importlib.util.MAGIC_NUMBER + PYC_UNCHECKED_HASH
    assert header[8:16] == importlib.util.source_hash(SOURCES["pkg/mod.py"].encode())
    assert {path.stat().st_mtime for path in first.rglob("*")} == {packaging.STABLE_MTIME}


@pytest.mark.parametrize("way", ["native", "pyodide"])
def test_a_cpython_3_13_on_this_machine_writes_3_13_bytecode(way: str, tmp_path: Path) -> None:
    if way == "native":
        candidates = packaging._native_candidates("3.13")
        compiler = next(filter(None, (packaging._native_compiler(path, "3.13") for path in candidates)), None)
    else:
        compiler = packaging._pyodide_compiler("3.13")
    if compiler is None:
        pytest.skip(f"no {way} CPython 3.13 here (pyodide: `npm ci`)")
    root = tree(tmp_path)
    compiler.compile_tree(root)
    compiled = pycs(root)
    assert set(compiled) == {"pkg/__pycache__/__init__.cpython-313.pyc", "pkg/__pycache__/mod.cpython-313.pyc"}
    assert all(data[:8] == PYC_MAGIC_CPYTHON_313 + PYC_UNCHECKED_HASH for data in compiled.values())
    assert b"/var/task/pkg/mod.py" in compiled["pkg/__pycache__/mod.cpython-313.pyc"]  # where Lambda runs it
    assert str(tmp_path).encode() not in compiled["pkg/__pycache__/mod.cpython-313.pyc"]


def test_without_a_3_13_and_without_docker_the_synth_warns_that_the_asset_has_no_bytecode_and_what_it_costs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bundling, "find_compiler", lambda version: None)
    monkeypatch.setattr(bundling, "docker_available", lambda: False)
    stack = Stack(App(context=NO_BUNDLING), "NoBytecode")
    bundling.function_code(scope=stack)
    warning = Match.string_like_regexp("ships NO BYTECODE for CPython 3.13.*about 3x the cold start")
    Annotations.from_stack(stack).has_warning("/NoBytecode", warning)
    assert "ships NO BYTECODE for CPython 3.13" in capsys.readouterr().err


def test_the_asset_hash_names_the_bytecode_compiler() -> None:
    target = packaging.LAMBDA_TARGET
    hashes = {packaging.source_fingerprint(target, tag) for tag in ("no bytecode", "bytecode CPython 3.13.0")}
    assert len(hashes) == 2
