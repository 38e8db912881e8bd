"""Step Functions: moto's interpreter (moto.stepfunctions.parser) brought in line with AWS."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from typing import Any, Final

from local_stack.moto_patches._registry import Patch, Patcher, register

log = logging.getLogger(__name__)

TOKEN_CLOSED_MESSAGE: Final = "Task Timed Out: 'Provided task does not exist anymore'"
# The session name the interpreter's calls carry (AWS uses an opaque one of its own).
STATE_MACHINE_SESSION_NAME: Final = "StepFunctionsExecution"

_STATUS_LISTENERS: list[Callable[[Any], None]] = []


def on_execution_status(listener: Callable[[Any], None]) -> Callable[[], None]:
    """Call `listener(execution)` at each status change of any execution; returns the unsubscribe."""
    _STATUS_LISTENERS.append(listener)
    return lambda: _STATUS_LISTENERS.remove(listener) if listener in _STATUS_LISTENERS else None


def _report_status(execution: Any) -> None:
    for listener in list(_STATUS_LISTENERS):
        try:
            listener(execution)
        except Exception:
            log.exception("execution status listener")


# ------------------------------------------------------------------------------------------ stop


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


def _stop_ends_the_callback_wait(patcher: Patcher) -> None:
    from moto.stepfunctions.parser.backend.execution import Execution

    def build(original: Callable[..., None]) -> Callable[..., None]:
        def stop(self: Any, stop_date: Any, error: str | None, cause: str | None) -> None:
            original(self, stop_date, error, cause)
            _fail_pending_callbacks(self)

        return stop

    patcher.wrap(Execution, "stop", build)


def _stop_during_a_choice(patcher: Patcher) -> None:
    from moto.stepfunctions.parser.asl.component.state.choice.state_choice import StateChoice

    def build(original: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
        def eval_state(self: Any, env: Any) -> None:
            try:
                original(self, env)
            except IndexError:
                # A stopped program evaluates nothing: the rule left no answer for the Choice to pop. The
                # state then sees the program stopped and returns, and the execution ends ABORTED.
                if env.is_running():
                    raise

        return eval_state

    patcher.wrap(StateChoice, "_eval_state", build)


# ------------------------------------------------------------------------------- status changes


def _status_changes_reported(patcher: Patcher) -> None:
    from moto.stepfunctions.parser.api import ExecutionStatus, InvalidName
    from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication, Execution

    patcher.require(Execution, "_get_start_execution_worker")

    def start(self: Any) -> None:
        """moto's start, with RUNNING reported before the worker runs: reported after it, a quick
        execution could already have ended, and its start would be reported with its end status."""
        if self.exec_worker:
            raise InvalidName("the execution was started already")
        self.exec_worker = self._get_start_execution_worker()
        self.exec_status = ExecutionStatus.RUNNING
        _report_status(self)
        self.exec_worker.start()

    def build_terminated(original: Callable[[Any], None]) -> Callable[[Any], None]:
        def terminated(self: Any) -> None:
            original(self)
            _report_status(self.execution)

        return terminated

    patcher.replace(Execution, "start", start)
    patcher.wrap(BaseExecutionWorkerCommunication, "terminated", build_terminated)


# ------------------------------------------------------------------------------- answered tokens


def _answered_token_times_out(patcher: Patcher) -> None:
    """SendTaskSuccess/Failure/Heartbeat on a token nobody waits on: AWS's 400 answers, not moto's."""
    from moto.core.exceptions import AWSError
    from moto.stepfunctions.parser.api import ExecutionStatus, InvalidToken, SendTaskFailureOutput
    from moto.stepfunctions.parser.asl.eval.callback.callback import (
        CallbackConsumerTimeout,
        CallbackNotifyConsumerError,
        CallbackOutcomeFailure,
        CallbackOutcomeSuccess,
        CallbackPoolManager,
    )
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    patcher.require(CallbackPoolManager, "get", "heartbeat")
    patcher.require(StepFunctionsParserBackend, "_get_executions")

    def build_notify(original: Callable[..., bool]) -> Callable[..., bool]:
        def notify(self: Any, callback_id: str, outcome: Any) -> bool:
            endpoint = self.get(callback_id)
            if endpoint is not None and endpoint.get_outcome() is not None:
                raise CallbackNotifyConsumerError(callback_consumer_error=CallbackConsumerTimeout())
            return original(self, callback_id, outcome)

        return notify

    def answer(backend: Any, reach: Callable[[Any], bool], running_only: bool = True) -> None:
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
        answer(self, lambda pool: bool(pool.notify(callback_id=task_token, outcome=success)))

    def send_task_failure(self: Any, task_token: str, error: Any = None, cause: Any = None) -> Any:
        failure = CallbackOutcomeFailure(callback_id=task_token, error=error, cause=cause)
        answer(self, lambda pool: bool(pool.notify(callback_id=task_token, outcome=failure)), False)
        return SendTaskFailureOutput()

    def send_task_heartbeat(self: Any, task_token: str) -> None:
        answer(self, lambda pool: bool(pool.heartbeat(callback_id=task_token)))

    patcher.wrap(CallbackPoolManager, "notify", build_notify)
    patcher.replace(StepFunctionsParserBackend, "send_task_success", send_task_success)
    patcher.replace(StepFunctionsParserBackend, "send_task_failure", send_task_failure)
    patcher.replace(StepFunctionsParserBackend, "send_task_heartbeat", send_task_heartbeat)


# ---------------------------------------------------------------------------------- entered time


def aws_timestamp(iso: str) -> str:
    """`2026-07-28T10:30:00.123456+00:00` as Step Functions writes times: `2026-07-28T10:30:00.123Z`."""
    from datetime import UTC, datetime

    moment = datetime.fromisoformat(iso).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _entered_time_in_milliseconds(patcher: Patcher) -> None:
    from moto.stepfunctions.parser.asl.component.state import state as state_module

    def build(original: Callable[..., Any]) -> Callable[..., Any]:
        def state_data(**fields: Any) -> Any:
            if isinstance(fields.get("EnteredTime"), str):
                fields["EnteredTime"] = aws_timestamp(fields["EnteredTime"])
            return original(**fields)

        return state_data

    patcher.wrap(state_module, "StateData", build)


# ------------------------------------------------------------------- the interpreter's credentials

_sessions: dict[str, Any] = {}
_sessions_lock = threading.Lock()


def _state_machine_session(role_arn: str, region: str) -> Any:
    """A session of the role, assumed in moto's STS backend directly (no request to authorize)."""
    from moto.sts.models import sts_backends

    parts = role_arn.split(":")
    backend = sts_backends[parts[4]][parts[1]]
    with _sessions_lock:
        session = _sessions.get(role_arn)
        if session is None or not any(known is session for known in backend.assumed_roles):  # moto reset
            session = backend.assume_role(
                region_name=region,
                role_session_name=STATE_MACHINE_SESSION_NAME,
                role_arn=role_arn,
                policy="",
                duration=3600,
                external_id="",
            )
            _sessions[role_arn] = session
        return session


# Every interpreter module that imports boto_client_for by name (imported before the patch, so each
# holds the original and is given the replacement).
_BOTO_CLIENT_USERS: Final = (
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.lambda_eval_utils",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_aws_sdk",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_batch",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_dynamodb",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_ecs",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_events",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_glue",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sfn",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sns",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sqs",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_unsupported",
    "moto.stepfunctions.parser.asl.component.state.exec.state_map.item_reader.eval.resource_eval_s3",
    "moto.stepfunctions.parser.asl.component.state.exec.state_map.result_writer.resource_eval.resource_eval_s3",
)


def _interpreter_uses_the_role(patcher: Patcher) -> None:
    import importlib

    import boto3
    from botocore.config import Config
    from moto.core.models import botocore_stubber
    from moto.settings import moto_server_port
    from moto.stepfunctions.parser.asl.component.common.timeouts.timeout import TimeoutSeconds
    from moto.stepfunctions.parser.asl.utils import boto_client

    original = patcher.original(boto_client, "boto_client_for")

    def boto_client_for(region: str, service: str, state_credentials: Any = None) -> Any:
        # StateCredentials.role_arn: the execution's role (env.aws_execution_details.role_arn,
        # copied from the state machine at StartExecution) or the Task's Credentials.RoleArn.
        role_arn = getattr(state_credentials, "role_arn", None)
        if not isinstance(role_arn, str) or not role_arn.startswith("arn:"):
            return original(region, service, state_credentials)
        session = _state_machine_session(role_arn, region)
        endpoint = {} if botocore_stubber.enabled else {"endpoint_url": f"http://localhost:{moto_server_port()}"}
        return boto3.client(
            service_name=service,
            region_name=region,
            aws_access_key_id=session.access_key_id,
            aws_secret_access_key=session.secret_access_key,
            aws_session_token=session.session_token,
            config=Config(
                parameter_validation=False,
                retries={"max_attempts": 0, "total_max_attempts": 1},
                connect_timeout=TimeoutSeconds.DEFAULT_TIMEOUT_SECONDS,
                read_timeout=TimeoutSeconds.DEFAULT_TIMEOUT_SECONDS,
            ),
            **endpoint,
        )

    patcher.replace(boto_client, "boto_client_for", boto_client_for)
    for name in _BOTO_CLIENT_USERS:
        module = importlib.import_module(name)
        if getattr(module, "boto_client_for", None) is original:
            patcher.replace(module, "boto_client_for", boto_client_for)
    for name, module in list(sys.modules.items()):  # any other module that imported it by name
        if name.startswith("moto.stepfunctions.") and getattr(module, "boto_client_for", None) is original:
            patcher.replace(module, "boto_client_for", boto_client_for)


# ------------------------------------------------------------------------------------------ parse

# The definitions a process has parsed (a template's state machine, by its text): the suite's
# executions run a handful of definitions thousands of times.
_PARSED_DEFINITIONS: Final = 64


def _definitions_parsed_once(patcher: Patcher) -> None:
    from antlr4 import CommonTokenStream, InputStream  # type: ignore[import-untyped]
    from moto.stepfunctions.parser.asl.antlr.runtime.ASLLexer import ASLLexer
    from moto.stepfunctions.parser.asl.antlr.runtime.ASLParser import ASLParser
    from moto.stepfunctions.parser.asl.parse.asl_parser import (
        AmazonStateLanguageParser,
        ASLParserException,
        SyntaxErrorListener,
    )
    from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    patcher.require(AmazonStateLanguageParser, "parse")
    trees: dict[str, Any] = {}

    def parse(definition: str) -> tuple[Any, Any]:
        """moto's parse, with the syntax tree of a definition seen before reused: the tree is only read
        (the Preprocessor builds new evaluation components from it for each execution)."""
        tree = trees.get(definition)
        if tree is None:
            errors = SyntaxErrorListener()  # type: ignore[no-untyped-call]
            parser = ASLParser(CommonTokenStream(ASLLexer(InputStream(definition))))
            parser.removeErrorListeners()
            parser.addErrorListener(errors)
            tree = parser.state_machine()  # type: ignore[no-untyped-call]
            if errors.errors:
                raise ASLParserException(errors=errors.errors)
            if len(trees) >= _PARSED_DEFINITIONS:
                trees.pop(next(iter(trees)), None)
            trees[definition] = tree
        return Preprocessor().visit(tree), tree

    patcher.replace(AmazonStateLanguageParser, "parse", staticmethod(parse))

    validate = patcher.original(StepFunctionsParserBackend, "_validate_definition")
    validated: set[str] = set()

    def _validate_definition(definition: str) -> None:
        """A definition that validated before is valid: building its components again proves nothing."""
        if definition not in validated:
            validate(definition=definition)
            if len(validated) >= _PARSED_DEFINITIONS:
                validated.clear()
            validated.add(definition)

    patcher.replace(StepFunctionsParserBackend, "_validate_definition", staticmethod(_validate_definition))


register(
    Patch(
        name="stop_execution_ends_a_callback_wait",
        group="emulation",
        aws="StopExecution of an execution waiting in a .waitForTaskToken Task ends it ABORTED at once.",
        moto="The stop is recorded but the interpreter keeps waiting on the callback: the execution "
        "stays RUNNING until a SendTask* call or the Task's timeout wakes it.",
        reference="https://docs.aws.amazon.com/step-functions/latest/apireference/API_StopExecution.html",
        install=_stop_ends_the_callback_wait,
    )
)
register(
    Patch(
        name="stop_during_a_choice_ends_aborted",
        group="emulation",
        aws="StopExecution ends the execution ABORTED whatever state it is in.",
        moto="A stop that lands while a Choice state evaluates its rules leaves the rule unevaluated and the "
        "Choice pops an empty stack: the interpreter ends with IndexError and the execution FAILED.",
        reference="https://docs.aws.amazon.com/step-functions/latest/apireference/API_StopExecution.html",
        install=_stop_during_a_choice,
    )
)
register(
    Patch(
        name="execution_status_changes_are_reported",
        group="emulation",
        aws="Each status change of a Standard execution (RUNNING, SUCCEEDED, FAILED, TIMED_OUT, ABORTED) "
        "is put on the default event bus as a 'Step Functions Execution Status Change' event.",
        moto="No event and no hook: nothing outside the interpreter learns that an execution started or "
        "ended (here the listeners of `on_execution_status` are called; local_stack.event_delivery "
        "turns them into the events).",
        reference="https://docs.aws.amazon.com/step-functions/latest/dg/cw-events.html",
        install=_status_changes_reported,
    )
)
register(
    Patch(
        name="answered_task_token_times_out",
        group="emulation",
        aws="SendTaskSuccess or SendTaskFailure with a token that was answered already: HTTP 400 "
        f"TaskTimedOut, {TOKEN_CLOSED_MESSAGE!r} (SendTaskHeartbeat on a token moto refuses: the same 400s).",
        moto="While the execution runs, the answered token is accepted again (HTTP 200); when moto does "
        "refuse a token, its TaskTimedOut is raised without the message it needs and comes out HTTP 500.",
        reference="https://docs.aws.amazon.com/step-functions/latest/apireference/API_SendTaskSuccess.html",
        install=_answered_token_times_out,
    )
)
register(
    Patch(
        name="entered_time_in_milliseconds",
        group="emulation",
        aws="$$.State.EnteredTime is ISO 8601 in UTC with milliseconds and Z (2026-07-28T10:30:00.123Z).",
        moto="Python's isoformat(): microseconds and +00:00 (2026-07-28T10:30:00.123456+00:00).",
        reference="https://docs.aws.amazon.com/step-functions/latest/dg/input-output-contextobject.html",
        install=_entered_time_in_milliseconds,
    )
)
register(
    Patch(
        name="interpreter_calls_with_the_state_machine_role",
        group="iam",
        aws="A Task calls Lambda, DynamoDB and the other integrations with a session of the state "
        "machine's execution role (or the Task's Credentials.RoleArn), so IAM decides on that role.",
        moto="The interpreter signs every call with the fake keys 'ak'/'sk', which moto never issued: "
        "under enforcement each call is refused as an unknown key (UnrecognizedClientException).",
        reference="https://docs.aws.amazon.com/step-functions/latest/dg/procedure-create-iam-role.html",
        install=_interpreter_uses_the_role,
    )
)
register(
    Patch(
        name="definitions_are_parsed_once",
        group="emulation",
        aws="CreateStateMachine validates the definition; an execution runs the state machine's definition "
        "as created, with no per-execution cost of reading it again.",
        moto="Lexes and parses the definition's text with the pure-Python ANTLR runtime and builds its "
        "evaluation components at CreateStateMachine (to validate it, then drops them) and again at every "
        "execution start: about 0.05 s of CPU each for the template's workflow.",
        reference="https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html",
        install=_definitions_parsed_once,
    )
)
