"""What a task's terminal write reports: its counter and its time from createdAt, both by tool."""

from __future__ import annotations

from ..observability import TERMINAL_METRICS, TIME_TO_TERMINAL, Telemetry
from .models import TaskRecord, parse_timestamp


def report_settled(telemetry: Telemetry, record: TaskRecord) -> None:
    """`record` is the task as the terminal write left it (the store's clock stamped lastUpdatedAt),
    so TimeToTerminal is exactly what a client sees between createdAt and lastUpdatedAt."""
    metric = TERMINAL_METRICS.get(record.status)
    if metric is None:
        return
    telemetry.count(metric, tool=record.tool_name)
    elapsed_ms = (parse_timestamp(record.last_updated_at) - parse_timestamp(record.created_at)) * 1000
    telemetry.timing(TIME_TO_TERMINAL, max(0.0, round(elapsed_ms, 3)), tool=record.tool_name, status=record.status)
