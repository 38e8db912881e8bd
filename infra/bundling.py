"""CDK's side of the Docker-free asset: `PipLocalBundling` runs `infra.packaging.build_package`."""

from __future__ import annotations

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

from infra.packaging import (
    FUNCTIONS_DIR,
    LAMBDA_TARGET,
    SHIPPED_PACKAGES,
    Target,
    build_package,
    runtime_requirements,
    source_fingerprint,
)


@jsii.implements(ILocalBundling)
class PipLocalBundling:
    """Runs `build_package` on this machine instead of `docker run`."""

    def __init__(self, target: Target = LAMBDA_TARGET) -> None:
        self.target = target

    def try_bundle(self, output_dir: str, options: BundlingOptions) -> bool:  # jsii passes the options positionally
        build_package(output_dir, self.target)
        return True


def function_code(target: Target = LAMBDA_TARGET) -> lambda_.Code:
    """The asset both functions run. The Docker image is only a fallback CDK never reaches here."""
    packages = " ".join(f"/asset-input/{package}" for package in SHIPPED_PACKAGES)
    requirements = " ".join(f"'{req}'" for req in runtime_requirements())
    return lambda_.Code.from_asset(
        str(FUNCTIONS_DIR),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=source_fingerprint(target),
        bundling=BundlingOptions(
            image=DockerImage.from_registry("public.ecr.aws/sam/build-python3.13"),
            command=[
                "bash",
                "-c",
                f"pip install --no-compile -t /asset-output {requirements} && cp -r {packages} /asset-output/",
            ],
            local=PipLocalBundling(target),
        ),
    )
