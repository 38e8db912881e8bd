"""Params models of the JSON-RPC methods the server serves. `_meta` is checked by the transport."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from .limits import MAX_TASK_ID_CHARS


class Params(BaseModel):
    # Validators are built on first use: a cold container pays only for the methods it serves.
    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)


class EmptyParams(Params):
    pass


class PaginatedParams(Params):
    cursor: StrictStr | None = None


class MrtrParams(Params):
    # Typed loosely on purpose: malformed answers re-ask rather than fail the request.
    input_responses: Any = Field(None, alias="inputResponses")
    request_state: Any = Field(None, alias="requestState")


class CallToolParams(MrtrParams):
    name: StrictStr
    arguments: dict[str, Any] | None = None


class GetPromptParams(MrtrParams):
    name: StrictStr
    arguments: dict[str, StrictStr] | None = None


class ReadResourceParams(MrtrParams):
    uri: StrictStr


class CompletionArgument(BaseModel):
    model_config = ConfigDict(defer_build=True)

    name: StrictStr
    value: StrictStr


class CompletionReference(BaseModel):
    model_config = ConfigDict(extra="allow", defer_build=True)
    type: StrictStr
    name: StrictStr | None = None
    uri: StrictStr | None = None


class CompletionContext(BaseModel):
    model_config = ConfigDict(defer_build=True)

    arguments: dict[str, StrictStr] | None = None


class CompleteParams(Params):
    ref: CompletionReference
    argument: CompletionArgument
    context: CompletionContext | None = None


class TaskIdParams(Params):
    task_id: StrictStr = Field(alias="taskId", min_length=1, max_length=MAX_TASK_ID_CHARS)


class UpdateTaskParams(TaskIdParams):
    input_responses: dict[str, Any] = Field(alias="inputResponses")
