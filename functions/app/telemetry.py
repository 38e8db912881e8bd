"""The Powertools side of `mcp_runtime.observability.Telemetry`: EMF metrics, JSON logs, X-Ray spans.

Everything Powertools is imported on first need, never at import or construction, so a cold start
that answers `server/discover` (no metric, no log line, no span) imports none of it:
- metrics are buffered here and written as CloudWatch EMF (one JSON line per dimension set, on
  stdout, which Lambda ships to CloudWatch Logs) when the handler adapter flushes at the end of
  the invocation; an invocation that recorded nothing prints nothing;
- logs: the runtime's standard `logging` loggers get a small handler that builds the Powertools
  Logger on the first record and formats every record as JSON with the correlation keys
  (`correlation_id` = the JSON-RPC id in the API function; `task_id`, `execution_name`);
- spans: the Tracer (and with it the X-Ray SDK, a heavy import) is built at the first span, and
  only when tracing is on: in Lambda, unless POWERTOOLS_TRACE_DISABLED is set (as Powertools rules),
  and the SDK is installed. The default asset leaves it out (aws-xray-sdk + wrapt are 1.6 MB
  unzipped, which the 10 MB asset budget cannot take); without it spans are no-ops.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Final

from mcp_runtime._json import compact as compact_json

COUNT: Final = "Count"
MILLISECONDS: Final = "Milliseconds"
# The runtime's own logger trees: their records, and the tool packages', are written through the Powertools Logger.
RUNTIME_LOGGERS: Final[tuple[str, ...]] = ("mcp_runtime", "app")
_TRUTHY: Final = frozenset({"1", "true", "yes", "on", "y", "t"})

internal_log = logging.getLogger("app.telemetry")
_MAX_CACHED_EMF_PARTS: Final = 256
_EMF_HEAD: Final = '{"_aws":{"Timestamp":'

Dimensions = tuple[tuple[str, str], ...]


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in _TRUTHY


def tracing_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Powertools' rule, decided without importing the Tracer: on in Lambda (LAMBDA_TASK_ROOT),
    off when POWERTOOLS_TRACE_DISABLED is truthy, under `sam local` or Chalice, and outside Lambda."""
    env = os.environ if environ is None else environ
    if _truthy(env.get("POWERTOOLS_TRACE_DISABLED")):
        return False
    if env.get("AWS_SAM_LOCAL") or env.get("AWS_CHALICE_CLI_MODE"):
        return False
    return bool(env.get("LAMBDA_TASK_ROOT"))


def _default_tracer(service: str) -> Any:
    import importlib.util

    if importlib.util.find_spec("aws_xray_sdk") is None:  # not shipped: say so without importing the Tracer
        raise ImportError("aws_xray_sdk")
    from aws_lambda_powertools import Tracer

    # Only botocore is patched: every DynamoDB and Step Functions call becomes a subsegment of the span
    # that made it (patching is class-wide, so clients built before the Tracer are covered too).
    return Tracer(service=service, patch_modules=("botocore",))


def _metrics_disabled() -> bool:
    """Powertools' rule: POWERTOOLS_METRICS_DISABLED, or POWERTOOLS_DEV unless metrics are enabled explicitly."""
    disabled = os.environ.get("POWERTOOLS_METRICS_DISABLED")
    if _truthy(disabled):
        return True
    return _truthy(os.environ.get("POWERTOOLS_DEV")) and disabled is None


class PowertoolsTelemetry:
    def __init__(
        self,
        service: str,
        namespace: str | None = None,
        *,
        tracing: bool | None = None,
        tracer_factory: Callable[[str], Any] = _default_tracer,
    ) -> None:
        self.service = service
        self.namespace = namespace or os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or service
        self.tracing = tracing_enabled() if tracing is None else tracing
        self._tracer_factory = tracer_factory
        self._tracer: Any = None
        self._lock = threading.Lock()
        # dimension set -> metric name -> (unit, values)
        self._metrics: dict[Dimensions, dict[str, tuple[str, list[float]]]] = {}
        self._keys: dict[str, Any] = {}
        self._logger: Any = None
        self.metrics_disabled = _metrics_disabled()  # read once, like every setting
        # (dimension set, metric names and units) -> the parts of its EMF line after the timestamp that never change
        self._emf_parts: dict[tuple[Dimensions, tuple[tuple[str, str], ...]], tuple[str, tuple[str, ...]]] = {}

    # ---- Telemetry ----------------------------------------------------------------------------
    def count(self, metric: str, value: float = 1, **dimensions: str) -> None:
        self._record(metric, COUNT, value, dimensions)

    def timing(self, metric: str, milliseconds: float, **dimensions: str) -> None:
        self._record(metric, MILLISECONDS, milliseconds, dimensions)

    def span(self, name: str) -> AbstractContextManager[object]:
        if not self.tracing:
            return nullcontext()
        tracer = self._tracer_or_none()
        if tracer is None:
            return nullcontext()
        return self._subsegment(tracer, name)

    def correlate(self, **keys: str) -> None:
        self._append_keys(keys)

    # ---- the handler adapters' side ------------------------------------------------------------
    def correlate_request(self, request_id: Any, method: str) -> None:
        """The API function's correlation id: the JSON-RPC id of the request in flight."""
        self._append_keys({"correlation_id": str(request_id), "method": method})

    def invocation(self, context: Any = None) -> AbstractContextManager[None]:
        """One Lambda invocation: keys start empty, metrics are flushed at the end (even on error)."""
        return _Invocation(self, context)

    def begin_invocation(self, context: Any) -> None:
        self._clear_keys()
        request_id = getattr(context, "aws_request_id", None)
        if isinstance(request_id, str):
            self._append_keys({"function_request_id": request_id})

    def flush(self) -> None:
        """Write the buffered metrics as CloudWatch EMF, one JSON line per dimension set; never raises.

        The documents are the ones Powertools' EMF provider prints (same keys, units and value lists,
        and POWERTOOLS_METRICS_DISABLED / POWERTOOLS_DEV honoured the same way), written directly:
        building and filling a provider per flush is the cost bench/README.md names (the warm path).
        """
        with self._lock:
            pending, self._metrics = self._metrics, {}
        if not pending or self.metrics_disabled:
            return
        try:
            timestamp = str(int(time.time() * 1000))
            lines = []
            for dimensions, metrics in pending.items():
                tail, names = self._emf_parts_of(dimensions, metrics)
                members = zip(names, metrics.values(), strict=True)
                values = ",".join(name + compact_json(values) for name, (_, values) in members)
                lines.append(f"{_EMF_HEAD}{timestamp}{tail}{values}}}")
            sys.stdout.write("\n".join(lines) + "\n")
            sys.stdout.flush()
        except Exception:
            internal_log.exception("metrics could not be written")

    def install_log_handler(self, tool_packages: Iterable[str] = ("tools",)) -> None:
        """Route the `logging` records of the runtime and of the tool packages (MCP_TOOL_PACKAGES) through
        the Powertools Logger, built on the first one."""
        level = logging.getLevelName((os.environ.get("POWERTOOLS_LOG_LEVEL") or "INFO").upper())
        handler = _LazyPowertoolsHandler(self)
        for name in dict.fromkeys((*RUNTIME_LOGGERS, *tool_packages)):
            target = logging.getLogger(name)
            for stale in [h for h in target.handlers if isinstance(h, _LazyPowertoolsHandler)]:
                target.removeHandler(stale)  # a previous composition's telemetry (tests reset it)
            target.addHandler(handler)
            target.propagate = False  # Lambda's root handler would print each record a second time
            if isinstance(level, int):
                target.setLevel(level)

    @property
    def logger(self) -> Any:
        """The Powertools Logger (structured JSON on stdout), built on first use with the current keys."""
        if self._logger is None:
            from aws_lambda_powertools import Logger

            built = Logger(service=self.service, logger_handler=_StdoutHandler())
            built.append_keys(name="%(name)s", **self._keys)  # which runtime module logged
            self._logger = built
        return self._logger

    # ---- internals --------------------------------------------------------------------------
    def _emf_parts_of(
        self, dimensions: Dimensions, metrics: dict[str, tuple[str, list[float]]]
    ) -> tuple[str, tuple[str, ...]]:
        """What follows the timestamp of an EMF line (the directive and the dimensions), and each metric's
        `"Name":` prefix: the line is `_EMF_HEAD` + ms + tail + `"Name":[v,...],...` + `}`."""
        key = (dimensions, tuple((metric, unit) for metric, (unit, _) in metrics.items()))
        parts = self._emf_parts.get(key)
        if parts is None:
            directive = {
                "Namespace": self.namespace,
                "Dimensions": [[name for name, _ in dimensions]],
                "Metrics": [{"Name": metric, "Unit": unit} for metric, unit in key[1]],
            }
            members = "".join(f"{compact_json(name)}:{compact_json(value)}," for name, value in dimensions)
            tail = f',"CloudWatchMetrics":[{compact_json(directive)}]}},{members}'
            parts = (tail, tuple(f"{compact_json(metric)}:" for metric, _ in key[1]))
            if len(self._emf_parts) < _MAX_CACHED_EMF_PARTS:  # dimension values are few; never let them grow memory
                self._emf_parts[key] = parts
        return parts

    def _record(self, metric: str, unit: str, value: float, dimensions: dict[str, str]) -> None:
        key: Dimensions = tuple(sorted((name, str(v)) for name, v in dimensions.items()))
        with self._lock:
            by_name = self._metrics.setdefault(key, {})
            _, values = by_name.setdefault(metric, (unit, []))
            if unit == COUNT and values:
                values[0] += float(value)  # counts add up: one value per flush
            else:
                values.append(float(value))

    def _append_keys(self, keys: dict[str, Any]) -> None:
        self._keys.update(keys)
        if self._logger is not None:
            self._logger.append_keys(**keys)

    def _clear_keys(self) -> None:
        if self._logger is not None and self._keys:
            self._logger.remove_keys(list(self._keys))
        self._keys = {}

    def _tracer_or_none(self) -> Any:
        if self._tracer is None:
            try:
                self._tracer = self._tracer_factory(self.service)
            except ImportError:
                # The asset ships without the X-Ray SDK unless aws-xray-sdk is added to the runtime
                # dependencies (+1.6 MB unzipped): Lambda still traces each invocation, without these subsegments.
                internal_log.debug("tracing is on but the X-Ray SDK is not installed: no subsegments")
                self.tracing = False
                return None
        return self._tracer

    @contextmanager
    def _subsegment(self, tracer: Any, name: str) -> Iterator[object]:
        with tracer.provider.in_subsegment(name=f"## {name}") as subsegment:
            for key in ("task_id", "execution_name", "correlation_id"):
                value = self._keys.get(key)
                if value is not None and subsegment is not None:
                    subsegment.put_annotation(key, value)  # searchable in X-Ray: annotation.task_id = "..."
            yield subsegment


class _Invocation:
    """`PowertoolsTelemetry.invocation`: a class, not a generator, as it runs around every request
    (bench/README.md, warm)."""

    __slots__ = ("_context", "_telemetry")

    def __init__(self, telemetry: PowertoolsTelemetry, context: Any) -> None:
        self._telemetry = telemetry
        self._context = context

    def __enter__(self) -> None:
        self._telemetry.begin_invocation(self._context)

    def __exit__(self, *exc_info: object) -> None:
        self._telemetry.flush()


class _StdoutHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stdout` is at the time of the record (Lambda ships stdout; tests swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stdout
        super().emit(record)


class _LazyPowertoolsHandler(logging.Handler):
    """A `logging` handler that hands records to the Powertools Logger's handler, building it on the
    first record: a request that logs nothing never imports Powertools."""

    def __init__(self, telemetry: PowertoolsTelemetry) -> None:
        super().__init__()
        self._telemetry = telemetry

    def emit(self, record: logging.LogRecord) -> None:
        try:
            target = self._telemetry.logger.registered_handler
        except Exception:  # Powertools missing or broken: never lose the line
            if logging.lastResort is not None:
                logging.lastResort.handle(record)
            return
        target.handle(record)
