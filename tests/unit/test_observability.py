"""Observability: the exact metrics the runtime reports, and what the Powertools implementation writes.

A `RecordingTelemetry` stands in for Powertools where the question is "what was reported"; the
Powertools implementation is tested for what it prints: CloudWatch EMF JSON and JSON log lines.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pytest
from pydantic import BaseModel
from testkit import api_event, rpc

from app import handlers
from app.telemetry import RUNTIME_LOGGERS, PowertoolsTelemetry, tracing_enabled
from mcp_runtime import tool, wire
from mcp_runtime.context import Principal, RequestContext, RequestMeta
from mcp_runtime.errors import InternalError, InvalidParams
from mcp_runtime.observability import (
    COMPONENTS_LEFT_OUT,
    METRIC_DIMENSIONS,
    MRTR_ROUNDS,
    NO_TELEMETRY,
    REJECTED_REQUESTS,
    SWEEP_BEHIND,
    TASK_WRITES_REFUSED,
    TASKS_CANCELLED,
    TASKS_COMPLETED,
    TASKS_CREATED,
    TASKS_FAILED,
    TASKS_REPAIRED,
    TASKS_STALE,
    TIME_TO_TERMINAL,
    TOOL_EXCEPTIONS,
)
from mcp_runtime.server import McpServer
from mcp_runtime.tasks.errors import TaskConflict, TaskNotFound, TaskStoreUnavailable
from mcp_runtime.tasks.models import CANCELLED, COMPLETED, FAILED, TaskRecord, iso_timestamp
from mcp_runtime.tasks.service import TaskService
from mcp_runtime.tasks.store import AnswerOutcome, AwaitOutcome, CancelOutcome, DynamoTaskStore
from mcp_runtime.tasks.worker import TaskWorker
from mcp_runtime.tools import Registry, ToolContext
from mcp_runtime.transport import McpHttpTransport
from tests.support import REPO
from tests.telemetry_support import RecordingTelemetry, Sample
from tests.unit.conftest import ALICE, BOB, Client, FakeClock, make_server, result_of

ELICITATION: dict[str, Any] = {"elicitation": {}}


class NoArgs(BaseModel):
    pass


@tool(description="Fails with an exception that is not a protocol error.")
def explode(args: NoArgs, ctx: ToolContext) -> str:
    raise RuntimeError("boom")


@tool(description="Long work, run as a task.", task=True)
def slow_job(args: NoArgs, ctx: ToolContext) -> str:
    return "done"


@pytest.fixture
def recorder() -> RecordingTelemetry:
    return RecordingTelemetry()


@pytest.fixture
def recorded_client(recorder: RecordingTelemetry) -> Client:
    server = make_server()
    server.tools.include(sys.modules[__name__])
    server.telemetry = recorder
    return Client(McpHttpTransport(server))


# ---- rejected requests, one per code ----------------------------------------------------------------
def _unknown_method(client: Client) -> Any:
    return client.request("nope/nothing")


REJECTIONS: dict[str, Callable[[Client], Any]] = {
    "401": lambda c: c.request("tools/list", principal=None),
    "405": lambda c: c.post(rpc("tools/list"), method="GET"),
    "413": lambda c: c.post(b"[" + b" " * 5_000_000 + b"]"),
    str(wire.PARSE_ERROR): lambda c: c.post(b"{not json"),
    str(wire.INVALID_REQUEST): lambda c: c.post([rpc("tools/list")]),
    str(wire.METHOD_NOT_FOUND): _unknown_method,
    str(wire.INVALID_PARAMS): lambda c: c.call_tool("no_such_tool", {}),
    str(wire.HEADER_MISMATCH): lambda c: c.request("tools/list", headers={"mcp-method": "tools/call"}),
    str(wire.MISSING_REQUIRED_CLIENT_CAPABILITY): lambda c: c.call_tool("test_missing_capability", {}),
    str(wire.UNSUPPORTED_PROTOCOL_VERSION): lambda c: c.post(
        {
            **rpc("tools/list"),
            "params": {"_meta": {**_meta(), "io.modelcontextprotocol/protocolVersion": "1999-01-01"}},
        },
        headers={"mcp-protocol-version": "1999-01-01"},
    ),
    str(wire.INTERNAL_ERROR): lambda c: c.call_tool("explode", {}),
}


def _meta() -> dict[str, Any]:
    meta: dict[str, Any] = rpc("tools/list")["params"]["_meta"]
    return meta


@pytest.mark.parametrize("code", sorted(REJECTIONS))
def test_a_rejected_request_is_counted_once_by_its_code(
    code: str, recorded_client: Client, recorder: RecordingTelemetry
) -> None:
    response = REJECTIONS[code](recorded_client)
    body = response.json()
    wire_code = body["error"]["code"]
    assert str(wire_code) == code or (code.isdigit() and response.status == int(code))
    assert recorder.counts() == [(REJECTED_REQUESTS, 1.0, {"code": code})]


def test_answered_requests_and_tool_errors_are_not_rejections(
    recorded_client: Client, recorder: RecordingTelemetry
) -> None:
    result_of(recorded_client.request("server/discover"))
    result_of(recorded_client.request("tools/list"))
    assert result_of(recorded_client.call_tool("test_error_handling", {}))["isError"] is True
    assert recorder.samples == []


# ---- MRTR rounds ------------------------------------------------------------------------------------
def test_each_mrtr_round_is_counted_by_tool_and_the_final_answer_is_not(
    recorded_client: Client, recorder: RecordingTelemetry
) -> None:
    arguments = {"project": "apollo"}
    first = result_of(recorded_client.call_tool("archive_project", arguments, capabilities=ELICITATION))
    assert first["resultType"] == "input_required"
    assert recorder.counts() == [(MRTR_ROUNDS, 1.0, {"tool": "archive_project"})]

    confirm = {"confirm": {"action": "accept", "content": {"confirm": True}}}
    second = result_of(
        recorded_client.call_tool(
            "archive_project",
            arguments,
            capabilities=ELICITATION,
            inputResponses=confirm,
            requestState=first["requestState"],
        )
    )
    assert second["resultType"] == "input_required"  # now the reason
    reason = {"reason": {"action": "accept", "content": {"reason": "done"}}}
    final = result_of(
        recorded_client.call_tool(
            "archive_project",
            arguments,
            capabilities=ELICITATION,
            inputResponses=reason,
            requestState=second["requestState"],
        )
    )
    assert final["resultType"] == "complete"
    assert recorder.counts() == [(MRTR_ROUNDS, 1.0, {"tool": "archive_project"})] * 2


def test_an_mrtr_round_of_a_prompt_is_counted_by_prompt(recorded_client: Client, recorder: RecordingTelemetry) -> None:
    response = recorded_client.request(
        "prompts/get", {"name": "test_input_required_result_prompt", "arguments": {}}, capabilities=ELICITATION
    )
    assert result_of(response)["resultType"] == "input_required"
    assert recorder.counts() == [(MRTR_ROUNDS, 1.0, {"prompt": "test_input_required_result_prompt"})]


# ---- tasks through the service ------------------------------------------------------------------------
class MemoryTaskStore:
    """Just enough of a `TaskStore` for the service's create, get and cancel; stamps with `clock`."""

    def __init__(self, clock: Callable[[], float], *, fail_create: bool = False) -> None:
        self.clock = clock
        self.fail_create = fail_create
        self.items: dict[str, TaskRecord] = {}
        self.discarded: list[tuple[str, str]] = []

    def create(self, record: TaskRecord) -> None:
        if self.fail_create:
            raise TaskStoreUnavailable("throttled")
        if record.task_id in self.items:
            raise TaskConflict(record.task_id)
        self.items[record.task_id] = record

    def discard(self, task_id: str, create_token: str) -> None:
        self.discarded.append((task_id, create_token))

    def get(self, task_id: str, owner: str | None = None) -> TaskRecord:
        record = self.items.get(task_id)
        if record is None or (owner is not None and record.owner != owner):
            raise TaskNotFound("Task not found")
        return record

    def cancel(self, task_id: str, owner: str) -> CancelOutcome:
        record = self.get(task_id, owner)
        if record.is_terminal:
            return CancelOutcome(False)
        settled = replace(
            record, status=CANCELLED, last_updated_at=iso_timestamp(self.clock()), version=record.version + 1
        )
        self.items[task_id] = settled
        return CancelOutcome(True, settled)

    def finish(
        self, task_id: str, status: str, payload: dict[str, Any], expected_version: int | None = None
    ) -> TaskRecord:
        record = self.get(task_id)
        if record.is_terminal:
            raise TaskConflict(task_id)
        settled = replace(
            record,
            status=status,
            last_updated_at=iso_timestamp(self.clock()),
            result=payload if status == COMPLETED else None,
            error=payload if status == FAILED else None,
        )
        self.items[task_id] = settled
        return settled

    def answer(self, task_id: str, owner: str, responses: Mapping[str, Any]) -> AnswerOutcome:
        raise NotImplementedError

    def set_status_message(
        self, task_id: str, message: str, progress: float | None = None, total: float | None = None
    ) -> None:
        raise NotImplementedError

    def await_input(
        self,
        task_id: str,
        expected_version: int,
        input_requests: Mapping[str, dict[str, Any]],
        issued_keys: tuple[tuple[str, str], ...],
        scratch: Mapping[str, Any],
        task_token: str,
        parked_until: float | None = None,
    ) -> AwaitOutcome:
        raise NotImplementedError

    def replace_token(self, task_id: str, old_token: str | None, new_token: str) -> bool:
        raise NotImplementedError

    def settle_lost(self, task_id: str, execution_name: str, error: dict[str, Any]) -> TaskRecord:
        raise NotImplementedError


class FakeExecutor:
    """The worker's executor: it only ever answers its own task tokens."""

    def start(self, task_id: str, execution_name: str) -> None:
        raise NotImplementedError

    def stop(self, execution_name: str) -> None:
        raise NotImplementedError

    def resume(self, task_token: str, output: dict[str, Any] | None = None) -> bool:
        return True


def _ctx(principal: Principal = ALICE) -> RequestContext:
    meta = RequestMeta(wire.PROTOCOL_VERSION, {"extensions": {wire.TASKS_EXTENSION: {}}})
    return RequestContext(request_id=7, method="tools/call", meta=meta, principal=principal, headers={})


def _service(clock: FakeClock, recorder: RecordingTelemetry, store: MemoryTaskStore | None = None) -> TaskService:
    return TaskService(
        store or MemoryTaskStore(clock),
        ttl_ms=3_600_000,
        poll_interval_ms=None,
        clock=clock,
        id_factory=lambda: "task-0000000000000001",
        telemetry=recorder,
    )


def _slow_job_spec() -> Any:
    registry = Registry()
    registry.include(sys.modules[__name__])
    spec = registry.get("slow_job")
    assert spec is not None
    return spec


def test_a_task_created_then_cancelled_counts_both_by_tool_and_the_time_to_terminal(
    recorder: RecordingTelemetry,
) -> None:
    clock = FakeClock()
    service = _service(clock, recorder)
    created = service.create(_slow_job_spec(), {}, _ctx(), None)
    assert created["taskId"] == "task-0000000000000001"
    assert recorder.samples == [Sample(TASKS_CREATED, "Count", 1.0, {"tool": "slow_job"})]
    assert recorder.keys == {"task_id": "task-0000000000000001"}

    clock.advance(2.5)
    service.cancel("task-0000000000000001", _ctx())
    assert recorder.samples[1:] == [
        Sample(TASKS_CANCELLED, "Count", 1.0, {"tool": "slow_job"}),
        Sample(TIME_TO_TERMINAL, "Milliseconds", 2500.0, {"tool": "slow_job", "status": "cancelled"}),
    ]

    # A second cancel (already terminal) and another principal's cancel change nothing and report nothing.
    service.cancel("task-0000000000000001", _ctx())
    with pytest.raises(InvalidParams):
        service.cancel("task-0000000000000001", _ctx(BOB))
    assert len(recorder.samples) == 3


def test_a_task_whose_create_could_not_be_written_is_not_counted_and_is_taken_back(
    recorder: RecordingTelemetry,
) -> None:
    clock = FakeClock()
    store = MemoryTaskStore(clock, fail_create=True)
    service = _service(clock, recorder, store)
    with pytest.raises(InternalError, match=r"^Failed to create task$"):
        service.create(_slow_job_spec(), {}, _ctx(), None)
    assert recorder.samples == []
    ((task_id, token),) = store.discarded
    assert task_id == "task-0000000000000001" and len(token) == 32


def test_tasks_get_correlates_the_task_id(recorder: RecordingTelemetry) -> None:
    clock = FakeClock()
    service = _service(clock, recorder)
    service.create(_slow_job_spec(), {}, _ctx(), None)
    recorder.keys.clear()
    service.get("task-0000000000000001", _ctx())
    assert recorder.keys == {"task_id": "task-0000000000000001"}


class StubDynamo:
    def put_item(self, **request: Any) -> dict[str, Any]:
        return {}

    def query(self, **request: Any) -> dict[str, Any]:
        return {"Items": []}


def test_store_and_executor_calls_run_inside_named_spans(recorder: RecordingTelemetry) -> None:
    from mcp_runtime.handles import DynamoHandleStore
    from mcp_runtime.tasks.executor import StepFunctionsExecutor
    from mcp_runtime.tasks.history import DynamoTaskHistory

    clock = FakeClock()
    service = _service(clock, recorder)
    service.create(_slow_job_spec(), {}, _ctx(), None)
    record = service.store.get("task-0000000000000001")
    store = DynamoTaskStore("tasks", StubDynamo(), telemetry=recorder)
    store.create(replace(record, task_id="task-0000000000000002"))

    class StubSfn:
        def start_execution(self, **request: Any) -> dict[str, Any]:
            return {}

    StepFunctionsExecutor("arn:aws:states:us-east-1:1:stateMachine:t", StubSfn(), telemetry=recorder).start("t", "t")
    DynamoHandleStore("tasks", StubDynamo(), telemetry=recorder).mint("owner", "cart", {}, 60)
    DynamoTaskHistory("tasks", StubDynamo(), telemetry=recorder).page("owner")
    assert recorder.spans == ["TaskStore.create", "TaskExecutor.start", "HandleStore.mint", "TaskHistory.page"]


def test_the_default_telemetry_records_nothing() -> None:
    server = make_server()
    assert server.telemetry is NO_TELEMETRY
    with NO_TELEMETRY.span("anything"):
        NO_TELEMETRY.count(TASKS_CREATED, tool="x")
        NO_TELEMETRY.timing(TIME_TO_TERMINAL, 1.0)
        NO_TELEMETRY.correlate(task_id="t")


# ---- the Powertools implementation --------------------------------------------------------------------
def _emf_documents(out: str) -> list[dict[str, Any]]:
    """Each stdout line that is an EMF document, checked against the EMF specification's rules."""
    documents = []
    for line in out.splitlines():
        try:
            document = json.loads(line)
        except ValueError:
            continue
        if not isinstance(document, dict) or "_aws" not in document:
            continue
        aws = document["_aws"]
        assert isinstance(aws["Timestamp"], int)
        for directive in aws["CloudWatchMetrics"]:
            assert isinstance(directive["Namespace"], str) and directive["Namespace"]
            for dimension_set in directive["Dimensions"]:
                for dimension in dimension_set:
                    assert isinstance(document[dimension], str)  # every dimension is a root string member
            for metric in directive["Metrics"]:
                assert metric["Unit"] in ("Count", "Milliseconds")
                value = document[metric["Name"]]  # every metric is a root member: a number or a list of them
                assert all(isinstance(v, float) for v in (value if isinstance(value, list) else [value]))
        documents.append(document)
    return documents


def _summary(document: dict[str, Any]) -> tuple[str, list[list[str]], dict[str, Any], dict[str, str]]:
    directive = document["_aws"]["CloudWatchMetrics"][0]
    metrics = {m["Name"]: (m["Unit"], document[m["Name"]]) for m in directive["Metrics"]}
    dimensions = {name: document[name] for names in directive["Dimensions"] for name in names}
    return directive["Namespace"], directive["Dimensions"], metrics, dimensions


def test_powertools_telemetry_writes_one_emf_document_per_dimension_set(capsys: pytest.CaptureFixture[str]) -> None:
    telemetry = PowertoolsTelemetry("obs-emf", "TestNamespace", tracing=False)
    telemetry.count(TASKS_CREATED, tool="deploy_release")
    telemetry.count(TASKS_CREATED, tool="deploy_release")
    telemetry.count(TASKS_CREATED, tool="other")
    telemetry.timing(TIME_TO_TERMINAL, 1234.5, tool="deploy_release", status="completed")
    telemetry.timing(TIME_TO_TERMINAL, 10.0, tool="deploy_release", status="completed")
    telemetry.count(REJECTED_REQUESTS, code="-32602")
    assert capsys.readouterr().out == ""  # buffered until the flush
    telemetry.flush()
    documents = [_summary(d) for d in _emf_documents(capsys.readouterr().out)]
    assert sorted(documents, key=repr) == sorted(
        [
            ("TestNamespace", [["tool"]], {TASKS_CREATED: ("Count", [2.0])}, {"tool": "deploy_release"}),
            ("TestNamespace", [["tool"]], {TASKS_CREATED: ("Count", [1.0])}, {"tool": "other"}),
            (
                "TestNamespace",
                [["status", "tool"]],
                {TIME_TO_TERMINAL: ("Milliseconds", [1234.5, 10.0])},
                {"status": "completed", "tool": "deploy_release"},
            ),
            ("TestNamespace", [["code"]], {REJECTED_REQUESTS: ("Count", [1.0])}, {"code": "-32602"}),
        ],
        key=repr,
    )
    telemetry.flush()
    assert capsys.readouterr().out == ""  # flushed once: nothing left, nothing printed


def test_the_namespace_comes_from_powertools_metrics_namespace(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "FromTheEnvironment")
    telemetry = PowertoolsTelemetry("obs-ns", tracing=False)
    telemetry.count(MRTR_ROUNDS, tool="archive_project")
    telemetry.flush()
    [document] = _emf_documents(capsys.readouterr().out)
    assert _summary(document) == (
        "FromTheEnvironment",
        [["tool"]],
        {MRTR_ROUNDS: ("Count", [1.0])},
        {"tool": "archive_project"},
    )


def test_metrics_disabled_by_powertools_settings_print_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    telemetry = PowertoolsTelemetry("obs-off", "Off", tracing=False)
    telemetry.count(TASKS_CREATED, tool="x")
    telemetry.flush()
    assert capsys.readouterr().out == ""


@contextmanager
def _runtime_loggers_restored() -> Iterator[None]:
    saved = {
        name: (list(logging.getLogger(name).handlers), logging.getLogger(name).propagate, logging.getLogger(name).level)
        for name in (*RUNTIME_LOGGERS, "tools", "fixtures")
    }
    try:
        yield
    finally:
        for name, (handlers, propagate, level) in saved.items():
            target = logging.getLogger(name)
            target.handlers = handlers
            target.propagate = propagate
            target.setLevel(level)


def test_the_api_adapter_flushes_the_invocations_metrics_as_emf(
    configure_app: Callable[..., None], capsys: pytest.CaptureFixture[str]
) -> None:
    with _runtime_loggers_restored():
        configure_app(DEV_AUTH="1", POWERTOOLS_METRICS_NAMESPACE="AdapterTest")
        proxy = handlers.api_handler(api_event(rpc("tools/list")))  # no dev bearer: 401
        assert proxy["statusCode"] == 401
        [document] = _emf_documents(capsys.readouterr().out)
        assert _summary(document) == ("AdapterTest", [["code"]], {REJECTED_REQUESTS: ("Count", [1.0])}, {"code": "401"})

        served = handlers.api_handler(api_event(rpc("tools/list"), headers={"authorization": "Bearer dev:a"}))
        assert served["statusCode"] == 200
        assert _emf_documents(capsys.readouterr().out) == []  # nothing recorded, nothing written


def _log_lines(out: str) -> list[dict[str, Any]]:
    lines = []
    for line in out.splitlines():
        try:
            document = json.loads(line)
        except ValueError:
            continue
        if isinstance(document, dict) and "level" in document and "message" in document:
            lines.append(document)
    return lines


def test_runtime_log_records_become_json_with_the_invocations_correlation_keys(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with _runtime_loggers_restored():
        telemetry = PowertoolsTelemetry("obs-logs", "Logs", tracing=False)
        telemetry.install_log_handler()
        runtime_log = logging.getLogger("mcp_runtime.tasks.service")

        class Context:
            aws_request_id = "lambda-request-1"

        with telemetry.invocation(Context()):
            telemetry.correlate_request("rpc-42", "tasks/get")
            telemetry.correlate(task_id="task-abc")
            runtime_log.warning("task %s: looked at", "task-abc")
        with telemetry.invocation():
            runtime_log.warning("next invocation")
        first, second = _log_lines(capsys.readouterr().out)
        assert first["level"] == "WARNING"
        assert first["message"] == "task task-abc: looked at"
        assert first["service"] == "obs-logs"
        assert first["name"] == "mcp_runtime.tasks.service"
        assert (first["correlation_id"], first["method"], first["task_id"]) == ("rpc-42", "tasks/get", "task-abc")
        assert first["function_request_id"] == "lambda-request-1"
        # Keys belong to one invocation: the next one starts without them.
        assert not {"correlation_id", "method", "task_id", "function_request_id"} & set(second)


def test_the_worker_adapter_logs_with_task_id_and_execution_name(capsys: pytest.CaptureFixture[str]) -> None:

    with _runtime_loggers_restored():
        telemetry = PowertoolsTelemetry("obs-worker", "Worker", tracing=False)
        telemetry.install_log_handler()
        service = _service(FakeClock(), RecordingTelemetry())
        task_id = service.create(_slow_job_spec(), {}, _ctx(), None)["taskId"]
        worker = TaskWorker(service.store, FakeExecutor(), Registry(), telemetry=telemetry)
        with telemetry.invocation():
            failure = {"Error": "States.Timeout", "Cause": ""}
            outcome = worker.handle({"action": "fail", "taskId": task_id, "failure": failure})  # logs an error
        assert outcome["outcome"] == "failed"
        out = capsys.readouterr().out
        [line] = [d for d in _log_lines(out) if d["level"] == "ERROR"]
        assert (line["task_id"], line["execution_name"]) == (task_id, task_id)
        # The same invocation's metrics: the failure and its time to terminal, by tool.
        assert sorted((_summary(d)[2] for d in _emf_documents(out)), key=repr) == sorted(
            [{TASKS_FAILED: ("Count", [1.0])}, {TIME_TO_TERMINAL: ("Milliseconds", [0.0])}], key=repr
        )


class FakeSubsegment:
    def __init__(self) -> None:
        self.annotations: dict[str, Any] = {}

    def put_annotation(self, key: str, value: Any) -> None:
        self.annotations[key] = value


class FakeProvider:
    def __init__(self) -> None:
        self.opened: list[tuple[str, FakeSubsegment]] = []

    @contextmanager
    def in_subsegment(self, name: str) -> Iterator[FakeSubsegment]:
        subsegment = FakeSubsegment()
        self.opened.append((name, subsegment))
        yield subsegment


class FakeTracer:
    def __init__(self) -> None:
        self.provider = FakeProvider()


def test_spans_open_subsegments_annotated_with_the_task_id_and_the_tracer_is_built_once() -> None:
    built: list[FakeTracer] = []

    def factory(service: str) -> FakeTracer:
        built.append(FakeTracer())
        return built[-1]

    telemetry = PowertoolsTelemetry("obs-trace", "Trace", tracing=True, tracer_factory=factory)
    assert built == []  # nothing until the first span
    telemetry.correlate(task_id="task-1", execution_name="task-1")
    with telemetry.span("TaskStore.get"):
        pass
    with telemetry.span("TaskExecutor.start"):
        pass
    [tracer] = built
    assert [(name, sub.annotations) for name, sub in tracer.provider.opened] == [
        ("## TaskStore.get", {"task_id": "task-1", "execution_name": "task-1"}),
        ("## TaskExecutor.start", {"task_id": "task-1", "execution_name": "task-1"}),
    ]


def test_without_tracing_no_tracer_is_ever_built() -> None:
    def factory(service: str) -> Any:
        raise AssertionError("the tracer must not be built")

    telemetry = PowertoolsTelemetry("obs-notrace", "Trace", tracing=False, tracer_factory=factory)
    with telemetry.span("TaskStore.get"):
        pass


@pytest.mark.parametrize(
    ("environ", "enabled"),
    [
        ({}, False),  # not in Lambda: no X-Ray daemon to send to
        ({"LAMBDA_TASK_ROOT": "/var/task"}, True),
        ({"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "1"}, False),
        ({"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "true"}, False),
        ({"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "false"}, True),
        ({"LAMBDA_TASK_ROOT": "/var/task", "AWS_SAM_LOCAL": "true"}, False),
    ],
)
def test_tracing_follows_powertools_rules(environ: dict[str, str], enabled: bool) -> None:
    assert tracing_enabled(environ) is enabled


def test_a_cold_server_discover_imports_neither_powertools_nor_the_xray_sdk() -> None:
    """The cold-start budget: answering server/discover in a fresh interpreter, in Lambda with tracing
    on, pays for no Powertools import (nothing logged, no metric, no span)."""
    script = (
        "import json, sys\n"
        "from app.handlers import api_handler as lambda_handler\n"
        f"event = json.loads({json.dumps(json.dumps(api_event(rpc('server/discover'))))})\n"
        "response = lambda_handler(event, None)\n"
        "assert response['statusCode'] == 200, response\n"
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & {'aws_lambda_powertools', 'aws_xray_sdk', 'boto3'})\n"
        "print(json.dumps(loaded))\n"
    )
    environ = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": f"{REPO / 'functions'}{os.pathsep}{REPO}",
        "LAMBDA_TASK_ROOT": "/var/task",  # tracing on, as in Lambda
        "AWS_REGION": "us-east-1",
        "TASK_TABLE_NAME": "tasks",
        "TASK_STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:tasks",
        "MCP_STATE_KEY": "test-only-requestState-key-0123456789abcdef",
    }
    done = subprocess.run([sys.executable, "-c", script], env=environ, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_the_mcp_server_takes_its_telemetry_by_injection() -> None:
    recorder = RecordingTelemetry()
    server = McpServer(make_server().settings, make_server().sealer, telemetry=recorder)
    assert server.telemetry is recorder


def test_every_sample_the_runtime_reports_has_a_declared_metric_and_dimension_set(
    recorded_client: Client, recorder: RecordingTelemetry
) -> None:
    for produce in REJECTIONS.values():
        produce(recorded_client)
    recorded_client.call_tool("archive_project", {"project": "x"}, capabilities=ELICITATION)
    recorded_client.request(
        "prompts/get", {"name": "test_input_required_result_prompt", "arguments": {}}, capabilities=ELICITATION
    )
    clock = FakeClock()
    service = _service(clock, recorder)
    service.create(_slow_job_spec(), {}, _ctx(), None)
    service.cancel("task-0000000000000001", _ctx())
    failing = _service(clock, recorder)
    failed = failing.create(_slow_job_spec(), {}, _ctx(), None)["taskId"]
    worker = TaskWorker(failing.store, FakeExecutor(), Registry(), telemetry=recorder)
    worker.fail(failed, {"Error": "States.Timeout"})

    reported = {(s.metric, tuple(sorted(s.dimensions))) for s in recorder.samples}
    declared = {(metric, dims) for metric, sets in METRIC_DIMENSIONS.items() for dims in sets}
    assert reported <= declared
    # The sweeper's repairs, stale tasks and refused writes are reported in its own tests
    # (tests/integration/test_task_sweeper.py).
    assert {metric for metric, _ in reported} == set(METRIC_DIMENSIONS) - {
        TASKS_COMPLETED,
        TASKS_REPAIRED,
        SWEEP_BEHIND,
        TASKS_STALE,
        TASK_WRITES_REFUSED,
        TOOL_EXCEPTIONS,  # tests/integration/test_task_workflow.py
        COMPONENTS_LEFT_OUT,  # tests/unit/test_fail_alone.py
    }


def test_without_the_xray_sdk_spans_are_quietly_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "aws_xray_sdk" else real_find_spec(name, *a)
    )
    telemetry = PowertoolsTelemetry("obs-nosdk", "Trace", tracing=True)
    with telemetry.span("TaskStore.get"):
        pass
    assert telemetry.tracing is False  # decided once: no further attempts


def test_emf_lines_stay_exact_for_more_dimension_sets_than_are_kept_ready(capsys: pytest.CaptureFixture[str]) -> None:
    telemetry = PowertoolsTelemetry("obs-many", "Many", tracing=False)
    for number in range(300):  # past the 256 line shapes that are kept ready-made
        telemetry.count(TASKS_CREATED, tool=f"tool-{number}")
        telemetry.timing(TIME_TO_TERMINAL, 1.5, tool=f"tool-{number}", status="completed")
        telemetry.flush()
    documents = _emf_documents(capsys.readouterr().out)
    assert len(documents) == 600
    assert _summary(documents[-2]) == ("Many", [["tool"]], {TASKS_CREATED: ("Count", [1.0])}, {"tool": "tool-299"})
    assert _summary(documents[-1]) == (
        "Many",
        [["status", "tool"]],
        {TIME_TO_TERMINAL: ("Milliseconds", [1.5])},
        {"status": "completed", "tool": "tool-299"},
    )
