"""The AWS side of the local stack: an embedded moto server running the task table and the real ASL.

moto executes Step Functions definitions when its config says so, but its Lambda backend cannot run
code without Docker. `LambdaSimpleBackend.invoke` is therefore replaced by a call of our own
handler, in this process; a raised exception becomes an `Unhandled` function error whose body
carries `errorType`, exactly what the interpreter's Catch/Retry match on. This patches a moto
internal: moto is pinned exactly (5.2.5) for that reason.
"""

from __future__ import annotations

import io
import json
import logging
import os
import threading
import urllib.request
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from mcp_runtime.tasks import schema

REGION: Final = "us-east-1"
ASL_PATH: Final = Path(__file__).resolve().parents[2] / "infra" / "statemachine" / "task_workflow.asl.json"
WORKER_PLACEHOLDER: Final = "WorkerFunctionArn"
DUMMY_CREDENTIALS: Final[dict[str, str]] = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
MOTO_CONFIG: Final[dict[str, Any]] = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
}
_LAMBDA_TRUST_POLICY: Final = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
)

LambdaHandler = Callable[[dict[str, Any], Any], Any]

# Function name -> the handler moto's invoke calls in-process. Functions not listed keep moto's behaviour.
_IN_PROCESS_HANDLERS: dict[str, LambdaHandler] = {}
_patch_lock = threading.Lock()
_patched = False


class InProcessLambdaContext:
    """Enough of the Lambda context object for Powertools and our handlers."""

    def __init__(self, function_name: str) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:{function_name}"
        self.memory_limit_in_mb = 512
        self.aws_request_id = "local"
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "local"

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def _function_name(name_or_arn: str) -> str:
    # arn:aws:lambda:<region>:<account>:function:<name>[:<qualifier>]
    if name_or_arn.startswith("arn:"):
        return name_or_arn.split(":")[6]
    return name_or_arn.split(":")[0]


def run_in_process(function_name: str, body: Any, response_headers: dict[str, str]) -> bytes:
    """Call the registered handler the way the Lambda runtime would, and shape its answer like Lambda's."""
    handler = _IN_PROCESS_HANDLERS[function_name]
    raw = body.decode() if isinstance(body, bytes) else (body or "")
    event = json.loads(raw) if raw else {}
    try:
        result = handler(event, InProcessLambdaContext(function_name))
    except Exception as exc:  # the runtime reports any exception as an Unhandled function error
        response_headers["x-amz-function-error"] = "Unhandled"
        payload = json.dumps({"errorType": type(exc).__name__, "errorMessage": str(exc)}).encode()
    else:
        payload = json.dumps(result).encode()
    response_headers["Content-Length"] = str(len(payload))
    return payload


def install_in_process_lambda() -> None:
    """Replace moto's no-Docker Lambda invoke with an in-process call of the registered handlers (once)."""
    global _patched
    with _patch_lock:
        if _patched:
            return
        from moto.awslambda_simple.models import LambdaSimpleBackend

        original = LambdaSimpleBackend.invoke

        def invoke(
            self: Any, function_name: str, qualifier: str | None, body: Any, headers: Any, response_headers: Any
        ) -> str | bytes | None:
            name = _function_name(function_name)
            if name not in _IN_PROCESS_HANDLERS:
                return original(self, function_name, qualifier, body, headers, response_headers)
            return run_in_process(name, body, response_headers)

        LambdaSimpleBackend.invoke = invoke  # type: ignore[method-assign]
        _patched = True


def register_function(function_name: str, handler: LambdaHandler) -> None:
    install_in_process_lambda()
    _IN_PROCESS_HANDLERS[function_name] = handler


def unregister_function(function_name: str) -> None:
    _IN_PROCESS_HANDLERS.pop(function_name, None)


def load_definition(substitutions: Mapping[str, str], path: Path = ASL_PATH) -> str:
    """The ASL text with its `${Name}` placeholders filled, as CDK's definition_substitutions would."""
    text = path.read_text(encoding="utf-8")
    for name, value in substitutions.items():
        text = text.replace("${" + name + "}", value)
    if "${" in text:
        raise ValueError(f"{path.name} still has unfilled placeholders after substitution")
    json.loads(text)  # fail here, not at execution time
    return text


@dataclass(frozen=True, slots=True)
class TaskResources:
    table_name: str
    state_machine_arn: str
    worker_function_name: str
    worker_function_arn: str


@dataclass
class EmbeddedAws:
    """A moto server on a free loopback port, configured to execute state machines."""

    server: Any
    endpoint: str
    _clients: dict[str, Any] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        """One cached client per service (building a boto3 client costs tens of milliseconds)."""
        if service not in self._clients:
            from mcp_runtime.tasks.aws_clients import shared_session

            self._clients[service] = shared_session().client(
                service,
                endpoint_url=self.endpoint,
                region_name=REGION,
                aws_access_key_id=DUMMY_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=DUMMY_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            )
        return self._clients[service]

    def configure(self) -> None:
        """(Re)apply moto's config; moto keeps it process-wide, so anything resetting it needs this again."""
        request = urllib.request.Request(
            f"{self.endpoint}/moto-api/config",
            data=json.dumps(MOTO_CONFIG).encode(),
            headers={"content-type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def provision(
        self,
        *,
        table_name: str = "mcp-tasks",
        state_machine_name: str = "mcp-task-workflow",
        worker_function_name: str = "mcp-task-worker",
        worker: LambdaHandler | None = None,
    ) -> TaskResources:
        """The task table (TTL + owner index), the worker function and the state machine from the ASL file."""
        self.configure()
        dynamodb = self.client("dynamodb")
        dynamodb.create_table(
            TableName=table_name,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": schema.PARTITION_KEY, "KeyType": "HASH"}],
            AttributeDefinitions=[
                {"AttributeName": schema.PARTITION_KEY, "AttributeType": "S"},
                {"AttributeName": schema.OWNER_INDEX_PARTITION_KEY, "AttributeType": "S"},
                {"AttributeName": schema.OWNER_INDEX_SORT_KEY, "AttributeType": "S"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": schema.OWNER_INDEX,
                    "KeySchema": [
                        {"AttributeName": schema.OWNER_INDEX_PARTITION_KEY, "KeyType": "HASH"},
                        {"AttributeName": schema.OWNER_INDEX_SORT_KEY, "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
        )
        dynamodb.update_time_to_live(
            TableName=table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": schema.TTL_ATTRIBUTE}
        )
        role_arn = self._role("mcp-local-execution-role")
        function = self.client("lambda").create_function(
            FunctionName=worker_function_name,
            Runtime="python3.13",
            Role=role_arn,
            Handler="app.worker_handler.lambda_handler",
            Code={"ZipFile": _placeholder_zip()},
            Timeout=900,
        )
        if worker is not None:
            register_function(worker_function_name, worker)
        machine = self.client("stepfunctions").create_state_machine(
            name=state_machine_name,
            definition=load_definition({WORKER_PLACEHOLDER: function["FunctionArn"]}),
            roleArn=role_arn,
            type="STANDARD",
        )
        return TaskResources(table_name, machine["stateMachineArn"], worker_function_name, function["FunctionArn"])

    def _role(self, name: str) -> str:
        iam = self.client("iam")
        try:
            return str(iam.get_role(RoleName=name)["Role"]["Arn"])
        except iam.exceptions.NoSuchEntityException:
            return str(iam.create_role(RoleName=name, AssumeRolePolicyDocument=_LAMBDA_TRUST_POLICY)["Role"]["Arn"])

    def app_environment(self, resources: TaskResources) -> dict[str, str]:
        """What the API and worker settings need to use these resources."""
        return {
            **DUMMY_CREDENTIALS,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "AWS_ENDPOINT_URL": self.endpoint,
            "TASK_TABLE_NAME": resources.table_name,
            "TASK_STATE_MACHINE_ARN": resources.state_machine_arn,
            "TASK_RELEASE_PARKED_ON_STOP": "1",
        }

    def stop(self) -> None:
        self.server.stop()


def _placeholder_zip() -> bytes:
    """moto wants a code package; the code that runs is the in-process handler."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("README.txt", "The local stack runs this function's handler in-process.\n")
    return buffer.getvalue()


def start_embedded_aws() -> EmbeddedAws:
    """Start moto on a free loopback port and point its Step Functions interpreter at it (MOTO_PORT)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per AWS call otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    # The interpreter calls Lambda at http://localhost:$MOTO_PORT: without this every Task state fails.
    os.environ["MOTO_PORT"] = str(port)
    aws = EmbeddedAws(server, f"http://{host}:{port}")
    install_in_process_lambda()
    aws.configure()
    return aws
