"""The AWS side of the local stack: an embedded moto server that executes state machines for real.

moto executes Step Functions definitions when its config says so, but its Lambda backend cannot run
code without Docker: its Invoke is patched to dispatch to the function's invoker. For the local
stack, that is the function's own execution environments (`local_stack.runtime`); for component
tests, a handler called in-process. An invoker's function error becomes an `Unhandled` function
error whose body carries `errorType`, exactly what the interpreter's Catch/Retry match on.

That patch and the others that bring moto in line with AWS, so the function code needs no local
switch (StopExecution during a callback wait, answered task tokens, `$$.State.EnteredTime`, atomic
conditional writes, stream iterators, execution status changes reported to the listeners of
`on_execution_status`, as AWS reports them to EventBridge: `local_stack.event_delivery`), are in
`local_stack.moto_patches` (group "emulation"), which also holds the moto version guard.

moto's admin API (`/moto-api/...`: reset, which wipes every resource; the recorder, which hands out every
request with its arguments; the dashboard) answers only a request carrying the stack's own secret in
`X-Local-Stack-Secret` (`EmbeddedAws.admin_secret`; the run file holds it, readable by its user only):
the port is on loopback, where every local user can connect.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import secrets
import threading
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from local_stack import moto_patches
from local_stack.clients import aws_client
from local_stack.moto_patches import Invoker, LambdaThrottled, function_name_of

__all__ = [
    "ADMIN_SECRET_HEADER",
    "DUMMY_CREDENTIALS",
    "MOTO_CONFIG",
    "REGION",
    "EmbeddedAws",
    "InProcessLambdaContext",
    "Invoker",
    "LambdaThrottled",
    "function_name_of",
    "in_process",
    "install_patches",
    "on_execution_status",
    "register_function",
    "register_invoker",
    "start_embedded_aws",
    "unregister_function",
]

REGION: Final = "us-east-1"
DUMMY_CREDENTIALS: Final[dict[str, str]] = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
MOTO_CONFIG: Final[dict[str, Any]] = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
}

ADMIN_SECRET_HEADER: Final = "X-Local-Stack-Secret"
ADMIN_API_REFUSED: Final = (
    b'{"message": "moto\'s admin API answers the local stack\'s own callers only: send its secret in '
    + ADMIN_SECRET_HEADER.encode()
    + b' (the run file build/local-stack/run/<port>.json holds it)"}'
)

LambdaHandler = Callable[[dict[str, Any], Any], Any]


class InProcessLambdaContext:
    """Enough of the Lambda context object for handlers called in-process by component tests."""

    def __init__(self, function_name: str) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:{function_name}"
        self.memory_limit_in_mb = 512
        self.aws_request_id = "local"
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "local"

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def in_process(function_name: str, handler: LambdaHandler) -> Invoker:
    """An invoker that calls `handler` in this process (component tests only: one environment for all)."""

    def invoke(body: bytes, headers: dict[str, str]) -> tuple[bytes, str | None]:
        raw = body.decode() if body else ""
        event = json.loads(raw) if raw else {}
        try:
            result = handler(event, InProcessLambdaContext(function_name))
        except Exception as exc:  # the runtime reports any exception as an Unhandled function error
            return json.dumps({"errorType": type(exc).__name__, "errorMessage": str(exc)}).encode(), "Unhandled"
        return json.dumps(result).encode(), None

    return invoke


def register_invoker(function_name: str, invoker: Invoker) -> None:
    install_patches()
    moto_patches.set_invoker(function_name, invoker)


def register_function(function_name: str, handler: LambdaHandler) -> None:
    register_invoker(function_name, in_process(function_name, handler))


def unregister_function(function_name: str) -> None:
    moto_patches.set_invoker(function_name, None)


def on_execution_status(listener: Callable[[Any], None]) -> Callable[[], None]:
    """Call `listener(execution)` at each status change of any execution; returns the unsubscribe."""
    install_patches()
    return moto_patches.on_execution_status(listener)


def install_patches() -> None:
    """moto brought in line with AWS for the local stack (`local_stack.moto_patches`, group "emulation")."""
    moto_patches.apply("emulation")


@dataclass
class EmbeddedAws:
    """A moto server on a free loopback port, configured to execute state machines."""

    server: Any
    endpoint: str
    admin_secret: str = ""
    _clients: dict[str, Any] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        """One cached administrator client per service (building a boto3 client costs tens of milliseconds)."""
        if service not in self._clients:
            self._clients[service] = aws_client(
                service, endpoint=self.endpoint, region=REGION, credentials=DUMMY_CREDENTIALS
            )
        return self._clients[service]

    def use_credentials(self, credentials: dict[str, str]) -> None:
        """Sign this object's later calls with these credentials (the administrator, once IAM is enforced)."""
        self._clients = {}
        self.client = lambda service: self._clients.setdefault(  # type: ignore[method-assign]
            service, aws_client(service, endpoint=self.endpoint, region=REGION, credentials=credentials)
        )

    def configure(self) -> None:
        """(Re)apply moto's config; moto keeps it process-wide, so anything resetting it needs this again."""
        request = urllib.request.Request(
            f"{self.endpoint}/moto-api/config",
            data=json.dumps(MOTO_CONFIG).encode(),
            headers={"content-type": "application/json", ADMIN_SECRET_HEADER: self.admin_secret},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def reset(self) -> None:
        """Forget every resource (moto's state is process-wide), then configure again."""
        request = urllib.request.Request(
            f"{self.endpoint}/moto-api/reset", data=b"", headers={ADMIN_SECRET_HEADER: self.admin_secret}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
        self.configure()

    def stop(self) -> None:
        self.server.stop()


class _GuardedMotoServer:
    """moto's server on a loopback port, its admin API answering only requests with `secret`."""

    def __init__(self, secret: str) -> None:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        class Guarded(DomainDispatcherApplication):
            def get_application(self, environ: dict[str, Any]) -> Any:
                application = super().get_application(environ)
                admin = getattr(application, "service", None) == "moto_api"
                given = str(environ.get("HTTP_X_LOCAL_STACK_SECRET", ""))
                if admin and not hmac.compare_digest(given.encode(), secret.encode()):
                    return _refuse_admin_request
                return application

        self._server = make_server(
            "127.0.0.1", 0, Guarded(create_backend_app), threaded=True, request_handler=MotoRequestHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, name="moto", daemon=True)
        self._thread.start()

    def get_host_and_port(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def _refuse_admin_request(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    start_response(
        "403 Forbidden", [("Content-Type", "application/json"), ("Content-Length", str(len(ADMIN_API_REFUSED)))]
    )
    return [ADMIN_API_REFUSED]


def start_embedded_aws() -> EmbeddedAws:
    """Start moto on a free loopback port and point its Step Functions interpreter at it (MOTO_PORT)."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per AWS call otherwise
    secret = secrets.token_urlsafe(32)
    server = _GuardedMotoServer(secret)
    host, port = server.get_host_and_port()
    # The interpreter calls Lambda at http://localhost:$MOTO_PORT: without this every Task state fails.
    os.environ["MOTO_PORT"] = str(port)
    aws = EmbeddedAws(server, f"http://{host}:{port}", secret)
    install_patches()
    aws.configure()
    return aws
