"""What each Lambda entry point calls: the API endpoint (HTTP event -> JSON-RPC) and the worker endpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_runtime._aws import invocation_deadline
from mcp_runtime.lambda_http import IAM_SESSION, IamBinding, request_from_event, response_to_proxy

if TYPE_CHECKING:  # the API's cold start imports neither the worker nor Powertools
    from app.telemetry import PowertoolsTelemetry
    from mcp_runtime.tasks.callbacks import CallbackService
    from mcp_runtime.tasks.supervisor import TaskSupervisor
    from mcp_runtime.tasks.sweeper import TaskSweeper
    from mcp_runtime.tasks.worker import TaskWorker
    from mcp_runtime.transport import McpHttpTransport


def remaining_ms(context: Any) -> float | None:
    """What Lambda's context says is left of this invocation (None without a context)."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    return float(remaining()) if callable(remaining) else None


class ApiEndpoint:
    """One API Gateway (payload 2.0) or Function URL event in, one proxy response out."""

    def __init__(
        self,
        transport: McpHttpTransport,
        telemetry: PowertoolsTelemetry,
        *,
        dev_auth: bool,
        require_principal: bool,
        iam_binding: IamBinding = IAM_SESSION,
    ) -> None:
        self.transport = transport
        self.telemetry = telemetry
        self.dev_auth = dev_auth
        self.require_principal = require_principal
        self.iam_binding = iam_binding

    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        with self.telemetry.invocation(context), invocation_deadline(remaining_ms(context)):
            request = request_from_event(
                event, dev_auth=self.dev_auth, require_principal=self.require_principal, iam_binding=self.iam_binding
            )
            response = self.transport.handle(request)
        return response_to_proxy(response)


class WorkerEndpoint:
    """One step of a task's execution, as the state machine's Lambda tasks send it."""

    def __init__(self, worker: TaskWorker, telemetry: PowertoolsTelemetry) -> None:
        self.worker = worker
        self.telemetry = telemetry

    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        with self.telemetry.invocation(context), invocation_deadline(remaining_ms(context)):
            return self.worker.handle(event)


class SupervisorEndpoint:
    """A batch of the task table's stream, or an execution status change from EventBridge."""

    def __init__(self, supervisor: TaskSupervisor, telemetry: PowertoolsTelemetry) -> None:
        self.supervisor = supervisor
        self.telemetry = telemetry

    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        with self.telemetry.invocation(context), invocation_deadline(remaining_ms(context)):
            return self.supervisor.handle(event)


class SweeperEndpoint:
    """A run of the sweeper's EventBridge schedule."""

    def __init__(self, sweeper: TaskSweeper, telemetry: PowertoolsTelemetry) -> None:
        self.sweeper = sweeper
        self.telemetry = telemetry

    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        with self.telemetry.invocation(context), invocation_deadline(remaining_ms(context)):
            return self.sweeper.handle(event)


class CallbackEndpoint:
    """An external system completing a task's callback: one API Gateway (payload 2.0) event in,
    one proxy response out. The token in the body is the only credential."""

    def __init__(self, service: CallbackService, telemetry: PowertoolsTelemetry) -> None:
        self.service = service
        self.telemetry = telemetry

    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        import base64
        import json

        with self.telemetry.invocation(context), invocation_deadline(remaining_ms(context)):
            body = event.get("body") or ""
            raw = base64.b64decode(body) if event.get("isBase64Encoded") else str(body).encode()
            answer = self.service.complete(raw)
        return {
            "statusCode": answer.status,
            "headers": {"content-type": "application/json"},
            "body": json.dumps(answer.body),
        }
