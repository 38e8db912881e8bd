"""Fault injection and AWS-call counting for the local stack's functions: a `LOCAL_LAYERS` layer.

At each function's start this hooks every botocore client the function builds (`before-send`, the
last step before a request leaves). Each request is appended to `calls.jsonl` beside this file, and
a rule of `scenario.json` that matches it acts in its place:
- `throttle`: the service's throttling answer (nothing applied);
- `error`: an HTTP 500 answer (nothing applied);
- `timeout`: the read times out before anything is sent;
- `lost`: the request is sent and applied, then the answer is lost (a read timeout);
- `crash`: the interpreter ends at once, as a killed invocation.
A rule matches on the function (part of its name), the operation ("DynamoDB.UpdateItem"), and text
the request body contains; it lets `skip` matches pass, then fires `times` times (or, with
`probability`, on the matches a seeded hash picks). Counts are shared by a function's environments
through `state.json`, under a file lock. The test tier writes the scenario (`tests/local_stack/faults.py`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "scenario.json"
STATE = HERE / "state.json"
CALLS = HERE / "calls.jsonl"
LOCK = HERE / "lock"
FUNCTION = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "")

_THROTTLING = {
    "dynamodb": (
        "ProvisionedThroughputExceededException",
        "The level of configured provisioned throughput was exceeded",
    ),
    "sfn": ("ThrottlingException", "Rate exceeded"),
    "s3": ("SlowDown", "Please reduce your request rate."),
}
_cache: dict[str, Any] = {"mtime": None, "rules": []}


def _rules() -> list[dict[str, Any]]:
    try:
        mtime = SCENARIO.stat().st_mtime_ns
    except FileNotFoundError:
        return []
    if mtime != _cache["mtime"]:
        _cache["rules"] = json.loads(SCENARIO.read_text(encoding="utf-8")).get("rules", [])
        _cache["mtime"] = mtime
    return list(_cache["rules"])


def _matches(rule: dict[str, Any], operation: str, body: str) -> bool:
    if rule.get("function") and rule["function"] not in FUNCTION:
        return False
    if rule.get("operation") and rule["operation"] != operation:
        return False
    return all(text in body for text in rule.get("contains", ()))


def _picked(rule: dict[str, Any], index: int) -> bool:
    if "probability" in rule:
        digest = hashlib.sha256(f"{rule.get('seed', 0)}:{rule['id']}:{index}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < float(rule["probability"])
    skip, times = int(rule.get("skip", 0)), int(rule.get("times", 1))
    return skip <= index < skip + times


def _decide(operation: str, body: str) -> str | None:
    """The fault to inject for this request (None to send it), counting matches across environments."""
    rules = [rule for rule in _rules() if _matches(rule, operation, body)]
    fault = None
    with LOCK.open("a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            state = json.loads(STATE.read_text(encoding="utf-8")) if STATE.exists() else {}
            for rule in rules:
                index = state.get(rule["id"], 0)
                state[rule["id"]] = index + 1
                if fault is None and _picked(rule, index):
                    fault = str(rule["fault"])
            if rules:
                STATE.write_text(json.dumps(state), encoding="utf-8")
            with CALLS.open("a", encoding="utf-8") as calls:
                record = {"function": FUNCTION, "operation": operation, "fault": fault, "at": time.time()}
                calls.write(json.dumps(record) + "\n")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return fault


class _Body:
    def __init__(self, content: bytes) -> None:
        self._content = content

    def stream(self, **_: Any) -> Any:
        yield self._content


def _error_response(request: Any, service: str, fault: str) -> Any:
    from botocore.awsrequest import AWSResponse

    if fault == "throttle":
        code, message = _THROTTLING.get(service, ("ThrottlingException", "Rate exceeded"))
        status = 503 if service == "s3" else 400
    else:
        code, message, status = "InternalServerError", "Internal server error", 500
    if service == "s3":
        body = f"<Error><Code>{code}</Code><Message>{message}</Message></Error>".encode()
        headers = {"content-type": "application/xml"}
    else:
        body = json.dumps({"__type": code, "message": message}).encode()
        headers = {"content-type": "application/x-amz-json-1.0", "x-amzn-errortype": code}
    return AWSResponse(request.url, status, headers, _Body(body))


def _on_send(request: Any, event_name: str = "", **_: Any) -> Any:
    _, service, operation_name = [*event_name.split("."), "", ""][:3]
    from botocore.exceptions import ReadTimeoutError

    raw = request.body
    # JSON services send bytes; S3 uploads may stream a file-like body, which is left unread.
    body = raw if isinstance(raw, str) else raw.decode("utf-8", "replace") if isinstance(raw, bytes) else ""
    operation = f"{_SERVICE_NAMES.get(service, service)}.{operation_name}"
    fault = _decide(operation, body)
    if fault is None:
        return None
    if fault in ("throttle", "error"):
        return _error_response(request, service, fault)
    if fault == "timeout":
        raise ReadTimeoutError(endpoint_url=request.url)
    if fault == "lost":
        from botocore.httpsession import URLLib3Session

        URLLib3Session().send(request)  # AWS applies it...
        raise ReadTimeoutError(endpoint_url=request.url)  # ...and its answer never arrives
    if fault == "crash":
        os._exit(137)
    raise ValueError(f"unknown fault {fault!r}")


_SERVICE_NAMES = {"dynamodb": "DynamoDB", "sfn": "SFN", "s3": "S3", "dynamodb-streams": "DynamoDBStreams"}


def _install() -> None:
    import botocore.session

    original = botocore.session.Session.create_client

    def create_client(self: Any, *args: Any, **kwargs: Any) -> Any:
        client = original(self, *args, **kwargs)
        client.meta.events.register("before-send", _on_send)
        return client

    botocore.session.Session.create_client = create_client  # type: ignore[method-assign]


_install()
