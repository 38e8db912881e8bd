"""`make sam-env`: the env-vars file `sam local invoke --env-vars` wants, written from the template.

For each function of the synthesized template: its `Environment.Variables`, resolved the way
CloudFormation resolves them, against
- the running local stack (default; `build/local-stack/run/<port>.json`), or
- a deployed stack (`--stack NAME`: physical ids from CloudFormation's ListStackResources, with the
  caller's AWS credentials), so `sam local invoke` reaches that stack's table, secret and state machine.

SAM overrides only variables the template declares (the AWS SAM guide says so), so for the local
stack one more file per function holds what its container also needs to reach the embedded AWS
(AWS_ENDPOINT_URL, and the function role's credentials), for SAM's `--container-env-vars`, which
SAM applies in a debugging session (`--debug-port`).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from local_stack.synth import REPO, synthesize
from local_stack.template import DeployedTemplate

OUT_DIR: Final = REPO / "build" / "sam"
RUN_DIR: Final = REPO / "build" / "local-stack" / "run"
DOCKER_HOST: Final = "host.docker.internal"


def function_environments(template: DeployedTemplate) -> dict[str, dict[str, str]]:
    """Logical id -> the function's environment as its template resolves it."""
    environments = {}
    for resource in template.resources("AWS::Lambda::Function"):
        variables = (resource.properties.get("Environment") or {}).get("Variables") or {}
        environments[resource.logical_id] = {str(k): str(v) for k, v in template.resolve(variables).items()}
    return environments


def deployed_template(
    template: dict[str, Any], stack_name: str, assembly: Path, cloudformation: Any
) -> DeployedTemplate:
    """The template with the physical ids CloudFormation gave the deployed stack's resources."""
    physical_ids: dict[str, str] = {}
    region = cloudformation.meta.region_name
    account = ""
    for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack_name):
        for summary in page["StackResourceSummaries"]:
            if summary.get("PhysicalResourceId"):
                physical_ids[summary["LogicalResourceId"]] = summary["PhysicalResourceId"]
    stack = cloudformation.describe_stacks(StackName=stack_name)["Stacks"][0]
    account = stack["StackId"].split(":")[4]
    return DeployedTemplate(
        template, stack_name, assembly, region=region, account_id=account, physical_ids=physical_ids
    )


def _running(state: Mapping[str, Any]) -> bool:
    """Whether the stack that wrote this state still serves (a stopped or killed one leaves its file)."""
    aws = urlsplit(str(state.get("awsEndpoint", "")))
    try:
        with socket.create_connection((aws.hostname or "127.0.0.1", aws.port or 80), timeout=2):
            return True
    except OSError:
        return False


def local_state(port: int | None, run_dir: Path = RUN_DIR) -> dict[str, Any]:
    """The state of the running local stack on `port` (the newest running one if not given)."""
    paths = [run_dir / f"{port}.json"] if port is not None else sorted(run_dir.glob("*.json"), key=os.path.getmtime)
    states = [json.loads(path.read_text(encoding="utf-8")) for path in paths if path.exists()]
    running = [state for state in states if _running(state)]
    if running:
        return dict(running[-1])
    on = f"on port {port} " if port is not None else ""
    earlier = " (the state files in build/local-stack/run are of stacks that have stopped)" if states else ""
    raise SystemExit(f"no local stack is running {on}now{earlier}: start `make run` first, or pass STACK=<name>")


def admin_client(state: Mapping[str, Any], service: str) -> Any:
    """A boto3 client of the running local stack's embedded AWS, as its administrator."""
    import boto3

    admin = state["administrator"]
    session = boto3.session.Session(
        aws_access_key_id=admin["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=admin["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=admin.get("AWS_SESSION_TOKEN"),
        region_name="us-east-1",
    )
    return session.client(service, endpoint_url=state["awsEndpoint"])


def write(out_dir: Path, name: str, document: Mapping[str, Any]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / name
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make sam-env", description=__doc__.splitlines()[0])
    parser.add_argument("--stack", help="a deployed CloudFormation stack's name (default: the running local stack)")
    parser.add_argument("--port", type=int, help="the local stack's port (default: the newest one)")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="where to write the files (default build/sam)")
    parser.add_argument("--docker-host", default=DOCKER_HOST, help="how SAM's container reaches this machine")
    args = parser.parse_args(argv)
    if args.stack:
        import boto3

        assembly = synthesize()
        (template_path,) = assembly.directory.glob("*.template.json")
        template = json.loads(template_path.read_text(encoding="utf-8"))
        resolved = deployed_template(template, args.stack, assembly.directory, boto3.client("cloudformation"))
        written = [write(args.out, "env.json", function_environments(resolved))]
    else:
        state = local_state(args.port)
        template = DeployedTemplate.load(Path(state["assembly"]), state["stackName"])
        template.physical_ids.update(state["physicalIds"])
        environments = function_environments(template)
        endpoint = str(state["awsEndpoint"]).replace("127.0.0.1", args.docker_host)
        written = [write(args.out, "env.json", environments)]
        for logical_id in environments:
            container = {"AWS_ENDPOINT_URL": endpoint, **state["credentials"][logical_id]}
            written.append(write(args.out, f"container-env.{logical_id}.json", container))
    for path in written:
        print(f"wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
