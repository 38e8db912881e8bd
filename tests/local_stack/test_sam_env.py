"""`make sam-env`: env-vars files for `sam local invoke`, against the local stack or a deployed one."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from local_stack.sam_env import deployed_template, function_environments
from local_stack.synth import synthesize
from moto import mock_aws
from testkit import RunningStack

from local_stack import sam_env
from tests.support import REPO

pytestmark = pytest.mark.e2e

# Resource types moto's CloudFormation creates (Secrets Manager secrets it does not).
MOTO_CLOUDFORMATION_TYPES = {"AWS::DynamoDB::Table", "AWS::IAM::Role", "AWS::StepFunctions::StateMachine"}


def test_the_local_env_vars_name_the_running_stacks_resources_and_how_to_reach_them(
    tmp_path: Path, template_stack: RunningStack
) -> None:
    running = template_stack
    port = running.url.split(":")[2].split("/")[0]
    done = subprocess.run(
        [sys.executable, "-m", "local_stack.sam_env", "--port", port, "--out", str(tmp_path)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": f"{REPO / 'functions'}{os.pathsep}{REPO}"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    environments = json.loads((tmp_path / "env.json").read_text())
    table = running.physical_id("TaskTable", "AWS::DynamoDB::Table")
    machine = running.physical_id("Workflow", "AWS::StepFunctions::StateMachine")
    assert set(environments) == set(running.state["functions"])
    for logical_id, function in running.state["functions"].items():
        assert environments[logical_id] == function["environment"]
        container = json.loads((tmp_path / f"container-env.{logical_id}.json").read_text())
        assert container["AWS_ENDPOINT_URL"] == running.aws_endpoint.replace("127.0.0.1", "host.docker.internal")
        assert container["AWS_SESSION_TOKEN"]
    (api,) = [v for k, v in environments.items() if k.startswith("FunctionsApi")]
    assert (api["TASK_TABLE_NAME"], api["TASK_STATE_MACHINE_ARN"]) == (table, machine)


def test_the_deployed_env_vars_use_the_physical_ids_cloudformation_gave_the_stack() -> None:
    assembly = synthesize()
    (template_path,) = assembly.directory.glob("*.template.json")
    template: dict[str, Any] = json.loads(template_path.read_text())
    deployable = {k: dict(v) for k, v in template["Resources"].items() if v["Type"] in MOTO_CLOUDFORMATION_TYPES}
    for body in deployable.values():
        body.pop("DependsOn", None)
        if body["Type"] == "AWS::StepFunctions::StateMachine":
            properties = dict(body["Properties"])
            for key in ("DefinitionS3Location", "DefinitionSubstitutions", "LoggingConfiguration"):
                properties.pop(key, None)
            properties["DefinitionString"] = json.dumps(
                {"StartAt": "A", "States": {"A": {"Type": "Pass", "End": True}}}
            )
            body["Properties"] = properties
    with mock_aws():
        cloudformation = boto3.client("cloudformation", region_name="eu-west-1")
        cloudformation.create_stack(StackName="Deployed", TemplateBody=json.dumps({"Resources": deployable}))
        physical = {
            s["LogicalResourceId"]: s["PhysicalResourceId"]
            for s in cloudformation.list_stack_resources(StackName="Deployed")["StackResourceSummaries"]
        }
        resolved = deployed_template(template, "Deployed", assembly.directory, cloudformation)
    environments = function_environments(resolved)
    (table_id,) = [
        k for k, v in deployable.items() if v["Type"] == "AWS::DynamoDB::Table" and k.startswith("TaskTable")
    ]
    (machine_id,) = [k for k, v in deployable.items() if v["Type"] == "AWS::StepFunctions::StateMachine"]
    (api,) = [v for k, v in environments.items() if k.startswith("FunctionsApi")]
    assert api["TASK_TABLE_NAME"] == physical[table_id]
    assert api["TASK_STATE_MACHINE_ARN"] == physical[machine_id]
    assert physical[machine_id].startswith("arn:aws:states:eu-west-1:123456789012:stateMachine:")


def test_a_state_file_left_by_a_stopped_stack_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    run_dir, out = tmp_path / "run", tmp_path / "sam"
    run_dir.mkdir()
    with socket.socket() as closed:  # a port nothing listens on once this socket is closed
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    (run_dir / "3000.json").write_text(json.dumps({"awsEndpoint": f"http://127.0.0.1:{port}"}))
    expected = (
        "no local stack is running now (the state files in build/local-stack/run are of stacks that have "
        "stopped): start `make run` first, or pass STACK=<name>"
    )
    with pytest.raises(SystemExit, match=re.escape(expected)):
        sam_env.local_state(None, run_dir)
    with pytest.raises(SystemExit, match=re.escape("no local stack is running on port 3000 now")):
        sam_env.local_state(3000, run_dir)
    assert not out.exists()
