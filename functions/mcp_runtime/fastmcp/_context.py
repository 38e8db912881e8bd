"""`Context`: what a ported tool's `ctx: Context` parameter receives, over the runtime's `ToolContext`."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import inspect
import json
import logging
import typing
from collections.abc import Callable, Mapping
from typing import Any, Generic, Literal, TypeVar

from pydantic_core import to_jsonable_python

from ..components import UNSUPPORTED
from ..context import LOG_LEVELS, PYTHON_LOG_LEVELS
from ..limits import SYNC_WAIT_LIMIT_SECONDS
from ..tools import ToolContext, _Injectable

T = TypeVar("T")
log = logging.getLogger("mcp_runtime.fastmcp")


class AcceptedElicitation(Generic[T]):
    """The user answered: `data` holds the answer, of the type the tool asked for."""

    action: Literal["accept"] = "accept"

    def __init__(self, data: T) -> None:
        self.data = data

    def __repr__(self) -> str:
        return f"AcceptedElicitation(data={self.data!r})"


class DeclinedElicitation:
    action: Literal["decline"] = "decline"
    data: None = None


class CancelledElicitation:
    action: Literal["cancel"] = "cancel"
    data: None = None


ElicitationResult = AcceptedElicitation[Any] | DeclinedElicitation | CancelledElicitation


class _Question:
    """How a response type is asked (a flat pydantic model) and how its answer becomes `.data`."""

    def __init__(self, model: Any, convert: Callable[[Any], Any]) -> None:
        self.model = model
        self.convert = convert


def _question(response_type: Any) -> _Question:
    """FastMCP's rules: a model, dataclass or TypedDict is asked field by field; a scalar, a Literal, an
    Enum or a list of choices is asked as one `value` field and answered unwrapped; None asks nothing."""
    from pydantic import BaseModel, create_model

    if response_type is None:
        return _Question(create_model("Confirmation"), lambda answer: None)
    if isinstance(response_type, type) and issubclass(response_type, BaseModel):
        return _Question(response_type, lambda answer: answer)
    if dataclasses.is_dataclass(response_type) and isinstance(response_type, type):
        hints = typing.get_type_hints(response_type)
        fields: dict[str, Any] = {
            field.name: (hints[field.name], _dataclass_default(field)) for field in dataclasses.fields(response_type)
        }
        model = create_model(str(response_type.__name__), **fields)
        dataclass_type = response_type
        return _Question(model, lambda answer: dataclass_type(**answer.model_dump()))
    if typing.is_typeddict(response_type):
        keys: dict[str, Any] = {name: (hint, ...) for name, hint in typing.get_type_hints(response_type).items()}
        model = create_model(str(response_type.__name__), **keys)
        return _Question(model, lambda answer: answer.model_dump())
    if isinstance(response_type, list) and all(isinstance(choice, str) for choice in response_type):
        choices = Literal[tuple(response_type)]  # type: ignore[valid-type]
        return _scalar(choices, lambda value: value)
    if isinstance(response_type, type) and issubclass(response_type, enum.Enum):
        enum_type = response_type
        values = Literal[tuple(member.value for member in enum_type)]  # type: ignore[valid-type]
        return _scalar(values, lambda value: enum_type(value))
    if response_type in (str, int, float, bool) or typing.get_origin(response_type) is Literal:
        return _scalar(response_type, lambda value: value)
    raise TypeError(
        f"ctx.elicit cannot ask for {response_type!r}: ask for a model, a dataclass, a TypedDict, str, int, "
        "float, bool, a Literal, an Enum, a list of choices or None"
    )


def _scalar(value_type: Any, convert: Callable[[Any], Any]) -> _Question:
    from pydantic import create_model

    model = create_model("Value", value=(value_type, ...))
    return _Question(model, lambda answer: convert(answer.value))


def _dataclass_default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return ...


class Context(_Injectable):
    """FastMCP's (and MCPServer's) `Context`, for the runtime: progress, logs, elicitation, the request,
    the caller, and the runtime's durable operations as awaitables."""

    def __init__(self, ctx: ToolContext) -> None:
        self._ctx = ctx
        self._questions = 0

    @classmethod
    def injected(cls, ctx: ToolContext) -> Context:
        return cls(ctx)

    # ---- the request and the caller ---------------------------------------------------------------
    @property
    def request_id(self) -> str:
        """The JSON-RPC id of this call; inside a task, the task's id."""
        found = self._ctx.request_id if self._ctx.request_id is not None else self._ctx.task_id
        return "" if found is None else str(found)

    @property
    def task_id(self) -> str | None:
        return self._ctx.task_id

    @property
    def is_background_task(self) -> bool:
        return self._ctx.task_id is not None

    @property
    def client_id(self) -> str:
        """Who is calling: the authenticated principal's id (never taken from the request body)."""
        return self._ctx.principal.id

    @property
    def principal(self) -> Any:
        return self._ctx.principal

    @property
    def client_info(self) -> dict[str, Any] | None:
        return self._ctx.meta.client_info

    @property
    def client_capabilities(self) -> dict[str, Any]:
        return self._ctx.meta.client_capabilities

    @property
    def protocol_version(self) -> str:
        return self._ctx.meta.protocol_version

    def client_supports_extension(self, extension_id: str) -> bool:
        return self._ctx.meta.declares_extension(extension_id)

    @property
    def tool_context(self) -> ToolContext:
        """The runtime's own context (handles, task history, idempotency keys)."""
        return self._ctx

    # ---- progress and logs ------------------------------------------------------------------------
    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        self._ctx.report_progress(progress, total, message)

    async def log(self, *args: Any, **kwargs: Any) -> None:
        """FastMCP's `log(message, level=None, logger_name=None, extra=None)`, or MCPServer's
        `log(level, data, *, logger_name=None)`."""
        if "data" in kwargs or (len(args) >= 2 and args[0] in LOG_LEVELS and "level" not in kwargs):
            level, data = [*args, None, None][:2]
            level = kwargs.get("level", level)
            data = kwargs.get("data", data)
        else:
            data = args[0] if args else kwargs.get("message")
            level = (args[1] if len(args) > 1 else None) or kwargs.get("level") or "info"
            extra = kwargs.get("extra")
            if extra:
                data = {"msg": data, "extra": dict(extra)}
        self._log(str(level), data, kwargs.get("logger_name"))

    async def debug(self, message: Any, logger_name: str | None = None, extra: Mapping[str, Any] | None = None) -> None:
        await self.log(message, "debug", logger_name=logger_name, extra=extra)

    async def info(self, message: Any, logger_name: str | None = None, extra: Mapping[str, Any] | None = None) -> None:
        await self.log(message, "info", logger_name=logger_name, extra=extra)

    async def warning(
        self, message: Any, logger_name: str | None = None, extra: Mapping[str, Any] | None = None
    ) -> None:
        await self.log(message, "warning", logger_name=logger_name, extra=extra)

    async def error(self, message: Any, logger_name: str | None = None, extra: Mapping[str, Any] | None = None) -> None:
        await self.log(message, "error", logger_name=logger_name, extra=extra)

    def _log(self, level: str, data: Any, logger_name: str | None) -> None:
        if level not in LOG_LEVELS:
            raise ValueError(f"log level {level!r} is not one of {', '.join(LOG_LEVELS)}")
        self._ctx.log(level, data)
        where = f"task {self._ctx.task_id}" if self._ctx.task_id else "tool"
        log.log(PYTHON_LOG_LEVELS[level], "%s%s: %s", where, f" [{logger_name}]" if logger_name else "", data)

    # ---- elicitation ------------------------------------------------------------------------------
    async def elicit(
        self,
        message: str,
        response_type: Any = None,
        *,
        schema: Any = None,
        response_title: str | None = None,
        response_description: str | None = None,
    ) -> ElicitationResult:
        """Ask the user. In a call, an MRTR round (the tool runs again from the top with the answer); in
        a task, the task's `input_required`, answered by `tasks/update`. A client that did not declare
        elicitation gets -32021 naming it."""
        question = _question(schema if schema is not None else response_type)
        self._questions += 1
        answer = self._ctx.elicit(f"elicit-{self._questions}", message, question.model)
        if answer.action == "decline":
            return DeclinedElicitation()
        if answer.action == "cancel":
            return CancelledElicitation()
        return AcceptedElicitation(question.convert(answer.content))

    # ---- durable operations (the runtime's own) -----------------------------------------------------
    async def step(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run `fn` (sync or async) once for the task and return its JSON value; every later run of the
        tool gets the recorded value back. Outside a task, `fn` simply runs."""
        durable = self._ctx.durable_run
        if durable is not None:
            return await durable.step_async(name, fn)
        produced = fn()
        if inspect.isawaitable(produced):
            produced = await produced
        return json.loads(json.dumps(to_jsonable_python(produced), ensure_ascii=False))

    async def wait(self, seconds: float) -> None:
        """Wait durably inside a task (no Lambda runs meanwhile); a few seconds at most in a call."""
        if self._ctx.durable_run is not None or seconds > SYNC_WAIT_LIMIT_SECONDS:
            self._ctx.wait(seconds)  # durable in a task; refused, naming why, in a call
            return
        await asyncio.sleep(max(0.0, seconds))

    async def wait_for_callback(
        self, name: str, submit: Callable[[Any], Any], timeout_seconds: float | None = None
    ) -> Any:
        """Hand an external system a single-use callback through `submit` and hold the task until it answers."""
        return self._ctx.wait_for_callback(name, submit, timeout_seconds)

    def idempotency_key(self, name: str) -> str:
        return self._ctx.idempotency_key(name)

    def secret(self, name: str) -> str:
        """The secret cdk.json's `toolSecrets` gives the tools as `name` (read once per environment)."""
        return self._ctx.secret(name)

    @property
    def handles(self) -> Any:
        """The caller's server-minted handles: state that outlives a call, whichever environment serves it."""
        return self._ctx.handles

    @property
    def task_history(self) -> Any:
        """The caller's own tasks, newest first (what the protocol offers instead of tasks/list)."""
        return self._ctx.task_history

    # ---- what does not port ---------------------------------------------------------------------------
    async def sample(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(UNSUPPORTED["ctx.sample"])

    async def get_state(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(UNSUPPORTED["ctx.get_state"])

    async def set_state(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(UNSUPPORTED["ctx.set_state"])
