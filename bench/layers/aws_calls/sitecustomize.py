"""A local layer that counts every AWS call a function makes (LOCAL_LAYERS=bench/layers/aws_calls).

Each call is one JSON line in `calls/<function name>.jsonl` beside this file: the time, the
service and operation, its outcome (an error code or "ok") and the DynamoDB capacity moto reports
(ReturnConsumedCapacity is asked for on every DynamoDB call). Loaded at each function's start, as
Python's `site` loads any `sitecustomize` on the path.
"""

import json
import os
import pathlib
import threading
import time

_OUT = pathlib.Path(__file__).with_name("calls")
_LOCK = threading.Lock()


def _record(entry: dict) -> None:
    _OUT.mkdir(exist_ok=True)
    name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "unknown")
    with _LOCK, open(_OUT / f"{name}.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def _install() -> None:
    from botocore.client import BaseClient

    original = BaseClient._make_api_call

    def counted(self, operation_name, api_params):
        service = self.meta.service_model.service_name
        params = dict(api_params)
        if service == "dynamodb":
            params.setdefault("ReturnConsumedCapacity", "TOTAL")
        entry = {"time": time.time(), "call": f"{service}:{operation_name}", "outcome": "ok"}
        try:
            response = original(self, operation_name, params)
        except Exception as exc:
            # A timeout or connection error carries no response (None): it is named by its type.
            response = getattr(exc, "response", None) or {}
            entry["outcome"] = str(response.get("Error", {}).get("Code") or type(exc).__name__)
            _record(entry)
            raise
        consumed = response.get("ConsumedCapacity") if isinstance(response, dict) else None
        if isinstance(consumed, dict):
            entry["capacity"] = float(consumed.get("CapacityUnits") or 0)
        _record(entry)
        return response

    BaseClient._make_api_call = counted


_install()
