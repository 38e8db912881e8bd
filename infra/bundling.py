"""CDK's side of the Docker-free asset: `PipLocalBundling` runs `infra.packaging.build_package`.

The asset ships bytecode for the Lambda interpreter (CPython 3.13). `infra.packaging.find_compiler`
finds one on this machine (a native 3.13, or Pyodide's from npm); without one, CDK's Docker bundling
builds the asset where a Docker daemon answers; otherwise the asset ships without bytecode and the
synth says so, loudly, with what it costs.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from pathlib import Path

import jsii
from aws_cdk import Annotations, AssetHashType, BundlingOptions, DockerImage, ILocalBundling, Stack, Stage
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3_assets as s3_assets
from constructs import IConstruct

from infra.packaging import (
    FUNCTIONS_DIR,
    LAMBDA_TARGET,
    LAMBDA_TASK_ROOT,
    SHIPPED_PACKAGES,
    AssetSize,
    Target,
    build_package,
    bytecode_tag,
    check_asset_size,
    check_runtime_stdlib,
    find_compiler,
    runtime_requirements,
    source_fingerprint,
)

BUNDLING_IMAGE = "public.ecr.aws/sam/build-python3.13"
# bench/README.md, "Bytecode": the packaged API's first server/discover without the asset's bytecode.
NO_BYTECODE_WARNING = (
    "The Lambda asset ships NO BYTECODE for CPython {version}: no CPython {version} (native, or Pyodide's"
    " from npm: `npm ci`) and no Docker daemon on this machine. /var/task is read-only, so every cold start"
    " compiles every module it imports: about 3x the cold start of the API function (bench/README.md,"
    " Bytecode). Install python{version} (or set MCP_BYTECODE_PYTHON), or run `npm ci`, and synthesize again."
)


@functools.cache
def docker_available() -> bool:
    docker = shutil.which("docker")
    if docker is None:
        return False
    try:
        return subprocess.run([docker, "info"], capture_output=True, timeout=20, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def bytecode_source(target: Target = LAMBDA_TARGET) -> str:
    """Who compiles the asset's bytecode: a local interpreter, the Docker image, or nobody."""
    if find_compiler(target.python_version) is not None:
        return bytecode_tag(target)
    return f"bytecode {BUNDLING_IMAGE}" if docker_available() else "no bytecode"


@jsii.implements(ILocalBundling)
class PipLocalBundling:
    """Runs `build_package` on this machine instead of `docker run`, unless only Docker has a compiler
    for the target's bytecode (False hands the build to CDK's Docker bundling)."""

    def __init__(self, target: Target = LAMBDA_TARGET) -> None:
        self.target = target

    def try_bundle(self, output_dir: str, options: BundlingOptions) -> bool:  # jsii passes the options positionally
        if find_compiler(self.target.python_version) is None and docker_available():
            return False
        build_package(output_dir, self.target, check_tools=True)
        return True


def function_code(
    target: Target = LAMBDA_TARGET, scope: IConstruct | None = None, *, functions_dir: Path = FUNCTIONS_DIR
) -> lambda_.Code:
    """The asset both functions run; `scope` carries the synth's warning when it has no bytecode.
    Refused (`RuntimeStdlibMissing`) when the functions import a standard-library module the target's
    Python does not have: a venv of another Python imports it, Lambda would not."""
    check_runtime_stdlib(functions_dir, version=target.python_version)
    source = bytecode_source(target)
    if source == "no bytecode":
        message = NO_BYTECODE_WARNING.format(version=target.python_version)
        print(f"\n*** WARNING: {message}\n", file=sys.stderr)
        if scope is not None:
            Annotations.of(scope).add_warning_v2("serverless-mcp-tasks:no-bytecode", message)
    packages = " ".join(f"/asset-input/{package}" for package in SHIPPED_PACKAGES)
    requirements = " ".join(f"'{req}'" for req in runtime_requirements())
    compile_step = f"python -m compileall -q -d {LAMBDA_TASK_ROOT} --invalidation-mode unchecked-hash /asset-output"
    return lambda_.Code.from_asset(
        str(functions_dir),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=source_fingerprint(target, source),
        bundling=BundlingOptions(
            image=DockerImage.from_registry(BUNDLING_IMAGE),
            command=[
                "bash",
                "-c",
                f"pip install --no-compile -t /asset-output {requirements} && cp -r {packages} /asset-output/"
                f" && {compile_step}",
            ],
            local=PipLocalBundling(target),
        ),
    )


def check_function_assets(stack: Stack, limit_mb: int) -> dict[str, AssetSize]:
    """Every function asset the stack staged (bundled now, or found in cdk.out from an earlier synth),
    held to `assetSizeLimitMb`: raises `AssetTooLarge` naming the key and the biggest packages.
    Nothing to measure when the synth skips bundling (`aws:cdk:bundling-stacks`)."""
    if not stack.bundling_required:
        return {}
    outdir = Path(Stage.of(stack).asset_outdir)  # type: ignore[union-attr]
    sizes: dict[str, AssetSize] = {}
    for construct in stack.node.find_all():
        # lambda.Code.from_asset stages its directory as an s3 Asset named "Code" under the first function.
        if isinstance(construct, s3_assets.Asset) and construct.node.id == "Code" and construct.is_zip_archive:
            staged = outdir / construct.asset_path
            if staged.is_dir() and str(staged) not in sizes:
                sizes[str(staged)] = check_asset_size(staged, limit_mb)
    return sizes
