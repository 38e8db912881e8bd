"""Per-request context: who is calling, what this request declared, and what it streams back."""

from __future__ import annotations

import logging
from typing import Any, Final

from . import wire
from ._value import ValueObject

LOG_LEVELS: Final[tuple[str, ...]] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
# Each level as Python's logging writes it (a tool's `ctx.log` lines in the function's log).
PYTHON_LOG_LEVELS: Final[dict[str, int]] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


class Principal(ValueObject):
    """The authenticated caller. Never taken from the body or `_meta`."""

    __slots__ = ("id", "source")
    id: str
    source: str

    def __init__(self, id: str, source: str = "anonymous") -> None:
        self.id = id
        self.source = source


ANONYMOUS: Final = Principal("anonymous")


class RequestMeta(ValueObject):
    """What a request declared in its `_meta`: protocol version, client capabilities and info, progress
    token and log level."""

    __slots__ = ("client_capabilities", "client_info", "log_level", "progress_token", "protocol_version")
    protocol_version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    progress_token: str | int | None
    log_level: str | None

    def __init__(
        self,
        protocol_version: str,
        client_capabilities: dict[str, Any],
        client_info: dict[str, Any] | None = None,
        progress_token: str | int | None = None,
        log_level: str | None = None,
    ) -> None:
        self.protocol_version = protocol_version
        self.client_capabilities = client_capabilities
        self.client_info = client_info
        self.progress_token = progress_token
        self.log_level = log_level

    def declares(self, capability: str) -> bool:
        return isinstance(self.client_capabilities.get(capability), dict)

    def declares_extension(self, extension: str) -> bool:
        extensions = self.client_capabilities.get("extensions")
        return isinstance(extensions, dict) and isinstance(extensions.get(extension), dict)

    def declares_elicitation_mode(self, mode: str) -> bool:
        elicitation = self.client_capabilities.get("elicitation")
        if not isinstance(elicitation, dict):
            return False
        if mode == "form":
            return not elicitation or isinstance(elicitation.get("form"), dict)
        return isinstance(elicitation.get(mode), dict)


class RequestContext:
    """One request as the server handles it, and the notifications it queues for its stream."""

    __slots__ = (
        "_progress_seen",
        "headers",
        "meta",
        "method",
        "notifications",
        "principal",
        "request_id",
        "task_stream",
    )
    request_id: wire.RequestId
    method: str
    meta: RequestMeta
    principal: Principal
    headers: dict[str, str]
    notifications: list[dict[str, Any]]
    task_stream: bool
    _progress_seen: float | None

    def __init__(
        self,
        request_id: wire.RequestId,
        method: str,
        meta: RequestMeta,
        principal: Principal,
        headers: dict[str, str],
        notifications: list[dict[str, Any]] | None = None,
        task_stream: bool = False,
    ) -> None:
        self.request_id = request_id
        self.method = method
        self.meta = meta
        self.principal = principal
        self.headers = headers
        self.notifications = [] if notifications is None else notifications
        # The transport can carry a durable task for this request without the tasks extension (the
        # legacy leg's resumable event stream), so a task tool runs as a task here too.
        self.task_stream = task_stream
        self._progress_seen = None

    def send_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Queue `notifications/progress` for this request's stream; a no-op without a token.

        Progress must increase with every notification: a report that does not is dropped (the rule
        a task's reports follow too), never an error in the tool's work.
        """
        token = self.meta.progress_token
        if token is None:
            return
        if self._progress_seen is not None and progress <= self._progress_seen:
            return
        self._progress_seen = progress
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self.notifications.append(
            {"jsonrpc": wire.JSONRPC_VERSION, "method": "notifications/progress", "params": params}
        )

    def send_log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Queue `notifications/message` only when this request asked for logs at or below `level`."""
        wanted = self.meta.log_level
        if wanted is None or LOG_LEVELS.index(level) < LOG_LEVELS.index(wanted):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        self.notifications.append(
            {"jsonrpc": wire.JSONRPC_VERSION, "method": "notifications/message", "params": params}
        )
