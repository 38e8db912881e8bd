"""Local Lambda execution environments: each function in interpreters of its own, as Lambda runs it.

A `FunctionPool` keeps a few warm environments per function (Lambda reuses environments too): each
is a fresh interpreter (`_bootstrap.py`) with the function's handler string, its template
environment plus what the Lambda runtime sets, the credentials of its own role, and its import path
(the asset, the layers, what the runtime provides). An invocation past the function's timeout is
killed and answered with the error Lambda reports for a timeout; an environment that exits mid-
invocation is answered with Lambda's exit error; one that used more memory than the function has is
answered as out of memory. Each environment serves one invocation at a time.

Concurrency is Lambda's (`ConcurrencyLimits`): a function with reserved concurrency runs at most that
many invocations at once, the others share what the account's limit leaves; one more is throttled
(`LambdaThrottled`, which the callers answer as Lambda does: 429 TooManyRequestsException). Below
that limit an invocation waits for one of the function's `max_environments` interpreters (a limit
of this machine, not of Lambda).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from local_stack.aws import LambdaThrottled
from local_stack.code import FunctionCode

BOOTSTRAP: Final = Path(__file__).resolve().parent / "_bootstrap.py"
INIT_TIMEOUT_SECONDS: Final = 10.0  # Lambda's init phase limit
# Lambda's synchronous invocation limits (request and response payloads).
MAX_PAYLOAD_BYTES: Final = 6_291_456
DEFAULT_MAX_ENVIRONMENTS: Final = 8
# An account's default concurrency limit (a young account's can be far lower: LOCAL_LAMBDA_ACCOUNT_CONCURRENCY).
DEFAULT_ACCOUNT_CONCURRENCY: Final = 1000
MEMORY_WATCH_SECONDS: Final = 0.05
PYTHON_RUNTIME: Final = "python3.13"

log = logging.getLogger(__name__)

LogSink = Callable[[str, str], None]  # (function name, one line of its log stream)


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    """One function as the template declares it, with every value resolved."""

    logical_id: str
    name: str
    arn: str
    handler: str
    runtime: str
    timeout_seconds: int
    memory_mb: int
    environment: dict[str, str]
    role_arn: str
    log_group_name: str
    tracing_active: bool = False
    # ReservedConcurrentExecutions: at most this many at once (None: the account's unreserved pool).
    reserved_concurrency: int | None = None


@dataclass(frozen=True, slots=True)
class InvocationResult:
    payload: bytes
    # None, or "Unhandled" as Lambda's `X-Amz-Function-Error` says for a failed invocation.
    function_error: str | None = None
    request_id: str = ""
    duration_ms: float = 0.0

    def json(self) -> Any:
        return json.loads(self.payload) if self.payload else None


class PayloadTooLarge(Exception):
    """The invocation's request payload is over Lambda's 6 MB limit (RequestEntityTooLargeException)."""


def lambda_environment(
    spec: FunctionSpec,
    code: FunctionCode,
    credentials: Mapping[str, str],
    *,
    region: str,
    additions: Mapping[str, str],
) -> dict[str, str]:
    """The function's environment: the template's variables, then what the Lambda runtime sets,
    then the local additions (where AWS is, and the few documented local-only settings)."""
    runtime_set = {
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        "AWS_EXECUTION_ENV": f"AWS_Lambda_{spec.runtime}",
        "AWS_LAMBDA_FUNCTION_NAME": spec.name,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_mb),
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
        "AWS_LAMBDA_LOG_GROUP_NAME": spec.log_group_name,
        "AWS_LAMBDA_LOG_STREAM_NAME": time.strftime("%Y/%m/%d/[$LATEST]") + uuid.uuid4().hex,
        "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
        "LAMBDA_TASK_ROOT": str(code.task_root),
        "LAMBDA_RUNTIME_DIR": str(code.runtime_dir),
        "_HANDLER": spec.handler,
        "LANG": "en_US.UTF-8",
        "TZ": ":UTC",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        **credentials,
    }
    if spec.tracing_active:
        runtime_set.update(
            AWS_XRAY_DAEMON_ADDRESS="169.254.79.129:2000",
            _AWS_XRAY_DAEMON_ADDRESS="169.254.79.129",
            _AWS_XRAY_DAEMON_PORT="2000",
        )
    return {**spec.environment, **runtime_set, **additions}


class _Environment:
    """One execution environment: an interpreter that has run the function's init."""

    def __init__(
        self,
        spec: FunctionSpec,
        code: FunctionCode,
        layers: Sequence[Path],
        env: Mapping[str, str],
        sink: LogSink,
    ) -> None:
        self.spec = spec
        self.sink = sink
        self.generation = 0  # the pool's code generation it was started on (`FunctionPool.reload`)
        self.init_error: dict[str, Any] | None = None
        self.init_ms = 0.0
        child_in, self._to_child = os.pipe()
        self._from_child, child_out = os.pipe()
        config = {
            "handler": spec.handler,
            "taskRoot": str(code.task_root),
            "layers": [str(layer) for layer in layers],
            "runtimeDir": str(code.runtime_dir),
            "functionName": spec.name,
            "functionArn": spec.arn,
            "memoryMb": spec.memory_mb,
            "logGroupName": spec.log_group_name,
            "logStreamName": env.get("AWS_LAMBDA_LOG_STREAM_NAME", ""),
        }
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-S", str(BOOTSTRAP), json.dumps(config), str(child_in), str(child_out)],
            env=dict(env),
            cwd=str(code.task_root),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(child_in, child_out),
            start_new_session=True,  # a terminal's Ctrl-C is the stack's to handle, not each interpreter's
        )
        os.close(child_in)
        os.close(child_out)
        self._writer: IO[str] = os.fdopen(self._to_child, "w", encoding="utf-8")
        self._reader: IO[str] = os.fdopen(self._from_child, "r", encoding="utf-8")
        assert self.process.stdout is not None
        threading.Thread(target=self._pump_logs, args=(self.process.stdout,), daemon=True).start()
        ready = self._receive(INIT_TIMEOUT_SECONDS)
        if ready is None or ready is _TIMED_OUT:
            self.init_error = {
                "errorType": "Sandbox.Timedout" if ready is _TIMED_OUT else "Runtime.ExitError",
                "errorMessage": "Init failed: the runtime did not start",
            }
            self.kill()
        elif ready.get("kind") == "init-error":
            self.init_error = ready["error"]
            self.kill()
        else:
            self.init_ms = float(ready.get("initMs") or 0.0)

    def _pump_logs(self, stream: IO[bytes]) -> None:
        for raw in stream:
            self.sink(self.spec.name, raw.decode("utf-8", "replace").rstrip("\n"))

    def _receive(self, timeout: float) -> dict[str, Any] | None:
        """The next message; None when the child ended first; `_TIMED_OUT` when `timeout` passed first."""
        readable, _, _ = select.select([self._reader], [], [], max(0.0, timeout))
        if not readable:
            return _TIMED_OUT
        line = self._reader.readline()
        if not line:
            return None
        message: dict[str, Any] = json.loads(line)
        return message

    @property
    def alive(self) -> bool:
        return self.init_error is None and self.process.poll() is None

    def invoke(self, request_id: str, payload: bytes, timeout_seconds: float) -> tuple[InvocationResult, bool]:
        """The result, and whether this environment can serve again."""
        deadline_ms = time.time() * 1000 + timeout_seconds * 1000
        trace_id = f"Root=1-{int(time.time()):08x}-{uuid.uuid4().hex[:24]};Sampled=0"
        message = {
            "requestId": request_id,
            "deadlineMs": deadline_ms,
            "traceId": trace_id,
            "payload": payload.decode("utf-8"),
        }
        started = time.monotonic()
        try:
            self._writer.write(json.dumps(message) + "\n")
            self._writer.flush()
        except (BrokenPipeError, OSError):
            return self._exit_error(request_id, started), False
        answer = self._await_answer(timeout_seconds)
        duration_ms = (time.monotonic() - started) * 1000
        if answer is _OUT_OF_MEMORY:
            return self._out_of_memory(request_id, duration_ms), False
        if answer is _TIMED_OUT:  # still running at the deadline
            self.kill()
            self.sink(self.spec.name, f"{_stamp()} {request_id} Task timed out after {timeout_seconds:.2f} seconds")
            error = {
                "errorType": "Sandbox.Timedout",
                "errorMessage": f"RequestId: {request_id} Error: Task timed out after {timeout_seconds:.2f} seconds",
            }
            return _failed(error, request_id, duration_ms), False
        if answer is None:
            return self._exit_error(request_id, started), False
        max_memory_mb = int(answer.get("maxRssKb") or 0) // 1024
        self.sink(
            self.spec.name,
            f"REPORT RequestId: {request_id}\tDuration: {duration_ms:.2f} ms\t"
            f"Memory Size: {self.spec.memory_mb} MB\tMax Memory Used: {max_memory_mb} MB",
        )
        if max_memory_mb > self.spec.memory_mb:  # over it between two watchdog looks
            return self._out_of_memory(request_id, duration_ms), False
        raw = str(answer.get("payload") or "").encode("utf-8")
        if answer.get("kind") == "error":
            return InvocationResult(raw, "Unhandled", request_id, duration_ms), True
        if len(raw) > MAX_PAYLOAD_BYTES:
            error = {
                "errorType": "Function.ResponseSizeTooLarge",
                "errorMessage": "Response payload size exceeded maximum allowed payload size "
                f"({MAX_PAYLOAD_BYTES} bytes).",
            }
            return _failed(error, request_id, duration_ms), True
        return InvocationResult(raw, None, request_id, duration_ms), True

    def _await_answer(self, timeout_seconds: float) -> dict[str, Any] | None:
        """The answer, watching memory meanwhile: an environment over the function's memory size is
        killed then, as Lambda kills it, before the rest of the handler can run."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            answer = self._receive(min(MEMORY_WATCH_SECONDS, deadline - time.monotonic()))
            if answer is not _TIMED_OUT:
                return answer
            if _resident_mb(self.process.pid) > self.spec.memory_mb:
                self.kill()
                return _OUT_OF_MEMORY
            if time.monotonic() >= deadline:
                return _TIMED_OUT

    def _out_of_memory(self, request_id: str, duration_ms: float) -> InvocationResult:
        self.kill()
        self.sink(self.spec.name, f"{_stamp()} {request_id} Error: Runtime exited with error: signal: killed")
        error = {
            "errorType": "Runtime.OutOfMemory",
            "errorMessage": f"RequestId: {request_id} Error: Runtime exited with error: signal: killed",
        }
        return _failed(error, request_id, duration_ms)

    def _exit_error(self, request_id: str, started: float) -> InvocationResult:
        code = self.process.wait()
        reason = f"signal: {-code}" if code < 0 else f"exit status {code}"
        error = {
            "errorType": "Runtime.ExitError",
            "errorMessage": f"RequestId: {request_id} Error: Runtime exited with error: {reason}",
        }
        return _failed(error, request_id, (time.monotonic() - started) * 1000)

    def end_process(self) -> None:
        """Kill the interpreter, leaving the pipes to the invocation that may be reading them."""
        if self.process.poll() is None:
            self.process.kill()

    def kill(self) -> None:
        self.end_process()
        self.process.wait()
        for stream in (self._writer, self._reader):
            with contextlib.suppress(OSError):
                stream.close()


_TIMED_OUT: Final[dict[str, Any]] = {"kind": "timed-out"}
_OUT_OF_MEMORY: Final[dict[str, Any]] = {"kind": "out-of-memory"}


def _resident_mb(pid: int) -> int:
    """The process's resident memory (Linux /proc); 0 where that cannot be read."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE") // (1024 * 1024)


def _failed(error: Mapping[str, Any], request_id: str, duration_ms: float) -> InvocationResult:
    return InvocationResult(json.dumps(dict(error)).encode(), "Unhandled", request_id, duration_ms)


def _stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z"


class ConcurrencyLimits:
    """Lambda's concurrency accounting for one account and region: each function with reserved
    concurrency has its own share, every other function shares what is left of the account's limit."""

    def __init__(self, account_limit: int, reserved: Mapping[str, int | None]) -> None:
        self.account_limit = account_limit
        self._reserved = {name: value for name, value in reserved.items() if value is not None}
        self.unreserved_limit = max(0, account_limit - sum(self._reserved.values()))
        self._running: dict[str, int] = {}
        self._unreserved_running = 0
        self._lock = threading.Lock()
        self.throttled: dict[str, int] = {}

    def enter(self, function_name: str) -> None:
        """Count one invocation in, or raise LambdaThrottled as Lambda throttles it."""
        with self._lock:
            reserved = self._reserved.get(function_name)
            if reserved is not None:
                if self._running.get(function_name, 0) >= reserved:
                    self.throttled[function_name] = self.throttled.get(function_name, 0) + 1
                    raise LambdaThrottled(function_name, "ReservedFunctionConcurrentInvocationLimitExceeded")
            elif self._unreserved_running >= self.unreserved_limit:
                self.throttled[function_name] = self.throttled.get(function_name, 0) + 1
                raise LambdaThrottled(function_name, "ConcurrentInvocationLimitExceeded")
            else:
                self._unreserved_running += 1
            self._running[function_name] = self._running.get(function_name, 0) + 1

    def leave(self, function_name: str) -> None:
        with self._lock:
            self._running[function_name] -= 1
            if function_name not in self._reserved:
                self._unreserved_running -= 1


UNLIMITED: Final = ConcurrencyLimits(10**9, {})


@dataclass
class FunctionPool:
    """Warm environments of one function; at most `max_environments` invocations run at once, more wait."""

    spec: FunctionSpec
    code: FunctionCode
    environment: dict[str, str]
    layers: tuple[Path, ...] = ()
    sink: LogSink = lambda name, line: None
    max_environments: int = DEFAULT_MAX_ENVIRONMENTS
    limits: ConcurrencyLimits = UNLIMITED
    _idle: list[_Environment] = field(default_factory=list)
    # Every environment started, busy ones too (`close` ends them all); a killed one drops out once unused.
    _started: weakref.WeakSet[_Environment] = field(default_factory=weakref.WeakSet)
    _running: int = 0
    # Bumped by `reload`: an environment of an earlier generation serves no further invocation.
    _generation: int = 0
    _closed: bool = False
    _lock: threading.Condition = field(default_factory=threading.Condition)

    def invoke(self, payload: bytes) -> InvocationResult:
        if len(payload) > MAX_PAYLOAD_BYTES:
            raise PayloadTooLarge(f"{len(payload)} bytes is over the {MAX_PAYLOAD_BYTES}-byte request payload limit")
        self.limits.enter(self.spec.name)
        try:
            return self._invoke(payload)
        finally:
            self.limits.leave(self.spec.name)

    def _invoke(self, payload: bytes) -> InvocationResult:
        request_id = str(uuid.uuid4())
        environment = self._acquire()
        reusable = False
        try:
            if environment is None:
                environment = self._start_environment()
            if environment.init_error is not None:
                self.sink(
                    self.spec.name, f"INIT_REPORT Status: error\tError Type: {environment.init_error['errorType']}"
                )
                return _failed(environment.init_error, request_id, 0.0)
            self.sink(self.spec.name, f"START RequestId: {request_id} Version: $LATEST")
            result, reusable = environment.invoke(request_id, payload, float(self.spec.timeout_seconds))
            self.sink(self.spec.name, f"END RequestId: {request_id}")
            return result
        finally:
            if environment is not None and not (reusable and environment.alive):
                environment.kill()
                environment = None
            self._release(environment)

    def warm(self) -> None:
        """Start one environment ahead of the first invocation (Lambda would on the first call)."""
        environment = self._acquire()
        if environment is None:
            environment = self._start_environment()
        self._release(environment if environment.alive else None)

    def reload(self, code: FunctionCode) -> None:
        """Serve `code` from now on: idle environments stop at once, busy ones once their invocation ends."""
        with self._lock:
            self.code = code
            self.environment = {**self.environment, "LAMBDA_TASK_ROOT": str(code.task_root)}
            self._generation += 1
            idle, self._idle = self._idle, []
        for environment in idle:
            environment.kill()

    def _start_environment(self) -> _Environment:
        with self._lock:
            code, environment_variables, generation = self.code, self.environment, self._generation
        environment = _Environment(self.spec, code, self.layers, environment_variables, self.sink)
        environment.generation = generation
        with self._lock:
            closed = self._closed
            if not closed:
                self._started.add(environment)
        if closed:  # the stack stopped while this one was starting
            environment.kill()
        return environment

    def _acquire(self) -> _Environment | None:
        """An idle environment, or None to start a new one; waits while the pool is full."""
        with self._lock:
            while True:
                if self._closed:
                    raise RuntimeError(f"{self.spec.name}: the local stack is stopping")
                if self._idle:
                    self._running += 1
                    return self._idle.pop()
                if self._running < self.max_environments:
                    self._running += 1
                    return None
                self._lock.wait()

    def _release(self, environment: _Environment | None) -> None:
        with self._lock:
            self._running -= 1
            if environment is not None and environment.generation != self._generation:
                environment.kill()  # started on code that a reload replaced
                environment = None
            if environment is not None and not self._closed:
                self._idle.append(environment)
            elif environment is not None:
                environment.kill()
            self._lock.notify()

    def close(self) -> None:
        """Stop every environment, idle or busy (an invocation under way is answered with Lambda's exit
        error): none outlives the stack, which started each in a session of its own."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            busy = [environment for environment in self._started if environment not in idle]
            self._lock.notify_all()
        for environment in idle:
            environment.kill()
        for environment in busy:  # its invocation reads the end of its output and answers; the pool then reaps it
            environment.end_process()
