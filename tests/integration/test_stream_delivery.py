"""The local stack's stream poller delivers no sooner than its delivery setting says (AWS-like delays)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from local_stack.aws import EmbeddedAws
from local_stack.event_delivery import StreamDelivery, StreamPoller
from local_stack.provision import ProvisionedStack
from mcp_runtime.tasks import schema
from tests.integration.task_harness import TaskResources, wait_until


def test_a_stream_record_reaches_the_function_only_once_it_is_as_old_as_the_delivery_delay(
    embedded_aws: EmbeddedAws, deployed: ProvisionedStack
) -> None:
    (mapping,) = deployed.stream_mappings
    delivered: list[tuple[float, dict[str, Any]]] = []
    lock = threading.Lock()

    def invoke(function: str, payload: bytes) -> tuple[bytes, str | None]:
        with lock:
            delivered.extend((time.time(), record) for record in json.loads(payload)["Records"])
        return b'{"batchItemFailures": []}', None

    poller = StreamPoller(
        mapping, embedded_aws.client("dynamodbstreams"), invoke, StreamDelivery(poll_seconds=0.25, delay_seconds=0.6)
    )
    poller.start()
    try:
        embedded_aws.client("dynamodb").put_item(
            TableName=TaskResources.of(deployed).table_name,
            Item={
                schema.PARTITION_KEY: {"S": schema.TASK_KEY_PREFIX + "delayed"},
                "taskId": {"S": "delayed"},
                "effect": {"S": schema.EFFECT_START},
                "status": {"S": "working"},
            },
        )
        wait_until(lambda: list(delivered), bool, timeout=30)
    finally:
        poller.stop()

    ((at, record),) = delivered
    written = float(record["dynamodb"]["ApproximateCreationDateTime"])
    assert record["dynamodb"]["Keys"] == {schema.PARTITION_KEY: {"S": schema.TASK_KEY_PREFIX + "delayed"}}
    assert at - written >= 0.6
