"""A bare task table in in-process moto, for the stores that keep their own items in it (handles, the
legacy leg): only the partition key the template's table has, and a clock pinned where tests move it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from mcp_runtime.tasks import schema
from tests.integration.task_harness import Clock

TABLE = "store-test"
START = 1_800_000_000.0


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    """A client for an empty `TABLE`, in a moto of the test's own."""
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": schema.PARTITION_KEY, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": schema.PARTITION_KEY, "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield client


@pytest.fixture
def clock() -> Clock:
    return Clock(START)
