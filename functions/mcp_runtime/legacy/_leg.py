"""The handshake-era leg (2025-11-25, 2025-06-18, 2025-03-26) over the shared `McpServer`.

A 2025 client initializes, then sends requests without `_meta` under a sealed `Mcp-Session-Id`.
Plain requests run the shared handlers and answer at once. A request whose handler asks the client
for input (MRTR's `input_required`) or starts a durable task is answered with an event stream that
holds a priming event (an id and `retry`), the server-to-client requests if any, and then ends; the
client POSTs its answers and reconnects with `GET` + `Last-Event-ID`, and that invocation re-runs
the request with the answers (or relays the task's progress, questions and result). What must
survive between those calls is one stream item in DynamoDB, bound to the principal and session.

Errors: `McpError`s become JSON-RPC errors here (HTTP 200); session and stream refusals are
`RequestRejected` (HTTP 400/404/405), mapped by the transport like every other HTTP refusal.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from .. import wire
from ..context import LOG_LEVELS, Principal, RequestContext, RequestMeta
from ..errors import (
    InternalError,
    InvalidParams,
    InvalidRequest,
    McpError,
    MethodNotFound,
    MissingRequiredClientCapability,
    RequestRejected,
)
from ..tools import ToolResult, text
from ..transport import HttpRequest, HttpResponse
from . import _shapes as shapes
from ._sessions import Session, SessionInvalid, SessionSealer
from ._store import (
    CANCELLED,
    DONE,
    KIND_INPUT,
    KIND_TASK,
    OPEN,
    LegacyStore,
    LegacyStoreUnavailable,
    SessionEnded,
    SessionState,
    StreamConflict,
    StreamNotFound,
    StreamRecord,
)

if TYPE_CHECKING:
    from ..server import McpServer

log = logging.getLogger(__name__)

SSE_HEADERS: Final = {"content-type": "text/event-stream", "cache-control": "no-cache", "x-accel-buffering": "no"}
SESSION_NOT_FOUND: Final = "Session not found: initialize a new session"
STREAM_NOT_FOUND: Final = "Stream not found"
SESSION_REQUIRED: Final = "Bad Request: Mcp-Session-Id header is required"
NO_OUTSTANDING_REQUEST: Final = "Bad Request: no outstanding request has this id"
NO_STANDALONE_STREAM: Final = "Method not allowed: GET only resumes a stream (send Last-Event-ID)"
NEEDS_STREAM_TEXT: Final = (
    "This tool needs input from the user, which this client cannot receive: it does not accept event streams."
)
TASK_CANCELLED_TEXT: Final = "The task was cancelled."
TASK_NEEDS_STREAM: Final = "which this client cannot follow: it does not accept event streams."
CLIENT_ANSWER_FAILED: Final = "The client could not answer {method}"
# Server-to-client request ids: `<stream key>.<round>.<question key>`; event ids: `<stream key>.<seq>`.
_STREAM_KEY: Final = re.compile(r"^[0-9a-f]{32}$")
_EVENT_ID: Final = re.compile(r"^([0-9a-f]{32})\.(\d{1,9})$")
_ANSWER_ID: Final = re.compile(r"^([0-9a-f]{32})\.(\d{1,9})\.(.{1,128})$", re.DOTALL)
_MRTR_KEYS: Final = ("inputResponses", "requestState")


def derive_stream_key(nonce: str, request_id: wire.RequestId) -> str:
    """The stream of one request of one session: unguessable without the session's secret nonce."""
    material = f"{nonce}\x00{json.dumps(request_id)}".encode()
    return hashlib.sha256(material).hexdigest()[:32]


def _sse_block(message: Any, event_id: str | None = None, retry_ms: int | None = None) -> str:
    lines = []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    if retry_ms is not None:
        lines.append(f"retry: {retry_ms}")
    if message is None:
        lines.append("data: ")
    else:
        lines.append("event: message")
        lines.append("data: " + json.dumps(message, separators=(",", ":"), ensure_ascii=False))
    return "\n".join(lines) + "\n\n"


class LegacyLeg:
    def __init__(
        self,
        server: McpServer,
        store: LegacyStore | None,
        *,
        session_lifetime_seconds: int = 86_400,
        stream_ttl_seconds: int = 900,
        retry_ms: int = 500,
        wait_seconds: float = 10.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        on_request: Callable[[RequestContext], None] | None = None,
    ) -> None:
        self.server = server
        self.store = store
        self.sessions = SessionSealer(server.sealer, session_lifetime_seconds, clock)
        self.stream_ttl_seconds = stream_ttl_seconds
        self.retry_ms = retry_ms
        self.wait_seconds = wait_seconds
        self._clock = clock
        self._sleep = sleep
        self.on_request = on_request

    # ---- POST ---------------------------------------------------------------------------------
    def handle_post(self, request: HttpRequest, message: dict[str, Any]) -> HttpResponse:
        request_id = message.get("id")
        readable_id = request_id if isinstance(request_id, str | int) and not isinstance(request_id, bool) else None
        try:
            return self._post(request, message)
        except MissingRequiredClientCapability as exc:
            return self._json(shapes.error_response(readable_id, InvalidRequest(exc.message).to_error_object()))
        except McpError as error:
            # A message that is not a valid JSON-RPC request is a 400, as the transports of that era answer it.
            status = 400 if error.code in (wire.PARSE_ERROR, wire.INVALID_REQUEST) else 200
            return self._json(shapes.error_response(readable_id, error.to_error_object()), status=status)
        except LegacyStoreUnavailable as exc:
            log.error("legacy store unavailable: %s", exc)
            return self._json(shapes.error_response(readable_id, InternalError("Internal error").to_error_object()))

    def _post(self, request: HttpRequest, message: dict[str, Any]) -> HttpResponse:
        if message.get("jsonrpc") != wire.JSONRPC_VERSION:
            raise InvalidRequest('Invalid request: jsonrpc must be "2.0"')
        principal = request.principal or Principal("anonymous")
        method = message.get("method")
        if method is None and "id" in message and ("result" in message or "error" in message):
            session, _ = self._open_session(request)
            self._accept_answer(session, principal, message, request.headers)
            return self._accepted()
        if not isinstance(method, str) or not method:
            raise InvalidRequest("Invalid request: method must be a non-empty string")
        params = message.get("params", {})
        if not isinstance(params, dict):
            raise InvalidParams("Invalid params: params must be an object")
        if method == wire.METHOD_INITIALIZE:
            if "id" not in message:
                raise InvalidRequest("Invalid request: initialize is a request and needs an id")
            return self._initialize(principal, self._request_id(message), params)
        session, state = self._open_session(request)
        if "id" not in message:
            self._notification(session, state, principal, method, params, request.headers)
            return self._accepted()
        request_id = self._request_id(message)
        return self._request(session, state, principal, request_id, method, params, request)

    @staticmethod
    def _request_id(message: dict[str, Any]) -> wire.RequestId:
        request_id = message.get("id")
        if isinstance(request_id, bool) or not isinstance(request_id, str | int):
            raise InvalidRequest("Invalid request: id must be a string or an integer")
        return request_id

    def _initialize(self, principal: Principal, request_id: wire.RequestId, params: dict[str, Any]) -> HttpResponse:
        requested = params.get("protocolVersion")
        capabilities = params.get("capabilities")
        client_info = params.get("clientInfo")
        if not isinstance(requested, str):
            raise InvalidParams("Invalid params: 'protocolVersion' is missing")
        if not isinstance(capabilities, dict):
            raise InvalidParams("Invalid params: 'capabilities' is missing")
        if not isinstance(client_info, dict) or not isinstance(client_info.get("name"), str):
            raise InvalidParams("Invalid params: 'clientInfo' is missing")
        version = requested if requested in wire.LEGACY_PROTOCOL_VERSIONS else wire.LEGACY_PROTOCOL_VERSION
        _, token = self.sessions.issue(principal.id, version, capabilities, client_info)
        capabilities_out = shapes.legacy_capabilities(self.server.capabilities())
        if self.store is None:
            capabilities_out.pop("logging", None)
        settings = self.server.settings
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": capabilities_out,
            "serverInfo": {"name": settings.server_name, "version": settings.server_version},
        }
        if settings.instructions:
            result["instructions"] = settings.instructions
        return self._json(shapes.response(request_id, result), {wire.HEADER_SESSION_ID: token})

    def _request(
        self,
        session: Session,
        state: SessionState,
        principal: Principal,
        request_id: wire.RequestId,
        method: str,
        params: dict[str, Any],
        request: HttpRequest,
    ) -> HttpResponse:
        if method == wire.METHOD_PING:
            return self._json(shapes.response(request_id, {}))
        if method == wire.METHOD_SET_LOG_LEVEL:
            return self._set_log_level(session, request_id, params)
        if method in (wire.METHOD_SUBSCRIBE, wire.METHOD_UNSUBSCRIBE):
            if not isinstance(params.get("uri"), str):
                raise InvalidParams("Invalid params: 'uri' is missing")
            return self._json(shapes.response(request_id, {}))
        spec = None if method.startswith("tasks/") else self.server.method(method)
        if spec is None:
            raise MethodNotFound(f"Method not found: {method}")
        clean = {key: value for key, value in params.items() if key not in _MRTR_KEYS}
        can_stream = self.store is not None and _accepts_event_stream(request.headers)
        ctx = self._context(session, state, principal, request_id, method, clean, request.headers, can_stream)
        if self.on_request is not None:
            self.on_request(ctx)
        result = self._dispatch(spec, clean, ctx)
        result_type = result.get("resultType", wire.RESULT_COMPLETE)
        if result_type == wire.RESULT_COMPLETE:
            return self._complete(ctx, session, result)
        if not can_stream:
            if method != "tools/call":
                raise InvalidRequest("Invalid request: this request needs input, which needs an event stream")
            return self._complete(ctx, session, ToolResult([text(NEEDS_STREAM_TEXT)], is_error=True).to_wire())
        assert self.store is not None
        record = StreamRecord(
            key=derive_stream_key(session.nonce, request_id),
            owner=principal.id,
            session=session.nonce,
            request_id=request_id,
            method=method,
            params=clean,
            kind=KIND_INPUT,
            status=OPEN,
            version=1,
            expires_at=self._stream_expiry(),
        )
        record = self._next_round(record, result, session, list(ctx.notifications))
        try:
            self.store.create_stream(record)
        except StreamConflict:
            if record.task_id is not None and self.server.tasks is not None:
                self.server.tasks.cancel(record.task_id, ctx)  # nobody could ever follow it
            raise InvalidRequest("Invalid request: a request with this id is still in progress") from None
        return self._stream(record, record.events, before_seq=0)

    def _dispatch(self, spec: Any, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        try:
            return self.server.dispatch(spec, params, ctx)
        except MissingRequiredClientCapability as exc:
            if ctx.method != "tools/call":
                raise
            # 2025 names no capability error: a tool the client cannot serve says so as a tool error.
            required = exc.data.get("requiredCapabilities") if isinstance(exc.data, dict) else None
            if isinstance(required, dict) and "extensions" in required:
                explained = f"{exc.message}, {TASK_NEEDS_STREAM}"
            else:
                explained = f"{exc.message}, which this client did not declare."
            return ToolResult([text(explained)], is_error=True).to_wire()

    def _complete(self, ctx: RequestContext, session: Session, result: dict[str, Any]) -> HttpResponse:
        shaped = shapes.legacy_result(ctx.method, result, session.protocol_version)
        final = shapes.response(ctx.request_id, shaped)
        if not ctx.notifications:
            return self._json(final)
        body = "".join(_sse_block(message) for message in [*ctx.notifications, final])
        return HttpResponse(200, dict(SSE_HEADERS), body)

    def _set_log_level(self, session: Session, request_id: wire.RequestId, params: dict[str, Any]) -> HttpResponse:
        level = params.get("level")
        if level not in LOG_LEVELS:
            raise InvalidParams("Invalid params: unknown log level")
        if self.store is None:
            raise MethodNotFound(f"Method not found: {wire.METHOD_SET_LOG_LEVEL}")
        try:
            self.store.set_log_level(session.nonce, str(level), session.expires_at)
        except SessionEnded:
            raise RequestRejected(404, SESSION_NOT_FOUND) from None
        return self._json(shapes.response(request_id, {}))

    # ---- notifications and answers from the client ------------------------------------------
    def _notification(
        self,
        session: Session,
        state: SessionState,
        principal: Principal,
        method: str,
        params: dict[str, Any],
        headers: dict[str, str],
    ) -> None:
        if method != wire.NOTIFICATION_CANCELLED or self.store is None:
            return  # notifications/initialized and the rest need nothing from a stateless server
        request_id = params.get("requestId")
        if isinstance(request_id, bool) or not isinstance(request_id, str | int):
            return
        try:
            record = self.store.get_stream(derive_stream_key(session.nonce, request_id), principal.id, session.nonce)
        except StreamNotFound:
            return
        if record.status in (DONE, CANCELLED):
            return
        if record.kind == KIND_TASK and record.task_id is not None and self.server.tasks is not None:
            ctx = self._context(session, state, principal, record.request_id, record.method, record.params, headers)
            try:
                self.server.tasks.cancel(record.task_id, ctx)
            except McpError as exc:
                log.info("cancel of task %s not applied: %s", record.task_id, exc.message)
        try:
            self.store.save_stream(replace(record, status=CANCELLED), record.version)
        except StreamConflict:
            log.info("stream %s changed while it was cancelled", record.key)

    def _accept_answer(
        self, session: Session, principal: Principal, message: dict[str, Any], headers: dict[str, str]
    ) -> None:
        matched = _ANSWER_ID.match(message["id"]) if isinstance(message.get("id"), str) else None
        if matched is None or self.store is None:
            raise RequestRejected(400, NO_OUTSTANDING_REQUEST)
        key, round_number, answer_key = matched.group(1), int(matched.group(2)), matched.group(3)
        if "error" in message:
            error = message.get("error")
            code = error.get("code") if isinstance(error, dict) else None
            answer: Any = {"error": {"code": code if isinstance(code, int) else wire.INTERNAL_ERROR}}
        else:
            answer = message.get("result")
            if not isinstance(answer, dict):
                raise RequestRejected(400, "Bad Request: result must be an object")
        try:
            record = self.store.get_stream(key, principal.id, session.nonce)
            if record.round != round_number or answer_key not in record.pending or answer_key in record.answers:
                raise StreamNotFound(key)
            self.store.record_answer(key, principal.id, session.nonce, round_number, answer_key, answer)
        except StreamNotFound:
            raise RequestRejected(400, NO_OUTSTANDING_REQUEST) from None
        if record.kind == KIND_TASK and record.task_id is not None and self.server.tasks is not None:
            state = SessionState()
            ctx = self._context(session, state, principal, record.request_id, record.method, record.params, headers)
            request = record.pending[answer_key]
            self.server.tasks.update(record.task_id, {answer_key: _tool_answer(request, answer)}, ctx)

    # ---- GET: resume a stream -----------------------------------------------------------------
    def handle_get(self, request: HttpRequest) -> HttpResponse:
        session, state = self._open_session(request)
        last_event_id = request.headers.get(wire.HEADER_LAST_EVENT_ID)
        if last_event_id is None or self.store is None:
            raise RequestRejected(405, NO_STANDALONE_STREAM, {"allow": "POST, DELETE"})
        matched = _EVENT_ID.match(last_event_id.strip())
        if matched is None:
            raise RequestRejected(404, STREAM_NOT_FOUND)
        principal = request.principal or Principal("anonymous")
        key, seen = matched.group(1), int(matched.group(2))
        try:
            return self._resume(session, state, principal, key, seen, request.headers)
        except StreamNotFound:
            raise RequestRejected(404, STREAM_NOT_FOUND) from None
        except LegacyStoreUnavailable as exc:
            log.error("legacy store unavailable: %s", exc)
            raise RequestRejected(503, "Service unavailable: try again") from None

    def _resume(
        self, session: Session, state: SessionState, principal: Principal, key: str, seen: int, headers: dict[str, str]
    ) -> HttpResponse:
        assert self.store is not None
        deadline = self._clock() + self.wait_seconds
        delay = 0.05
        while True:
            record = self.store.get_stream(key, principal.id, session.nonce)
            if record.status == CANCELLED or seen > record.seq:
                raise StreamNotFound(key)
            missed = record.events_after(seen)
            if missed:
                return self._stream(record, missed, before_seq=seen)
            if record.status == DONE:
                return self._stream(record, list(record.events[-1:]), before_seq=seen)
            advanced = self._advance(record, session, state, principal, headers)
            if advanced is not None and advanced.events_after(seen):
                return self._stream(advanced, advanced.events_after(seen), before_seq=seen)
            if self._clock() + delay >= deadline:
                self._keep_alive(record)
                return self._stream(record, [], before_seq=record.seq)  # nothing yet: come back after `retry`
            self._sleep(delay)
            delay = min(delay * 2, 0.5)

    def _advance(
        self, record: StreamRecord, session: Session, state: SessionState, principal: Principal, headers: dict[str, str]
    ) -> StreamRecord | None:
        """The stream after this invocation's work, or None when there is nothing to do yet."""
        if record.kind == KIND_TASK:
            return self._relay_task(record, session, state, principal, headers)
        if record.status != OPEN or not all(key in record.answers for key in record.pending):
            return None
        assert self.store is not None
        try:
            claimed = self.store.claim_stream(record, lease_seconds=max(30, int(self.wait_seconds) * 3))
        except StreamConflict:
            return None
        updated = self._rerun(claimed, session, state, principal, headers)
        try:
            return self.store.save_stream(updated, claimed.version)
        except StreamConflict:
            return None  # cancelled while it ran: the next read sees that

    def _rerun(
        self, record: StreamRecord, session: Session, state: SessionState, principal: Principal, headers: dict[str, str]
    ) -> StreamRecord:
        """Run the request again with this round's answers, as MRTR's retry would."""
        failed = next((key for key, answer in record.answers.items() if _failed_answer(record, key, answer)), None)
        if failed is not None:
            method = record.pending[failed].get("method", "a request")
            error = InternalError(CLIENT_ANSWER_FAILED.format(method=method)).to_error_object()
            return self._finish(record.with_events([shapes.error_response(record.request_id, error)]))
        responses = {key: _tool_answer(record.pending[key], answer) for key, answer in record.answers.items()}
        params = {**record.params, "inputResponses": responses, "requestState": record.request_state}
        ctx = self._context(session, state, principal, record.request_id, record.method, record.params, headers, True)
        spec = self.server.method(record.method)
        try:
            if spec is None:
                raise MethodNotFound(f"Method not found: {record.method}")
            result = self._dispatch(spec, params, ctx)
        except McpError as exc:
            error_object = exc.to_error_object()
            return self._finish(
                record.with_events([*ctx.notifications, shapes.error_response(record.request_id, error_object)])
            )
        if result.get("resultType", wire.RESULT_COMPLETE) == wire.RESULT_COMPLETE:
            shaped = shapes.legacy_result(record.method, result, session.protocol_version)
            return self._finish(record.with_events([*ctx.notifications, shapes.response(record.request_id, shaped)]))
        return self._next_round(
            replace(record, round=record.round + 1, status=OPEN, lease_until=0),
            result,
            session,
            list(ctx.notifications),
        )

    def _next_round(
        self, record: StreamRecord, result: dict[str, Any], session: Session, notifications: list[Any]
    ) -> StreamRecord:
        """The stream after a result that asks (a new round of questions) or starts a task."""
        if result.get("resultType") == wire.RESULT_TASK:
            return replace(
                record.with_events(notifications),
                kind=KIND_TASK,
                task_id=str(result["taskId"]),
                pending={},
                answers={},
                request_state=None,
                expires_at=self._stream_expiry(),
            )
        pending = dict(result.get("inputRequests") or {})
        asks = [self._ask(record, key, request, session) for key, request in pending.items()]
        return replace(
            record,
            pending=pending,
            answers={},
            request_state=result.get("requestState"),
            expires_at=self._stream_expiry(),
        ).with_events([*notifications, *asks])

    def _relay_task(
        self, record: StreamRecord, session: Session, state: SessionState, principal: Principal, headers: dict[str, str]
    ) -> StreamRecord | None:
        """New progress, questions or the result of the stream's task, recorded before they are sent."""
        assert self.store is not None and self.server.tasks is not None and record.task_id is not None
        ctx = self._context(session, state, principal, record.request_id, record.method, record.params, headers)
        lines: tuple[dict[str, Any], ...] = ()
        reported: tuple[float, float | None] | None = None
        try:
            task, lines, reported = self.server.tasks.follow(record.task_id, ctx)
        except McpError as exc:
            task = {"status": "failed", "error": exc.to_error_object()}
        status, message = str(task.get("status")), task.get("statusMessage")
        # The progress value last relayed rides on the fingerprint: a notification never repeats it.
        relayed = "" if reported is None else repr(reported[0])
        fingerprint = f"{status}|{message or ''}|{relayed}"
        relayed_before = record.last_status.rsplit("|", 1)[-1] if record.last_status else ""
        fresh = [line for line in lines if int(line.get("seq") or 0) > record.log_seq]
        log_seq = max([record.log_seq, *(int(line["seq"]) for line in fresh)])
        events: list[Any] = [_log_message(line) for line in fresh if _wanted(line, ctx.meta.log_level)]
        progress = record.progress
        pending = dict(record.pending)
        finished = False
        token = ctx.meta.progress_token
        if (
            fingerprint != record.last_status
            and message
            and token is not None
            and status in ("working", "input_required")
        ):
            params: dict[str, Any] | None = None
            if reported is None:  # a count of the messages relayed
                progress += 1
                params = {"progressToken": token, "progress": progress, "message": message}
            elif relayed != relayed_before:  # the tool's own figures, as it reported them
                params = {"progressToken": token, "progress": _number(reported[0]), "message": message}
                if reported[1] is not None:
                    params["total"] = _number(reported[1])
            if params is not None:
                events.append({"jsonrpc": wire.JSONRPC_VERSION, "method": wire.NOTIFICATION_PROGRESS, "params": params})
        if status == "input_required":
            for key, request in (task.get("inputRequests") or {}).items():
                if key not in pending:
                    pending[key] = request
                    events.append(self._ask(record, key, request, session))
        elif status == "completed":
            result = shapes.legacy_result("tools/call", dict(task.get("result") or {}), session.protocol_version)
            events.append(shapes.response(record.request_id, result))
            finished = True
        elif status == "failed":
            error = task.get("error") or InternalError("Task failed").to_error_object()
            events.append(shapes.error_response(record.request_id, error))
            finished = True
        elif status == "cancelled":
            cancelled = ToolResult([text(TASK_CANCELLED_TEXT)], is_error=True).to_wire()
            events.append(shapes.response(record.request_id, shapes.legacy_result("tools/call", cancelled, "")))
            finished = True
        if not events and fingerprint == record.last_status and log_seq == record.log_seq:
            return None
        updated = replace(
            record.with_events(events),
            pending=pending,
            last_status=fingerprint,
            progress=progress,
            log_seq=log_seq,
            status=DONE if finished else record.status,
            expires_at=self._stream_expiry(),
        )
        try:
            return self.store.save_stream(updated, record.version)
        except StreamConflict:
            return None  # another reconnect relayed it first; the next read sees its events

    # ---- DELETE: end a session ----------------------------------------------------------------
    def handle_delete(self, request: HttpRequest) -> HttpResponse:
        session, _ = self._open_session(request)
        if self.store is None:
            raise RequestRejected(405, "Method not allowed: sessions end when they expire", {"allow": "POST"})
        try:
            self.store.revoke_session(session.nonce, session.expires_at)
        except SessionEnded:
            raise RequestRejected(404, SESSION_NOT_FOUND) from None
        except LegacyStoreUnavailable as exc:
            log.error("legacy store unavailable: %s", exc)
            raise RequestRejected(503, "Service unavailable: try again") from None
        return HttpResponse(204)

    # ---- helpers --------------------------------------------------------------------------------
    def _open_session(self, request: HttpRequest) -> tuple[Session, SessionState]:
        token = request.headers.get(wire.HEADER_SESSION_ID)
        if token is None:
            raise RequestRejected(400, SESSION_REQUIRED)
        principal = request.principal or Principal("anonymous")
        try:
            session = self.sessions.open(principal.id, token.strip())
        except SessionInvalid:
            raise RequestRejected(404, SESSION_NOT_FOUND) from None
        header = request.headers.get(wire.HEADER_PROTOCOL_VERSION)
        if header is not None and header.strip() != session.protocol_version:
            raise RequestRejected(400, "Bad Request: MCP-Protocol-Version does not match the session")
        try:
            state = self.store.session_state(session.nonce) if self.store is not None else SessionState()
        except LegacyStoreUnavailable as exc:
            log.error("legacy store unavailable: %s", exc)
            raise RequestRejected(503, "Service unavailable: try again") from None
        if state.revoked:
            raise RequestRejected(404, SESSION_NOT_FOUND)
        return session, state

    def _context(
        self,
        session: Session,
        state: SessionState,
        principal: Principal,
        request_id: wire.RequestId,
        method: str,
        params: dict[str, Any],
        headers: dict[str, str],
        can_stream: bool = False,
    ) -> RequestContext:
        meta = params.get("_meta")
        token = meta.get(wire.META_PROGRESS_TOKEN) if isinstance(meta, dict) else None
        if isinstance(token, bool) or not isinstance(token, str | int | None):
            raise InvalidParams("Invalid params: progressToken must be a string or an integer")
        request_meta = RequestMeta(
            protocol_version=session.protocol_version,
            client_capabilities=session.capabilities,
            client_info=session.client_info,
            progress_token=token,
            log_level=state.log_level,
        )
        return RequestContext(request_id, method, request_meta, principal, headers, task_stream=can_stream)

    def _ask(self, record: StreamRecord, key: str, request: dict[str, Any], session: Session) -> dict[str, Any]:
        request_id = f"{record.key}.{record.round}.{key}"
        params = request.get("params")
        if not isinstance(params, dict):
            params = {}
        return shapes.server_request(request_id, str(request.get("method")), params, session.protocol_version)

    def _finish(self, record: StreamRecord) -> StreamRecord:
        return replace(
            record, status=DONE, pending={}, answers={}, request_state=None, expires_at=self._stream_expiry()
        )

    def _keep_alive(self, record: StreamRecord) -> None:
        """A stream the client keeps reconnecting to outlives its TTL (a long task, a slow user)."""
        assert self.store is not None
        if record.expires_at - self._clock() > self.stream_ttl_seconds / 2:
            return
        with contextlib.suppress(StreamConflict):  # someone else wrote it, which renewed it too
            self.store.save_stream(replace(record, expires_at=self._stream_expiry()), record.version)

    def _stream_expiry(self) -> int:
        return int(self._clock()) + self.stream_ttl_seconds

    def _stream(
        self, record: StreamRecord, events: list[tuple[int, Any]] | tuple[tuple[int, Any], ...], before_seq: int
    ) -> HttpResponse:
        blocks = [_sse_block(None, f"{record.key}.{before_seq}", self.retry_ms)]
        blocks.extend(_sse_block(message, f"{record.key}.{seq}") for seq, message in events)
        return HttpResponse(200, dict(SSE_HEADERS), "".join(blocks))

    @staticmethod
    def _json(
        message: dict[str, Any], extra_headers: dict[str, str] | None = None, *, status: int = 200
    ) -> HttpResponse:
        headers = {"content-type": "application/json", **(extra_headers or {})}
        return HttpResponse(status, headers, json.dumps(message, separators=(",", ":"), ensure_ascii=False))

    @staticmethod
    def _accepted() -> HttpResponse:
        return HttpResponse(202)


def _wanted(line: dict[str, Any], level: str | None) -> bool:
    """A task's log line goes to a 2025 client only at or above the level its `logging/setLevel` asked for."""
    return (
        level is not None
        and line.get("level") in LOG_LEVELS
        and (LOG_LEVELS.index(str(line["level"])) >= LOG_LEVELS.index(level))
    )


def _log_message(line: dict[str, Any]) -> dict[str, Any]:
    params = {"level": line["level"], "data": line.get("data"), "logger": line.get("logger")}
    return {"jsonrpc": wire.JSONRPC_VERSION, "method": wire.NOTIFICATION_MESSAGE, "params": params}


def _accepts_event_stream(headers: dict[str, str]) -> bool:
    accept = headers.get("accept")
    if accept is None:
        return True
    return any(part.split(";")[0].strip() in ("text/event-stream", "*/*", "text/*") for part in accept.split(","))


def _failed_answer(record: StreamRecord, key: str, answer: Any) -> bool:
    """An error in place of a sampling or roots answer fails the request; for elicitation it is a cancel."""
    if not (isinstance(answer, dict) and "error" in answer):
        return False
    return bool(record.pending.get(key, {}).get("method") != wire.INPUT_METHOD_ELICIT)


def _tool_answer(request: dict[str, Any], answer: Any) -> Any:
    if isinstance(answer, dict) and "error" in answer and request.get("method") == wire.INPUT_METHOD_ELICIT:
        return {"action": "cancel"}
    return answer


def _number(value: float) -> int | float:
    """A reported figure as the tool wrote it: 3, not 3.0 (the task item keeps numbers as floats)."""
    return int(value) if value.is_integer() else value
