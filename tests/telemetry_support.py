"""A `Telemetry` that records what the runtime reports, for exact assertions in any tier."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Sample:
    metric: str
    unit: str
    value: float
    dimensions: dict[str, str]


@dataclass
class RecordingTelemetry:
    samples: list[Sample] = field(default_factory=list)
    spans: list[str] = field(default_factory=list)
    keys: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, metric: str, value: float = 1, **dimensions: str) -> None:
        with self._lock:
            self.samples.append(Sample(metric, "Count", float(value), dict(dimensions)))

    def timing(self, metric: str, milliseconds: float, **dimensions: str) -> None:
        with self._lock:
            self.samples.append(Sample(metric, "Milliseconds", float(milliseconds), dict(dimensions)))

    def span(self, name: str) -> AbstractContextManager[object]:
        return self._span(name)

    @contextmanager
    def _span(self, name: str) -> Iterator[object]:
        with self._lock:
            self.spans.append(name)
        yield None

    def correlate(self, **keys: str) -> None:
        with self._lock:
            self.keys.update(keys)

    # ---- queries ------------------------------------------------------------------------------
    def of(self, metric: str) -> list[Sample]:
        with self._lock:
            return [sample for sample in self.samples if sample.metric == metric]

    def counts(self) -> list[tuple[str, float, dict[str, str]]]:
        """(metric, value, dimensions) of every Count sample, in order."""
        with self._lock:
            return [(s.metric, s.value, s.dimensions) for s in self.samples if s.unit == "Count"]

    def clear(self) -> None:
        with self._lock:
            self.samples.clear()
            self.spans.clear()
            self.keys.clear()

    def __repr__(self) -> str:  # readable assertion failures
        extra: Any = {"samples": self.samples, "spans": self.spans, "keys": self.keys}
        return f"RecordingTelemetry({extra})"
