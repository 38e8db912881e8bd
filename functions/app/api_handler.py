"""Lambda entry point of the MCP endpoint (API Gateway HTTP API payload 2.0 or a Function URL)."""

import os
import sys
import types

# No pydantic plugins ship in the asset: skip pydantic's entry-point scan of every installed
# distribution at the first model (~31 M instructions of cold start here; see bench/README.md).
# An explicit PYDANTIC_DISABLE_PLUGINS setting still wins.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
if os.environ["PYDANTIC_DISABLE_PLUGINS"] in ("__all__", "1", "true") and "pydantic.plugin._loader" not in sys.modules:
    # With plugins disabled pydantic's loader answers "no plugins", but importing it still imports
    # importlib.metadata (~17 ms of a cold start). This stand-in gives the same answer without it.
    _no_plugins = types.ModuleType("pydantic.plugin._loader")
    _no_plugins.get_plugins = lambda: ()  # type: ignore[attr-defined]
    sys.modules["pydantic.plugin._loader"] = _no_plugins

from app.composition import handle_api_event as lambda_handler

__all__ = ["lambda_handler"]
