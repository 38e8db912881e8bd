"""Asset size of each function, built the way `cdk synth` builds it (no Docker).

Both Lambda functions (API and worker) run one asset: infra/bundling.py's `build_package` for
manylinux2014_aarch64 / CPython 3.13 (pip --target of the runtime dependencies, boto3 left to the
Lambda runtime, unused Powertools utilities pruned, then functions/{mcp_runtime,app,tools}).
For comparison, the same pip --target install of the SDK stack (mcp==2.3.0 + mangum, boto3 excluded).
Not a budget (docs/performance.md): size is the sanity ceiling a team sets in cdk.json (`assetSizeLimitMb`, checked
at synth); reported here beside the figure. The performance budget is the packaged asset's cold start
(bench/coldstart.py: packaged_discover_token/boto3_runtime <= 1.0).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from bench.coldstart import PACKAGED_BUDGET
from bench.common import REPO

MB = 1024 * 1024


def measure(root: Path) -> dict[str, Any]:
    files = [p for p in root.rglob("*") if p.is_file()]
    unzipped = sum(p.stat().st_size for p in files)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for path in sorted(files):
            archive.write(path, path.relative_to(root).as_posix())
    by_top: dict[str, int] = {}
    for path in files:
        top = path.relative_to(root).parts[0]
        top = top.split("-")[0] if top.endswith(".dist-info") else top
        by_top[top] = by_top.get(top, 0) + path.stat().st_size
    largest = sorted(by_top.items(), key=lambda item: -item[1])[:8]
    return {
        "files": len(files),
        "unzipped_bytes": unzipped,
        "zipped_bytes": len(buffer.getvalue()),
        "largest": [{"name": name, "bytes": size} for name, size in largest],
    }


def _sdk_asset(target_dir: Path) -> dict[str, Any] | None:
    command = [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
        "--platform", "manylinux2014_aarch64", "--implementation", "cp", "--python-version", "3.13",
        "--only-binary=:all:", "--target", str(target_dir), "mcp==2.3.0", "mangum==0.22.0",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "pip failed"}
    for name in ("boto3", "botocore", "s3transfer", "bin"):
        path = target_dir / name
        if path.exists():
            subprocess.run(["rm", "-rf", str(path)], check=False)
    return measure(target_dir)


def run(with_sdk: bool = True) -> dict[str, Any]:
    os.environ["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] = "20"  # the jsii banner on Node 20
    sys.path.insert(0, str(REPO))
    from infra.packaging import LAMBDA_TARGET, build_package

    result: dict[str, Any] = {"target": LAMBDA_TARGET.slug}
    with tempfile.TemporaryDirectory(prefix="bench-asset-") as tmp:
        asset = build_package(Path(tmp) / "asset", LAMBDA_TARGET)
        ours = measure(asset)
        ours["functions"] = ["api (app.handlers.api_handler)", "worker (app.handlers.worker_handler)"]
        result["ours"] = ours
        if with_sdk:
            result["sdk_stack"] = _sdk_asset(Path(tmp) / "sdk")
    limit = int(json.loads((REPO / "cdk.json").read_text(encoding="utf-8"))["context"].get("assetSizeLimitMb", 50))
    result["ceiling"] = {"assetSizeLimitMb": limit, "within": result["ours"]["unzipped_bytes"] <= limit * MB}
    result["budgets"] = {}  # the asset's performance budget is its cold start (coldstart)
    return result


def report(result: dict[str, Any]) -> list[str]:
    lines = [f"Asset size ({result['target']}, as infra/bundling.py builds it; one asset for both functions)"]
    ours = result["ours"]
    lines.append(
        f"  ours (api + worker): {ours['unzipped_bytes'] / MB:.2f} MB unzipped,"
        f" {ours['zipped_bytes'] / MB:.2f} MB zipped,"
        f" {ours['files']} files; largest: "
        + ", ".join(f"{e['name']} {e['bytes'] / MB:.2f} MB" for e in ours["largest"][:5])
    )
    sdk = result.get("sdk_stack")
    if sdk and "error" not in sdk:
        lines.append(
            f"  SDK stack (mcp 2.3.0 + mangum): {sdk['unzipped_bytes'] / MB:.2f} MB unzipped,"
            f" {sdk['zipped_bytes'] / MB:.2f} MB zipped, {sdk['files']} files"
        )
        lines.append(f"  ratio SDK/ours unzipped: {sdk['unzipped_bytes'] / ours['unzipped_bytes']:.2f}")
    elif sdk:
        lines.append(f"  SDK stack: not measured ({sdk['error']})")
    ceiling = result["ceiling"]
    lines.append(
        f"  ceiling assetSizeLimitMb {ceiling['assetSizeLimitMb']} MB (cdk.json, checked at synth):"
        f" {'within' if ceiling['within'] else 'OVER'}; not a budget: the asset's is its {PACKAGED_BUDGET}"
    )
    return lines


if __name__ == "__main__":
    print("\n".join(report(run())))
