"""`Image`, `Audio` and `File` as FastMCP's tools return them, and FastMCP's shaping of a tool's result."""

from __future__ import annotations

import base64
import dataclasses
import json
import mimetypes
from pathlib import Path
from typing import Any, Final

from .tools import ToolResult, audio, embedded_text, image, text

WRAP_KEY: Final = "x-fastmcp-wrap-result"
WRAP_META: Final = {"fastmcp": {"wrap_result": True}}


class _Media:
    """Data given inline or as a path, with a MIME type from `format`, the path's suffix, or a default."""

    kind: str = "file"
    default_mime: str = "application/octet-stream"

    def __init__(
        self,
        path: str | Path | None = None,
        data: bytes | None = None,
        format: str | None = None,
        annotations: Any = None,
        name: str | None = None,
    ) -> None:
        if (path is None) == (data is None):
            raise ValueError("Either path or data must be provided, not both")
        self.path = Path(path) if path is not None else None
        self.data = data
        self._format = format
        self.annotations = annotations
        self.name = name

    def _bytes(self) -> bytes:
        if self.data is not None:
            return self.data
        assert self.path is not None
        return self.path.read_bytes()

    def _mime_type(self) -> str:
        if self._format:
            return self._format if "/" in self._format else f"{self.kind}/{self._format.lower()}"
        if self.path is not None:
            guessed = mimetypes.guess_type(self.path.name)[0]
            if guessed:
                return guessed
        return self.default_mime

    def _base64(self) -> str:
        return base64.b64encode(self._bytes()).decode("ascii")


class Image(_Media):
    """An image a tool returns (FastMCP's `fastmcp.utilities.types.Image`)."""

    kind = "image"
    default_mime = "image/png"

    def to_image_content(self) -> dict[str, Any]:
        return image(self._base64(), self._mime_type())


class Audio(_Media):
    """Audio a tool returns (FastMCP's `fastmcp.utilities.types.Audio`)."""

    kind = "audio"
    default_mime = "audio/wav"

    def to_audio_content(self) -> dict[str, Any]:
        return audio(self._base64(), self._mime_type())


class File(_Media):
    """A file a tool returns, as an embedded resource (FastMCP's `fastmcp.utilities.types.File`)."""

    def to_resource_content(self) -> dict[str, Any]:
        name = self.name or (self.path.name if self.path is not None else "resource")
        uri = f"file:///{name}.{self._format}" if self._format and "." not in name else f"file:///{name}"
        mime = self._mime_type()
        body = self._bytes()
        if mime.startswith("text/"):
            try:
                return embedded_text(uri, body.decode("utf-8"), mime)
            except UnicodeDecodeError:
                pass
        return {"type": "resource", "resource": {"uri": uri, "mimeType": mime, "blob": base64.b64encode(body).decode()}}


def _is_content_block(value: Any) -> bool:
    return isinstance(value, _Media) or (
        isinstance(value, dict) and value.get("type") in ("text", "image", "audio", "resource", "resource_link")
    )


def _block(value: Any) -> dict[str, Any]:
    if isinstance(value, Image):
        return value.to_image_content()
    if isinstance(value, Audio):
        return value.to_audio_content()
    if isinstance(value, File):
        return value.to_resource_content()
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        return text(value)
    return text(_compact_json(jsonable(value)))


def jsonable(value: Any) -> Any:
    """The JSON value of what a tool returned: models, dataclasses, TypedDicts, sets, dates and the rest."""
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value)


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def shape_result(produced: Any, output_schema: dict[str, Any] | None, wraps: bool) -> ToolResult:
    """What FastMCP 4.1 answers for a value a tool returned (content, and structured content when the
    tool has an output schema or returned an object); `wraps`: the output schema wraps it in `result`."""
    if isinstance(produced, ToolResult):
        return produced
    blocks = isinstance(produced, list | tuple) and any(_is_content_block(item) for item in produced)
    if produced is None or isinstance(produced, str) or _is_content_block(produced) or blocks:
        content = _content_of(produced)
        if wraps:
            return ToolResult(content, structured={"result": jsonable(produced)}, meta=dict(WRAP_META))
        return ToolResult(content)
    value = jsonable(produced)  # once: the text and the structured content are the same JSON
    content = [text(_compact_json(value))]
    if wraps:
        return ToolResult(content, structured={"result": value}, meta=dict(WRAP_META))
    if isinstance(value, dict) and (output_schema is not None or _is_object_value(produced)):
        return ToolResult(content, structured=value)
    return ToolResult(content)


def _is_object_value(produced: Any) -> bool:
    from pydantic import BaseModel

    return isinstance(produced, dict | BaseModel) or (
        dataclasses.is_dataclass(produced) and not isinstance(produced, type)
    )


def _content_of(produced: Any) -> list[dict[str, Any]]:
    if produced is None:
        return []
    if isinstance(produced, str):
        return [text(produced)]
    if _is_content_block(produced):
        return [_block(produced)]
    if isinstance(produced, list | tuple) and any(_is_content_block(item) for item in produced):
        return [_block(item) for item in produced]
    return [text(_compact_json(jsonable(produced)))]
