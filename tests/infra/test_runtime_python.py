"""The Lambda runtime's Python locally: `make install` builds the venv on its version when this machine has
one (scripts/runtime_python.py), and the synth refuses a standard-library module that version lacks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from aws_cdk import App, Stack

from infra import bundling, packaging
from tests.infra.conftest import NO_BUNDLING, REPO
from tests.unit.test_fastmcp_facade import without_titles
from tests.unit.test_fastmcp_parity import SDK_TICKETS

sys.path.insert(0, str(REPO / "scripts"))
import runtime_python

pytestmark = pytest.mark.infra

RUNTIME = packaging.LAMBDA_TARGET.python_version
CGI_REFUSED = (
    f"functions/tools/forms.py, line 3: imports cgi, which the Lambda runtime's Python ({RUNTIME}) does not have "
    "(removed from the standard library in 3.13); use urllib.parse.parse_qs for a query string, email.message for "
    "a multipart body, or its copy on PyPI (`make add-dependency PKG=standard-cgi`)"
)


def functions_importing(root: Path, body: str) -> Path:
    """A functions/ tree whose one tool module is `body`."""
    tools = root / "functions" / "tools"
    tools.mkdir(parents=True)
    (tools / "__init__.py").write_text('"""Tools."""\n')
    (tools / "forms.py").write_text(f'"""A form reader."""\n\n{body}')
    return root / "functions"


def test_the_synth_refuses_a_tool_importing_cgi_naming_the_file_the_line_and_what_to_use_instead(
    tmp_path: Path,
) -> None:
    functions = functions_importing(tmp_path, "import cgi\n")
    with pytest.raises(packaging.RuntimeStdlibMissing) as refused:
        bundling.function_code(scope=Stack(App(context=NO_BUNDLING), "Forms"), functions_dir=functions)
    assert str(refused.value) == CGI_REFUSED


def test_every_refused_import_is_named_and_a_module_without_a_replacement_gets_its_copy_on_pypi(
    tmp_path: Path,
) -> None:
    body = "import json\nfrom distutils.util import strtobool\n\n\ndef later():\n    import aifc, nis\n"
    found = packaging.missing_stdlib_imports(functions_importing(tmp_path, body), ["tools"])
    described = [item.describe(tmp_path / "functions", RUNTIME) for item in found]
    because = f"which the Lambda runtime's Python ({RUNTIME}) does not have (removed from the standard library in"
    assert described == [
        f"functions/tools/forms.py, line 4: imports distutils, {because} 3.12); use setuptools, or sysconfig and "
        "shutil, or its copy on PyPI (`make add-dependency PKG=standard-distutils`)",
        f"functions/tools/forms.py, line 8: imports aifc, {because} 3.13); use its copy on PyPI "
        "(`make add-dependency PKG=standard-aifc`)",
        f"functions/tools/forms.py, line 8: imports nis, {because} 3.13)",
    ]


def test_an_optional_import_with_a_fallback_and_a_module_a_dependency_brings_are_not_refused(tmp_path: Path) -> None:
    body = "try:\n    import imghdr\nexcept ImportError:\n    imghdr = None\n\nimport cgi\n"
    functions = functions_importing(tmp_path, body)
    # standard-cgi (a runtime dependency) brings `cgi` back under its old name.
    assert packaging.missing_stdlib_imports(functions, ["tools"], provided={"cgi"}) == []
    assert [item.module for item in packaging.missing_stdlib_imports(functions, ["tools"])] == ["cgi"]


def test_the_documented_list_is_what_the_runtime_lacks_of_an_older_pythons_standard_library() -> None:
    """REMOVED_FROM_STDLIB decides when no interpreter of the runtime's version is at hand: it must be what
    that interpreter's `sys.stdlib_module_names` says, against 3.11's (the oldest the venv may be)."""
    oldest = packaging.find_interpreter("3.11")
    runtime, source = packaging.runtime_stdlib(RUNTIME)
    if oldest is None or source.startswith("REMOVED_FROM_STDLIB"):
        pytest.skip(f"needs CPython 3.11 and {RUNTIME} here")
    probe = "import sys; print(' '.join(sys.stdlib_module_names))"
    older = set(subprocess.run([oldest.executable, "-I", "-c", probe], capture_output=True, text=True).stdout.split())
    assert {name for name in older - runtime if not name.startswith("_")} == set(packaging.REMOVED_FROM_STDLIB)


def test_without_the_runtimes_interpreter_the_documented_list_refuses_cgi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(packaging, "find_interpreter", lambda version, uv=None: None)
    packaging.runtime_stdlib.cache_clear()
    try:
        has, source = packaging.runtime_stdlib(RUNTIME)
        assert source == "REMOVED_FROM_STDLIB (infra/packaging.py)" or sys.version_info[:2] == (3, 13)
        assert "cgi" not in has and "json" in has
        with pytest.raises(packaging.RuntimeStdlibMissing) as refused:
            packaging.check_runtime_stdlib(functions_importing(tmp_path, "import cgi\n"), ["tools"], provided=())
        assert str(refused.value) == CGI_REFUSED
    finally:
        packaging.runtime_stdlib.cache_clear()


def test_the_platforms_own_functions_import_nothing_the_runtime_lacks() -> None:
    packaging.check_runtime_stdlib()


def test_the_runtime_version_is_set_in_one_place_and_the_type_check_follows_it() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["tool"]["mypy"]["python_version"] == RUNTIME
    from infra.capabilities._lambda import LAMBDA_RUNTIME
    from local_stack.runtime import PYTHON_RUNTIME

    assert LAMBDA_RUNTIME.name == PYTHON_RUNTIME == f"python{RUNTIME}"
    ci = (REPO / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8")
    assert f'python-version: "{RUNTIME}"' in ci  # CI's make install finds the runtime's version


def test_make_install_chooses_the_runtimes_version_and_says_so_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    interpreter = packaging.find_interpreter(RUNTIME)
    if interpreter is None:
        pytest.skip(f"no CPython {RUNTIME} here")
    stamp = tmp_path / "venv-python"
    assert runtime_python.main([str(stamp)]) == 0
    assert stamp.read_text() == f"{interpreter.executable}\n{interpreter.full_version}\n"
    assert capsys.readouterr().out == (
        f"make install: the venv runs CPython {interpreter.full_version} ({interpreter.executable}), "
        "the Lambda runtime's version\n"
    )
    os.utime(stamp, (0, 0))
    assert runtime_python.main([str(stamp)]) == 0
    assert capsys.readouterr() == ("", "")  # said once; the stamp, unchanged, rebuilds nothing
    assert stamp.stat().st_mtime == 0


def test_without_the_runtimes_version_make_install_says_which_it_used_and_what_that_cannot_catch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime_python, "find_interpreter", lambda version, uv=None: None)
    stamp = tmp_path / "venv-python"
    oldest = packaging.find_interpreter("3.11")
    fallback = oldest.executable if oldest is not None else sys.executable
    assert runtime_python.main([str(stamp), "--fallback", fallback]) == 0
    used = subprocess.run([fallback, "-c", "import platform; print(platform.python_version())"], capture_output=True)
    version = used.stdout.decode().strip()
    minor = ".".join(version.split(".")[:2])
    assert stamp.read_text() == f"{fallback}\n{version}\n"
    said = capsys.readouterr().err
    assert said == (
        f"\n*** make install: the venv runs CPython {version} ({fallback}), not the Lambda runtime's {RUNTIME}: "
        f"no CPython {RUNTIME} on this machine (python{RUNTIME} on PATH, pyenv's, uv's). Tests and `make run` on "
        f"{minor} cannot catch a dependency without a {RUNTIME} wheel (the synth's asset build for Lambda still "
        f"fetches them), {RUNTIME}'s behaviour changes (deprecations turned errors, changed defaults), or a module "
        f"{RUNTIME} removed that a dependency imports (the import check refuses the functions' own imports of one). "
        f"Install CPython {RUNTIME} (`pyenv install {RUNTIME}`, `uv python install {RUNTIME}`, or your system's "
        "package), then `make install`.\n\n"
    )


def test_the_venv_is_made_with_the_recorded_interpreter_and_made_again_when_the_record_changes() -> None:
    recorded = (REPO / ".tools" / "venv-python").read_text().splitlines()[0]
    planned = subprocess.run(
        ["make", "-n", "-W", ".tools/venv-python", ".venv/.installed"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("MAKE")},
    ).stdout.splitlines()
    assert planned[:2] == ["cmp -s .tools/venv-python .venv/.python || rm -rf .venv", f"{recorded} -m venv .venv"]
    assert planned[-2:] == ["cp .tools/venv-python .venv/.python", "touch .venv/.installed"]


def test_make_run_on_another_python_says_so_and_that_make_install_builds_the_venv_on_the_runtimes() -> None:
    """`make run`'s first line, from a venv made before a CPython of the runtime's version was installed."""
    oldest, runtime = packaging.find_interpreter("3.11"), packaging.find_interpreter(RUNTIME)
    if oldest is None or runtime is None:
        pytest.skip(f"needs CPython 3.11 and {RUNTIME} here")
    said = subprocess.run(
        [oldest.executable, "-c", "from infra.packaging import describe_interpreter; print(describe_interpreter())"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # Which 3.13 it names depends on who looks (this process finds its own venv's first): the version is the point.
    assert re.fullmatch(
        re.escape(f"python: CPython {oldest.full_version} ({oldest.executable}), not the Lambda runtime's {RUNTIME}, ")
        + re.escape(f"which this machine has (CPython {runtime.full_version}, ")
        + r"/\S+"
        + re.escape("): `make install` builds the venv on it\n"),
        said,
    )


# On Python 3.11, as a venv made where no CPython 3.13 is at hand runs: the module in a team's tools package,
# listed and called through testkit's ToolClient (the API function's own server), and under the real mcp 2.3.0.
ON_OLDEST_PYTHON = """\
import asyncio, json, sys

from testkit import ToolClient

import sdk_tools.tickets_real as real

client = ToolClient("sdk_tools")
theirs = {tool.name: tool.model_dump(mode="json", by_alias=True, exclude_none=True)
          for tool in asyncio.run(real.mcp.list_tools())}
called = asyncio.run(real.mcp.call_tool("sdk_ticket", {"title": "disk"}))
print(json.dumps({
    "python": sys.version_info[:2],
    "ours": client.list_tools(),
    "called": client.call("sdk_ticket", {"title": "disk"}),
    "theirs": theirs["sdk_ticket"],
    "theirs_called": called.structured_content,
}))
"""
# What the script imports, at the lock's pins (the lock is the same on 3.11 and 3.13: tests/test_dependencies.py).
OLDEST_PYTHON_PACKAGES = ("pydantic", "aws-lambda-powertools", "publicsuffixlist", "mcp", "boto3", "httpx", "pyjwt")


@pytest.fixture(scope="module")
def oldest_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv on CPython 3.11 with the runtime's dependencies and mcp 2.3.0, installed by the pinned uv."""
    interpreter = packaging.find_interpreter("3.11")
    if interpreter is None:
        pytest.skip("needs CPython 3.11 here")
    (uv,) = sorted((REPO / ".tools").glob("uv-*/bin/uv"))
    venv = tmp_path_factory.mktemp("python3.11") / "venv"
    environment = {**os.environ, "UV_COMPILE_BYTECODE": "0"}
    environment.pop("VIRTUAL_ENV", None)
    subprocess.run([uv, "venv", "--quiet", "--python", interpreter.executable, venv], check=True, env=environment)
    constraints = ["--constraint", REPO / "requirements-dev.lock"]
    install = [uv, "pip", "install", "--quiet", "--python", venv / "bin" / "python", *constraints]
    subprocess.run([*install, *OLDEST_PYTHON_PACKAGES], check=True, env=environment)
    return venv / "bin" / "python"


def test_the_mcpserver_module_returning_a_typing_typeddict_is_listed_and_called_on_python_3_11_too(
    oldest_python: Path, tmp_path: Path
) -> None:
    package = tmp_path / "sdk_tools"
    package.mkdir()
    (package / "tickets.py").write_text(
        SDK_TICKETS.replace("from mcp.server.mcpserver import", "from mcp_runtime.fastmcp import"), encoding="utf-8"
    )
    (package / "tickets_real.py").write_text(SDK_TICKETS, encoding="utf-8")
    (package / "__init__.py").write_text(
        "from mcp_runtime import Catalog\n\nfrom . import tickets\n\n\n"
        "def register(catalog: Catalog, *, table_backed: bool) -> None:\n"
        "    catalog.tools.include(tickets)\n",
        encoding="utf-8",
    )
    path = os.pathsep.join([str(REPO / "functions"), str(REPO), str(tmp_path)])
    ran = subprocess.run(
        [oldest_python, "-c", ON_OLDEST_PYTHON],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": path, "HOME": str(tmp_path)},
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    seen = json.loads(ran.stdout)

    assert seen["python"] == [3, 11]
    (tool,) = seen["ours"]
    assert tool["name"] == "sdk_ticket"
    assert without_titles(tool["outputSchema"]) == without_titles(seen["theirs"]["outputSchema"])
    assert tool["outputSchema"]["properties"] == {"id": {"type": "string"}, "priority": {"type": "integer"}}
    assert seen["called"]["structuredContent"] == seen["theirs_called"] == {"id": "T-4", "priority": 2}
