"""`npx cdk synth` as a user runs it (offline, no AWS credentials, real bundling), then cfn-lint on
its template and checks of the asset it bundled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App
from infra.cdk_app import build_app

from infra import packaging as bundling
from tests.infra.conftest import FULL_OPTIONS, PROJECT_STACK_NAME, REPO, cfn_lint
from tests.support import project_tools

pytestmark = pytest.mark.infra

ELF_MACHINE_AARCH64 = 0xB7
# The first 4 bytes of every .pyc CPython 3.13 writes (importlib.util.MAGIC_NUMBER: 3571) and the
# flags word of a hash-based, unchecked one (PEP 552).
PYC_MAGIC_CPYTHON_313 = (3571).to_bytes(2, "little") + b"\r\n"
PYC_UNCHECKED_HASH = (1).to_bytes(4, "little")
# What the Lambda runtime itself provides (python3.13): handed to the import test from the venv.
RUNTIME_PACKAGES = ("boto3", "botocore", "s3transfer", "jmespath", "dateutil", "urllib3", "six.py")


def _function_asset(template: dict[str, Any], outdir: Path, handler: str) -> Path:
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Lambda::Function" and resource["Properties"]["Handler"] == handler:
            metadata = resource["Metadata"]
            assert metadata["aws:asset:property"] == "Code"  # what `sam local invoke` reads
            return outdir / metadata["aws:asset:path"]
    raise AssertionError(f"no function with handler {handler}")


def _size(root: Path, *, bytecode: bool = True) -> int:
    return sum(
        path.stat().st_size
        for path in root.rglob("*")
        if path.is_file() and (bytecode or "__pycache__" not in path.parts)
    )


def test_cdk_synth_succeeds_offline_without_credentials(
    cdk_cli_synth: tuple[Any, Path], cli_template: dict[str, Any]
) -> None:
    result, outdir = cdk_cli_synth
    assert result.returncode == 0
    assert (outdir / f"{PROJECT_STACK_NAME}.template.json").exists()
    # cdk-nag ran inside the synth and left no finding.
    assert "AwsSolutions" not in result.stdout + result.stderr


def test_cfn_lint_is_clean(cdk_cli_synth: tuple[Any, Path], cli_template: dict[str, Any]) -> None:
    _, outdir = cdk_cli_synth
    lint = cfn_lint(outdir / f"{PROJECT_STACK_NAME}.template.json")
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_both_functions_share_one_asset(cdk_cli_synth: tuple[Any, Path], cli_template: dict[str, Any]) -> None:
    """Its size is no test's business: the team's ceiling is `assetSizeLimitMb` (cdk.json, checked at synth:
    the next test), and the performance budget is the packaged asset's cold start, its first
    `server/discover` at or below `import boto3` (bench/coldstart.py, packaged_discover_token/boto3_runtime)."""
    _, outdir = cdk_cli_synth
    api = _function_asset(cli_template, outdir, "app.handlers.api_handler")
    worker = _function_asset(cli_template, outdir, "app.handlers.worker_handler")
    assert api == worker
    size = bundling.measure_asset(api)
    print(f"API asset: {size.total_bytes / bundling.MIB:.2f} MiB unzipped with bytecode; {size.biggest()}")


def test_an_asset_over_assetSizeLimitMb_stops_the_synth_naming_the_key_and_the_biggest_packages(
    cdk_cli_synth: tuple[Any, Path], cli_template: dict[str, Any]
) -> None:
    """The app again, in this process, into the CLI's cdk.out: the asset it staged there is found by its
    hash (no second bundling) and held to a 5 MB ceiling."""
    _, outdir = cdk_cli_synth
    staged = _function_asset(cli_template, outdir, "app.handlers.api_handler")
    size = bundling.measure_asset(staged)
    with pytest.raises(bundling.AssetTooLarge) as refused:
        build_app(App(outdir=str(outdir), context={**FULL_OPTIONS, "assetSizeLimitMb": 5}), nag=False)
    assert str(refused.value) == (
        f"the functions' asset is {size.total_bytes / bundling.MIB:.1f} MB unzipped (bytecode included), over "
        f"the 5 MB set by 'assetSizeLimitMb' (cdk.json context). Biggest packages: {size.biggest()}. Raise "
        "'assetSizeLimitMb' if that is what the tools need (Lambda's own limit is 250 MB), or drop a dependency: "
        "`make remove-dependency PKG=<name>` (docs/dependencies.md)"
    )
    assert size.biggest(2).startswith("pydantic_core ")
    # The default ceiling (50 MB) holds: the CLI synth above passed it.


def test_asset_holds_our_packages_and_aarch64_wheels_but_not_boto3_or_test_code(
    cdk_cli_synth: tuple[Any, Path], cli_template: dict[str, Any]
) -> None:
    _, outdir = cdk_cli_synth
    asset = _function_asset(cli_template, outdir, "app.handlers.api_handler")
    top = {path.name for path in asset.iterdir()}
    assert {"app", "mcp_runtime", "tools", "pydantic", "pydantic_core", "aws_lambda_powertools"} <= top
    assert not top & {"boto3", "botocore", "s3transfer", "fixtures", "local_stack", "tests", "bin"}
    # Powertools utilities nothing imports are pruned; the one the sealing key needs stays.
    powertools = asset / "aws_lambda_powertools"
    assert (powertools / "utilities" / "parameters").is_dir()
    assert not (powertools / "utilities" / "idempotency").exists()
    assert not list((powertools / "event_handler").rglob("*.js"))
    assert (asset / "app" / "handlers.py").read_bytes() == (REPO / "functions/app/handlers.py").read_bytes()
    (binary,) = list((asset / "pydantic_core").glob("_pydantic_core.*.so"))
    assert "cpython-313-aarch64-linux-gnu" in binary.name
    header = binary.read_bytes()[:20]
    assert header[:4] == b"\x7fELF" and int.from_bytes(header[18:20], "little") == ELF_MACHINE_AARCH64


@pytest.fixture(scope="session")
def host_asset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bundling.build_package(tmp_path_factory.mktemp("host-asset"), bundling.host_target())


def test_asset_imports_in_a_clean_interpreter(
    host_asset: Path, cdk_cli_synth: tuple[Any, Path], cli_template: dict[str, Any], tmp_path: Path
) -> None:
    """The built asset is complete: a bare interpreter with nothing but it (and the boto3 the Lambda
    runtime provides) imports every shipped module and answers `server/discover` and `tools/call`.

    Why a second copy: the deployed asset carries aarch64/CPython 3.13 wheels (pydantic_core),
    which cannot load on this x86_64 Python. So the same `bundling.build_package` builds the same
    layout for the host interpreter, and this test imports that copy after checking that its files
    match the real asset's one for one, apart from the compiled extension's name. What the check
    cannot catch is an aarch64-only wheel problem, which pip's platform resolution rules out.
    """
    _, outdir = cdk_cli_synth
    real = _function_asset(cli_template, outdir, "app.handlers.api_handler")

    def files(root: Path) -> set[str]:  # bytecode is per interpreter: compared by the bytecode tests
        return {
            p.relative_to(root).as_posix()
            for p in root.rglob("*")
            if p.is_file() and ".so" not in p.suffixes and "__pycache__" not in p.parts
        }

    def without_records(names: set[str]) -> set[str]:  # RECORD/WHEEL name the wheel's platform tag
        return {n for n in names if not n.endswith((".dist-info/RECORD", ".dist-info/WHEEL"))}

    assert without_records(files(host_asset)) == without_records(files(real))

    runtime = tmp_path / "lambda-runtime"
    runtime.mkdir()
    site = Path(__import__("boto3").__file__).parents[1]
    for name in RUNTIME_PACKAGES:
        if (site / name).exists():
            (runtime / name).symlink_to(site / name)
    script = r"""
import importlib, json, pkgutil, sys
sys.path[:] = [p for p in sys.path if "site-packages" not in p]
sys.path[:0] = [ASSET, RUNTIME]
for package in ("mcp_runtime", "app", "tools"):
    module = importlib.import_module(package)
    for info in pkgutil.walk_packages(module.__path__, package + "."):
        importlib.import_module(info.name)
import aws_lambda_powertools.utilities.parameters  # the sealing key's reader
from app.handlers import api_handler as lambda_handler
from app.handlers import worker_handler
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
def call(method, params, name=None):
    headers = {"content-type": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": method}
    if name:
        headers["mcp-name"] = name
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    claims = {"sub": "u1", "client_id": "c1"}
    context = {"http": {"method": "POST", "path": "/mcp"}, "authorizer": {"jwt": {"claims": claims, "scopes": None}}}
    event = {"version": "2.0", "rawPath": "/mcp", "headers": headers, "body": json.dumps(body),
             "isBase64Encoded": False, "requestContext": context}
    response = lambda_handler(event, None)
    return response["statusCode"], json.loads(response["body"])
status, discover = call("server/discover", {})
assert status == 200, discover
status, listed = call("tools/list", {})
assert status == 200 and sorted(tool["name"] for tool in listed["result"]["tools"]) == PROJECT_TOOLS, listed
test_only = ("moto", "pytest", "fixtures", "local_stack", "mcp", "tests")
leaked = sorted(m for m in sys.modules if m.split(".")[0] in test_only)
assert not leaked, leaked
print(json.dumps({"modules": len(sys.modules)}))
"""
    script = (
        script.replace("ASSET", repr(str(host_asset)))
        .replace("RUNTIME", repr(str(runtime)))
        .replace("PROJECT_TOOLS", repr(project_tools(table_backed=False)))  # no task table here
    )
    env = {
        "PATH": os.environ.get("PATH", ""),
        "MCP_SERVER_NAME": "asset-check",
        "AWS_DEFAULT_REGION": "us-east-1",
        "MCP_STATE_KEY": "asset-check-requestState-key-0123456789abcdef",
    }
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, (bundling.missing_dependency_hint(done.stderr) or "") + "\n" + done.stderr[-4000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["modules"] > 0


def test_every_module_of_the_deployed_asset_ships_bytecode_for_cpython_3_13(
    cdk_cli_synth: tuple[Any, Path], cli_template: dict[str, Any]
) -> None:
    """/var/task is read-only: a module without its .pyc compiles on every cold start."""
    _, outdir = cdk_cli_synth
    asset = _function_asset(cli_template, outdir, "app.handlers.api_handler")
    modules = sorted(path for path in asset.rglob("*.py") if "__pycache__" not in path.parts)
    assert len(modules) > 100
    missing, wrong = [], []
    for module in modules:
        cached = module.parent / "__pycache__" / f"{module.stem}.cpython-313.pyc"
        if not cached.is_file():
            missing.append(module.relative_to(asset).as_posix())
        elif cached.read_bytes()[:8] != PYC_MAGIC_CPYTHON_313 + PYC_UNCHECKED_HASH:
            wrong.append(module.relative_to(asset).as_posix())
    assert (missing, wrong) == ([], [])
    # Nothing but 3.13 bytecode: no other interpreter's left in the asset.
    assert {path.name.split(".")[-2] for path in asset.rglob("*.pyc")} == {"cpython-313"}
