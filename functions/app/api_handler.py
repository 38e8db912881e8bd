"""Lambda entry point of the MCP endpoint (API Gateway HTTP API payload 2.0 or a Function URL)."""

import os

# No pydantic plugins ship in the asset: skip pydantic's entry-point scan of every installed
# distribution at the first model (~31 M instructions of cold start here; see bench/README.md).
# An explicit PYDANTIC_DISABLE_PLUGINS setting still wins.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from app.composition import handle_api_event as lambda_handler

__all__ = ["lambda_handler"]
