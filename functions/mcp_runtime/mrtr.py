"""Multi Round-Trip Requests: asking the client for input inside a result, and reading the answers.

A tool (or prompt, or resource) asks with `Asker.ask_many`/`elicit`/`sample`/`list_roots`. When an
answer is missing or malformed, the call ends with an `InputNeeded` signal that the runtime turns
into an `InputRequiredResult` whose sealed `requestState` carries every valid answer gathered so
far, the keys just asked and the tool's own scratch state. The retry re-runs the code from the top;
answered questions now return at once. The same code runs inside a durable task, where the
answers arrive through `tasks/update` instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from . import wire
from ._value import ValueObject
from .context import RequestMeta
from .errors import MissingRequiredClientCapability

ModelT = TypeVar("ModelT", bound=BaseModel)


class InputRequest(ValueObject):
    """One bare request object of an `inputRequests` map: `{method, params}`."""

    __slots__ = ("method", "params")
    method: str
    params: dict[str, Any]

    def __init__(self, method: str, params: dict[str, Any]) -> None:
        self.method = method
        self.params = params

    def to_wire(self) -> dict[str, Any]:
        return {"method": self.method, "params": self.params}


def elicitation_request(message: str, schema: type[BaseModel] | dict[str, Any]) -> InputRequest:
    requested = schema if isinstance(schema, dict) else flat_elicitation_schema(schema)
    return InputRequest(wire.INPUT_METHOD_ELICIT, {"mode": "form", "message": message, "requestedSchema": requested})


def sampling_request(prompt: str, max_tokens: int = 256, system_prompt: str | None = None) -> InputRequest:
    params: dict[str, Any] = {
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": max_tokens,
    }
    if system_prompt is not None:
        params["systemPrompt"] = system_prompt
    return InputRequest(wire.INPUT_METHOD_SAMPLING, params)


def roots_request() -> InputRequest:
    return InputRequest(wire.INPUT_METHOD_ROOTS, {})


def flat_elicitation_schema(model: type[BaseModel]) -> dict[str, Any]:
    """Elicitation schemas are flat objects of primitives; pydantic's titles are noise there."""
    cached = _flat_elicitation_schema(model)
    properties = {name: dict(prop) for name, prop in cached["properties"].items()}
    result: dict[str, Any] = {"type": "object", "properties": properties}
    if "required" in cached:
        result["required"] = list(cached["required"])
    return result


@lru_cache(maxsize=256)
def _flat_elicitation_schema(model: type[BaseModel]) -> dict[str, Any]:
    # Generated once per model and shared (bench/README.md: the warm path).
    schema = model.model_json_schema()
    properties = {}
    for name, prop in schema.get("properties", {}).items():
        properties[name] = {k: v for k, v in prop.items() if k != "title"}
    result: dict[str, Any] = {"type": "object", "properties": properties}
    if schema.get("required"):
        result["required"] = schema["required"]
    return result


class Elicited(ValueObject, Generic[ModelT]):
    """A validated elicitation answer. `content` is set only when the user accepted."""

    __slots__ = ("action", "content")
    action: Literal["accept", "decline", "cancel"]
    content: ModelT | None

    def __init__(self, action: Literal["accept", "decline", "cancel"], content: ModelT | None) -> None:
        self.action = action
        self.content = content

    @property
    def accepted(self) -> bool:
        return self.action == "accept"


class InputNeeded(Exception):
    """Control flow: the code asked for input that has not arrived (or arrived malformed)."""

    def __init__(self, requests: dict[str, InputRequest]) -> None:
        super().__init__(", ".join(requests))
        self.requests = requests


_REQUIRED_CAPABILITY = {
    wire.INPUT_METHOD_ELICIT: "elicitation",
    wire.INPUT_METHOD_SAMPLING: "sampling",
    wire.INPUT_METHOD_ROOTS: "roots",
}


def _valid_answer(request: InputRequest, answer: object, schema: type[BaseModel] | None) -> Any:
    """Return the parsed answer, or None when it does not have the shape its request calls for."""
    if not isinstance(answer, dict):
        return None
    if request.method == wire.INPUT_METHOD_ELICIT:
        return _valid_elicitation(answer, schema)
    if request.method == wire.INPUT_METHOD_SAMPLING:
        if answer.get("role") not in ("user", "assistant") or not isinstance(answer.get("model"), str):
            return None
        if not isinstance(answer.get("content"), dict | list):
            return None
        return answer
    if request.method == wire.INPUT_METHOD_ROOTS:
        roots = answer.get("roots")
        if not isinstance(roots, list) or not all(isinstance(r, dict) and isinstance(r.get("uri"), str) for r in roots):
            return None
        return roots
    return None


def _valid_elicitation(answer: object, schema: type[BaseModel] | None) -> Elicited[Any] | None:
    """An elicitation's answer (`ElicitResult`), or None when it is not one; accepted content is checked
    against `schema` strictly."""
    if not isinstance(answer, dict):
        return None
    action = answer.get("action")
    if action not in ("accept", "decline", "cancel"):
        return None
    if action != "accept":
        return Elicited(action, None)
    content = answer.get("content")
    if not isinstance(content, dict):
        return None
    if schema is None:
        return Elicited("accept", content)
    try:
        return Elicited("accept", schema.model_validate(content, strict=True))
    except ValidationError:
        return None


def _canonical_answer(request: InputRequest, raw: dict[str, Any], parsed: Any) -> Any:
    """What is carried into the next round: the validated answer, not whatever else the client sent."""
    if isinstance(parsed, Elicited):
        return _canonical_elicitation(parsed)
    if request.method == wire.INPUT_METHOD_ROOTS:
        return {"roots": [{k: v for k, v in root.items() if k in ("uri", "name")} for root in parsed]}
    return {k: v for k, v in raw.items() if k in ("role", "content", "model", "stopReason")}


def _canonical_elicitation(parsed: Elicited[Any]) -> dict[str, Any]:
    if parsed.content is None:
        return {"action": parsed.action}
    content = parsed.content.model_dump(mode="json") if isinstance(parsed.content, BaseModel) else parsed.content
    return {"action": parsed.action, "content": content}


class Asker:
    """Gives code the answers it asked for, or collects what is still missing."""

    __slots__ = ("accepted_raw", "answers", "meta")
    meta: RequestMeta
    answers: dict[str, Any]
    accepted_raw: dict[str, Any]

    def __init__(self, meta: RequestMeta, answers: dict[str, Any] | None = None) -> None:
        self.meta = meta
        self.answers = {} if answers is None else answers
        # Keys answered with a well-formed value; only these are carried into the next round.
        self.accepted_raw = {}

    def ask_many(
        self, requests: Mapping[str, InputRequest], schemas: Mapping[str, type[BaseModel]] | None = None
    ) -> dict[str, Any]:
        """Answers to every request, or `InputNeeded` listing the ones still missing."""
        schemas = schemas or {}
        results: dict[str, Any] = {}
        missing: dict[str, InputRequest] = {}
        for key, request in requests.items():
            self._require_capability(request.method)
            parsed = _valid_answer(request, self.answers.get(key), schemas.get(key))
            if parsed is None:
                missing[key] = request
            else:
                self.accepted_raw[key] = _canonical_answer(request, self.answers[key], parsed)
                results[key] = parsed
        if missing:
            raise InputNeeded(missing)
        return results

    def elicit(self, key: str, message: str, schema: type[ModelT]) -> Elicited[ModelT]:
        """`ask_many` of one elicitation, with the request built only when it has to be sent."""
        self._require_capability(wire.INPUT_METHOD_ELICIT)
        answer = _valid_elicitation(self.answers.get(key), schema)
        if answer is None:
            raise InputNeeded({key: elicitation_request(message, schema)})
        self.accepted_raw[key] = _canonical_elicitation(answer)
        return answer

    def sample(self, key: str, prompt: str, max_tokens: int = 256) -> dict[str, Any]:
        answer: dict[str, Any] = self.ask_many({key: sampling_request(prompt, max_tokens)})[key]
        return answer

    def list_roots(self, key: str) -> list[dict[str, Any]]:
        answer: list[dict[str, Any]] = self.ask_many({key: roots_request()})[key]
        return answer

    def _require_capability(self, method: str) -> None:
        capability = _REQUIRED_CAPABILITY.get(method)
        if capability is None:
            raise ValueError(f"{method} cannot be asked of a client")
        if not self.meta.declares(capability):
            raise MissingRequiredClientCapability(f"This request needs the {capability} capability", {capability: {}})
