"""The tool-authoring API: everything a tool, prompt or resource module imports.

    from mcp_runtime.fastmcp import Context, FastMCP   # the way this template teaches (docs/fastmcp.md)
    from mcp_runtime import ToolContext, ToolError, tool  # the native decorator: the same builder

The rest of the package (transport, server, sealing, the task side, the AWS helpers) is the runtime
itself; its modules may change without notice.

The names load on first use (PEP 562), so `import mcp_runtime` costs nothing on a cold start and a
function that only needs, say, the AWS helpers does not import pydantic through this file. Type
checkers read the imports below.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .catalog import Catalog
    from .components import (
        ToolMode,  # noqa: F401 (deprecated: read through __getattr__, which warns)
        tool,
    )
    from .cursors import InvalidCursor
    from .errors import HandleConflict, HandleNotFound, InternalError, McpError, MissingRequiredClientCapability
    from .handles import Handle
    from .mrtr import Asker, Elicited, InputRequest, elicitation_request, roots_request, sampling_request
    from .tasks.durable import Callback, CallbackFailed, CallbackTimedOut
    from .tools import (
        Registry,
        ToolContext,
        ToolError,
        ToolResult,
        audio,
        embedded_text,
        image,
        text,
    )
    from .tools import Registry as ToolRegistry  # noqa: F401 (deprecated: read through __getattr__, which warns)

# name -> the module that defines it
_EXPORTS: dict[str, str] = {
    # a tool: the decorator (mcp_runtime.components, the one builder), what it receives and returns
    "tool": ".components",
    "ToolContext": ".tools",
    "ToolError": ".tools",
    "ToolResult": ".tools",
    "Registry": ".tools",
    "text": ".tools",
    "image": ".tools",
    "audio": ".tools",
    "embedded_text": ".tools",
    # asking the client mid-call (elicitation, sampling, roots)
    "Asker": ".mrtr",
    "Elicited": ".mrtr",
    "InputRequest": ".mrtr",
    "elicitation_request": ".mrtr",
    "sampling_request": ".mrtr",
    "roots_request": ".mrtr",
    # durable tasks: an external system's callback
    "Callback": ".tasks.durable",
    "CallbackFailed": ".tasks.durable",
    "CallbackTimedOut": ".tasks.durable",
    # handles and the caller's task history
    "Handle": ".handles",
    "HandleConflict": ".errors",
    "HandleNotFound": ".errors",
    "InvalidCursor": ".cursors",
    # prompts and resources
    "Catalog": ".catalog",
    # protocol errors a tool may raise on purpose
    "McpError": ".errors",
    "InternalError": ".errors",
    "MissingRequiredClientCapability": ".errors",
}

# Releases 1.0.0's and 2.0.0's names, deprecated until 3.0.0: each read warns what to write instead
# (`mcp_runtime.components.DEPRECATED_NAMES`), so they are never cached below.
_DEPRECATED: tuple[str, ...] = ("ToolMode", "ToolRegistry")

__all__ = [
    "Asker",
    "Callback",
    "CallbackFailed",
    "CallbackTimedOut",
    "Catalog",
    "Elicited",
    "Handle",
    "HandleConflict",
    "HandleNotFound",
    "InputRequest",
    "InternalError",
    "InvalidCursor",
    "McpError",
    "MissingRequiredClientCapability",
    "Registry",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "audio",
    "elicitation_request",
    "embedded_text",
    "image",
    "roots_request",
    "sampling_request",
    "text",
    "tool",
]


def __getattr__(name: str) -> Any:
    if name in _DEPRECATED:
        return import_module(".components", __name__).deprecated_name(__name__, name)
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
