"""The AWS side of the local stack: an embedded moto server that executes state machines for real.

moto executes Step Functions definitions when its config says so, but its Lambda backend cannot run
code without Docker. `LambdaSimpleBackend.invoke` is therefore replaced by a dispatch to the
function's invoker: for the local stack, the function's own execution environments
(`local_stack.runtime`); for component tests, a handler called in-process. An invoker's function
error becomes an `Unhandled` function error whose body carries `errorType`, exactly what the
interpreter's Catch/Retry match on.

Two behaviours are brought in line with AWS here, so the function code needs no local switch:
- StopExecution during a `.waitForTaskToken` wait: AWS aborts at once; moto keeps waiting until a
  callback arrives. After moto's stop, the execution's pending callbacks are failed, so it settles
  ABORTED at once.
- The interpreter's own calls are signed with the state machine role's credentials when IAM is
  enforced (`local_stack.iam_enforcement`).
A task token that was answered already answers HTTP 400 TaskTimedOut ("Task Timed Out: 'Provided
task does not exist anymore'"), as AWS does, to SendTaskSuccess, SendTaskFailure and
SendTaskHeartbeat: moto accepted it again while the execution ran, and once that was refused, its
own answer failed while being raised (its TaskTimedOut takes a message it is not given) and came out
as HTTP 500, which a caller takes for a temporary failure.
DynamoDB requests are applied one at a time: moto's server handles requests on concurrent threads and
evaluates a condition and applies its update without a lock, so two conditional writes to one item
could both pass; DynamoDB applies each write to an item atomically.
Each execution's status changes (started, then how it ended) are reported to the listeners
registered with `on_execution_status`, as AWS reports them to EventBridge (`local_stack.event_delivery`).
`$$.State.EnteredTime` is written as AWS writes it (`2026-07-28T10:30:00.123Z`, milliseconds, Z);
moto wrote Python's `isoformat()` (microseconds, +00:00).
Used stream shard iterators are forgotten (moto kept every one, a leak at one poll every 50 ms).
These patch moto internals: moto is pinned exactly (5.2.5) for that reason.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from local_stack.clients import aws_client

REGION: Final = "us-east-1"
DUMMY_CREDENTIALS: Final[dict[str, str]] = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
MOTO_CONFIG: Final[dict[str, Any]] = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
}

LambdaHandler = Callable[[dict[str, Any], Any], Any]
# (payload bytes, request headers) -> (payload bytes, function error or None)
Invoker = Callable[[bytes, dict[str, str]], tuple[bytes, str | None]]


class LambdaThrottled(Exception):
    """An invocation over the function's concurrency limit: Lambda answers it HTTP 429
    TooManyRequestsException, with `reason` saying which limit."""

    def __init__(self, function_name: str, reason: str) -> None:
        super().__init__(f"Rate Exceeded. ({reason}: {function_name})")
        self.function_name = function_name
        self.reason = reason


_INVOKERS: dict[str, Invoker] = {}
_STATUS_LISTENERS: list[Callable[[Any], None]] = []
_patch_lock = threading.Lock()
_patched = False
log = logging.getLogger(__name__)


class InProcessLambdaContext:
    """Enough of the Lambda context object for handlers called in-process by component tests."""

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


def function_name_of(name_or_arn: str) -> str:
    # arn:aws:lambda:<region>:<account>:function:<name>[:<qualifier>]
    if name_or_arn.startswith("arn:"):
        return name_or_arn.split(":")[6]
    return name_or_arn.split(":")[0]


def in_process(function_name: str, handler: LambdaHandler) -> Invoker:
    """An invoker that calls `handler` in this process (component tests only: one environment for all)."""

    def invoke(body: bytes, headers: dict[str, str]) -> tuple[bytes, str | None]:
        raw = body.decode() if body else ""
        event = json.loads(raw) if raw else {}
        try:
            result = handler(event, InProcessLambdaContext(function_name))
        except Exception as exc:  # the runtime reports any exception as an Unhandled function error
            return json.dumps({"errorType": type(exc).__name__, "errorMessage": str(exc)}).encode(), "Unhandled"
        return json.dumps(result).encode(), None

    return invoke


def register_invoker(function_name: str, invoker: Invoker) -> None:
    install_patches()
    _INVOKERS[function_name] = invoker


def register_function(function_name: str, handler: LambdaHandler) -> None:
    register_invoker(function_name, in_process(function_name, handler))


def unregister_function(function_name: str) -> None:
    _INVOKERS.pop(function_name, None)


def on_execution_status(listener: Callable[[Any], None]) -> Callable[[], None]:
    """Call `listener(execution)` at each status change of any execution; returns the unsubscribe."""
    install_patches()
    _STATUS_LISTENERS.append(listener)
    return lambda: _STATUS_LISTENERS.remove(listener) if listener in _STATUS_LISTENERS else None


def _report_status(execution: Any) -> None:
    for listener in list(_STATUS_LISTENERS):
        try:
            listener(execution)
        except Exception:
            log.exception("execution status listener")


_DYNAMODB_ITEM_OPERATIONS: Final = (
    "put_item",
    "get_item",
    "update_item",
    "delete_item",
    "query",
    "scan",
    "transact_write_items",
)
_dynamodb_lock = threading.RLock()


def _serialized(operation: Callable[..., Any]) -> Callable[..., Any]:
    def serialized(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _dynamodb_lock:
            return operation(self, *args, **kwargs)

    return serialized


def install_patches() -> None:
    """moto's no-Docker Lambda invoke -> the registered invokers; StopExecution as AWS does it (once)."""
    global _patched
    with _patch_lock:
        if _patched:
            return
        from moto.awslambda_simple.models import LambdaSimpleBackend
        from moto.stepfunctions.parser.backend.execution import Execution

        original_invoke = LambdaSimpleBackend.invoke

        def invoke(
            self: Any, function_name: str, qualifier: str | None, body: Any, headers: Any, response_headers: Any
        ) -> str | bytes | None:
            invoker = _INVOKERS.get(function_name_of(function_name))
            if invoker is None:
                return original_invoke(self, function_name, qualifier, body, headers, response_headers)
            raw = body if isinstance(body, bytes) else (body or "").encode()
            try:
                payload, function_error = invoker(raw, {str(k).lower(): str(v) for k, v in dict(headers or {}).items()})
            except LambdaThrottled as throttled:
                raise _too_many_requests(throttled) from None
            if function_error:
                response_headers["x-amz-function-error"] = function_error
            response_headers["Content-Length"] = str(len(payload))
            return payload

        LambdaSimpleBackend.invoke = invoke  # type: ignore[method-assign]

        original_stop = Execution.stop

        def stop(self: Any, stop_date: Any, error: str | None, cause: str | None) -> None:
            original_stop(self, stop_date, error, cause)
            _fail_pending_callbacks(self)

        Execution.stop = stop  # type: ignore[method-assign]

        from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication

        original_start = Execution.start

        def start(self: Any) -> None:
            original_start(self)
            _report_status(self)

        Execution.start = start  # type: ignore[method-assign]
        original_terminated = BaseExecutionWorkerCommunication.terminated

        def terminated(self: Any) -> None:
            original_terminated(self)
            _report_status(self.execution)

        BaseExecutionWorkerCommunication.terminated = terminated  # type: ignore[method-assign]

        from moto.stepfunctions.parser.asl.eval.callback.callback import (
            CallbackConsumerTimeout,
            CallbackNotifyConsumerError,
            CallbackPoolManager,
        )

        original_notify = CallbackPoolManager.notify

        def notify(self: Any, callback_id: str, outcome: Any) -> bool:
            endpoint = self.get(callback_id)
            if endpoint is not None and endpoint.get_outcome() is not None:
                raise CallbackNotifyConsumerError(callback_consumer_error=CallbackConsumerTimeout())
            answered: bool = original_notify(self, callback_id, outcome)
            return answered

        CallbackPoolManager.notify = notify  # type: ignore[method-assign]
        _answer_closed_tokens_as_aws()

        from moto.stepfunctions.parser.asl.component.state import state as state_module

        original_state_data = state_module.StateData  # type: ignore[attr-defined]

        def state_data(**fields: Any) -> Any:
            if isinstance(fields.get("EnteredTime"), str):
                fields["EnteredTime"] = _aws_timestamp(fields["EnteredTime"])
            return original_state_data(**fields)

        state_module.StateData = state_data  # type: ignore[attr-defined,assignment]

        from moto.dynamodb.models import DynamoDBBackend

        for operation in _DYNAMODB_ITEM_OPERATIONS:
            setattr(DynamoDBBackend, operation, _serialized(getattr(DynamoDBBackend, operation)))

        from moto.dynamodbstreams.models import DynamoDBStreamsBackend

        original_get_records = DynamoDBStreamsBackend.get_records

        def get_records(self: Any, iterator_arn: str, limit: int) -> dict[str, Any]:
            answer: dict[str, Any] = original_get_records(self, iterator_arn, limit)
            self.shard_iterators.pop(iterator_arn, None)
            return answer

        DynamoDBStreamsBackend.get_records = get_records  # type: ignore[method-assign]
        _patched = True


def _aws_timestamp(iso: str) -> str:
    from datetime import UTC, datetime

    moment = datetime.fromisoformat(iso).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _too_many_requests(throttled: LambdaThrottled) -> Exception:
    """Lambda's answer to a throttled invoke: HTTP 429, TooManyRequestsException, its Reason."""
    from moto.awslambda.exceptions import LambdaClientError

    error = LambdaClientError("TooManyRequestsException", "Rate Exceeded.")
    error.code = 429
    error.description = json.dumps(
        {"__type": "TooManyRequestsException", "message": "Rate Exceeded.", "Reason": throttled.reason}
    )
    return error


TOKEN_CLOSED_MESSAGE: Final = "Task Timed Out: 'Provided task does not exist anymore'"


def _answer_closed_tokens_as_aws() -> None:
    """SendTaskSuccess/Failure/Heartbeat on a token nobody waits on: AWS's 400 answers, not moto's 500."""
    from moto.core.exceptions import AWSError
    from moto.stepfunctions.parser.api import ExecutionStatus, InvalidToken, SendTaskFailureOutput
    from moto.stepfunctions.parser.asl.eval.callback.callback import (
        CallbackConsumerTimeout,
        CallbackNotifyConsumerError,
        CallbackOutcomeFailure,
        CallbackOutcomeSuccess,
    )
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    def answer(backend: Any, token: str, reach: Callable[[Any], bool], running_only: bool = True) -> None:
        executions = backend._get_executions(ExecutionStatus.RUNNING if running_only else None)
        for execution in executions:
            try:
                if reach(execution.exec_worker.env.callback_pool_manager):
                    return
            except CallbackNotifyConsumerError as closed:
                if isinstance(closed.callback_consumer_error, CallbackConsumerTimeout):
                    raise AWSError(TOKEN_CLOSED_MESSAGE, "TaskTimedOut", 400) from None
                raise AWSError("Task Does Not Exist", "TaskDoesNotExist", 400) from None
        raise InvalidToken()  # type: ignore[no-untyped-call]

    def send_task_success(self: Any, task_token: str, outcome: str) -> None:
        success = CallbackOutcomeSuccess(callback_id=task_token, output=outcome)
        answer(self, task_token, lambda pool: bool(pool.notify(callback_id=task_token, outcome=success)))

    def send_task_failure(self: Any, task_token: str, error: Any = None, cause: Any = None) -> Any:
        failure = CallbackOutcomeFailure(callback_id=task_token, error=error, cause=cause)
        answer(self, task_token, lambda pool: bool(pool.notify(callback_id=task_token, outcome=failure)), False)
        return SendTaskFailureOutput()

    def send_task_heartbeat(self: Any, task_token: str) -> None:
        answer(self, task_token, lambda pool: bool(pool.heartbeat(callback_id=task_token)))

    StepFunctionsParserBackend.send_task_success = send_task_success  # type: ignore[method-assign,assignment]
    StepFunctionsParserBackend.send_task_failure = send_task_failure  # type: ignore[method-assign]
    StepFunctionsParserBackend.send_task_heartbeat = send_task_heartbeat  # type: ignore[method-assign,assignment]


def _fail_pending_callbacks(execution: Any) -> None:
    """Wake every callback the stopped execution waits on, so it ends ABORTED now, as in AWS."""
    from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackOutcomeSuccess

    worker = getattr(execution, "exec_worker", None)
    manager = getattr(getattr(worker, "env", None), "callback_pool_manager", None)
    pool = getattr(manager, "_pool", None)
    if manager is None or not pool:
        return
    for callback_id in list(pool):
        try:
            # A success wakes the wait into the stopped program, which then ends ABORTED (a failure
            # would run the state's Catch first and end FAILED).
            manager.notify(callback_id, CallbackOutcomeSuccess(callback_id=callback_id, output="{}"))
        except Exception:  # already answered or timed out: nothing waits on it
            log.debug("callback %s was no longer pending", callback_id)


@dataclass
class EmbeddedAws:
    """A moto server on a free loopback port, configured to execute state machines."""

    server: Any
    endpoint: str
    _clients: dict[str, Any] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        """One cached administrator client per service (building a boto3 client costs tens of milliseconds)."""
        if service not in self._clients:
            self._clients[service] = aws_client(
                service, endpoint=self.endpoint, region=REGION, credentials=DUMMY_CREDENTIALS
            )
        return self._clients[service]

    def use_credentials(self, credentials: dict[str, str]) -> None:
        """Sign this object's later calls with these credentials (the administrator, once IAM is enforced)."""
        self._clients = {}
        self.client = lambda service: self._clients.setdefault(  # type: ignore[method-assign]
            service, aws_client(service, endpoint=self.endpoint, region=REGION, credentials=credentials)
        )

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

    def reset(self) -> None:
        """Forget every resource (moto's state is process-wide), then configure again."""
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
        self.configure()

    def stop(self) -> None:
        self.server.stop()


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
    install_patches()
    aws.configure()
    return aws
