"""Lambda entry point of the MCP endpoint (API Gateway HTTP API payload 2.0 or a Function URL)."""

from app.composition import handle_api_event as lambda_handler

__all__ = ["lambda_handler"]
