"""Inside one local Lambda execution environment: init, then one invocation at a time, like Lambda's runtime.

Started by `local_stack.runtime` as `python -I -S _bootstrap.py CONFIG IN_FD OUT_FD` with exactly the
function's environment. `-I -S`: no site-packages, no PYTHONPATH, no script directory; the import
path is the asset (LAMBDA_TASK_ROOT), then the layers, then what the Lambda runtime provides, then
the standard library. A `sitecustomize` module found on that path is imported first, as Python's
`site` would. This file imports nothing but the standard library.

The parent speaks JSON lines on two pipes: invocations in, results out. The function's own stdout
and stderr are its log stream.
"""

import importlib
import importlib.util
import json
import os
import resource
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, cast


class LambdaContext:
    """The context object the Python runtime passes to a handler."""

    def __init__(self, config: dict[str, Any], request_id: str, deadline_ms: float) -> None:
        self.function_name = config["functionName"]
        self.function_version = config.get("functionVersion", "$LATEST")
        self.invoked_function_arn = config["functionArn"]
        self.memory_limit_in_mb = str(config["memoryMb"])
        self.aws_request_id = request_id
        self.log_group_name = config["logGroupName"]
        self.log_stream_name = config["logStreamName"]
        self.identity: Any = None
        self.client_context: Any = None
        self._deadline_ms = deadline_ms

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int(self._deadline_ms - time.time() * 1000))


def _error_payload(exc: BaseException, request_id: str) -> dict[str, Any]:
    return {
        "errorMessage": str(exc),
        "errorType": type(exc).__name__,
        "requestId": request_id,
        "stackTrace": traceback.format_list(traceback.extract_tb(exc.__traceback__))[1:],
    }


def _log_error(error_type: str, message: str, exc: BaseException) -> None:
    # What the Python runtime writes to the log stream for an unhandled error.
    lines = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    sys.stderr.write(f"[ERROR] {error_type}: {message}\n{lines}")
    sys.stderr.flush()


def _init(config: dict[str, Any]) -> tuple[Callable[[Any, Any], Any] | None, dict[str, Any] | None]:
    sys.path[:0] = [config["taskRoot"], *config["layers"], config["runtimeDir"]]
    if importlib.util.find_spec("sitecustomize") is not None:
        importlib.import_module("sitecustomize")
    module_name, _, function_name = config["handler"].rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # what Lambda reports for a handler module that fails to import
        message = f"Unable to import module '{module_name}': {exc}"
        _log_error("Runtime.ImportModuleError", message, exc)
        return None, {"errorMessage": message, "errorType": "Runtime.ImportModuleError", "stackTrace": []}
    handler = getattr(module, function_name, None)
    if not callable(handler):
        message = f"Handler '{function_name}' missing on module '{module_name}'"
        sys.stderr.write(f"[ERROR] Runtime.HandlerNotFound: {message}\n")
        return None, {"errorMessage": message, "errorType": "Runtime.HandlerNotFound", "stackTrace": []}
    return cast(Callable[[Any, Any], Any], handler), None


def main() -> None:
    config = json.loads(sys.argv[1])
    inbox = os.fdopen(int(sys.argv[2]), "r", encoding="utf-8")
    outbox = os.fdopen(int(sys.argv[3]), "w", encoding="utf-8")
    for stream in (sys.stdout, sys.stderr):
        cast(Any, stream).reconfigure(line_buffering=True)
    os.chdir(config["taskRoot"])

    def send(message: dict[str, Any]) -> None:
        outbox.write(json.dumps(message) + "\n")
        outbox.flush()

    started = time.monotonic()
    handler, init_error = _init(config)
    init_ms = (time.monotonic() - started) * 1000
    send({"kind": "init-error", "error": init_error} if init_error else {"kind": "ready", "initMs": init_ms})
    if init_error:
        return
    assert handler is not None
    for line in inbox:
        invocation = json.loads(line)
        request_id = invocation["requestId"]
        os.environ["_X_AMZN_TRACE_ID"] = invocation["traceId"]
        context = LambdaContext(config, request_id, invocation["deadlineMs"])
        try:
            event = json.loads(invocation["payload"]) if invocation["payload"] else {}
            result = handler(event, context)
            try:
                payload = json.dumps(result)
            except (TypeError, ValueError) as exc:
                message = f"Unable to marshal response: {exc}"
                sys.stderr.write(f"[ERROR] Runtime.MarshalError: {message}\n")
                error = {"errorMessage": message, "errorType": "Runtime.MarshalError", "requestId": request_id}
                send({"kind": "error", "payload": json.dumps(error), "maxRssKb": _max_rss_kb()})
                continue
            send({"kind": "result", "payload": payload, "maxRssKb": _max_rss_kb()})
        except Exception as exc:
            _log_error(type(exc).__name__, str(exc), exc)
            send({"kind": "error", "payload": json.dumps(_error_payload(exc, request_id)), "maxRssKb": _max_rss_kb()})


def _max_rss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


if __name__ == "__main__":
    main()
