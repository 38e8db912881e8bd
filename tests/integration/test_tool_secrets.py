"""`ctx.secret(name)` against Secrets Manager on moto: read on first use, kept for the container's life
(a new container reads the new value), and a secret that cannot be read named with AWS's reason."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from mcp_runtime._aws import AwsCaller
from mcp_runtime.tool_secrets import SecretUnavailable, ToolSecrets


@pytest.fixture
def secretsmanager() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("secretsmanager", region_name="us-east-1")


def _secrets(client: Any, ids: dict[str, str]) -> ToolSecrets:
    """What one container has: the map the template sets, and its Secrets Manager client."""
    return ToolSecrets(ids, caller=AwsCaller("secretsmanager", client=client))


def test_a_secret_is_read_on_first_use_and_kept_for_the_containers_life(secretsmanager: Any) -> None:
    container = _secrets(secretsmanager, {"weather": "acme/weather-api-key"})  # nothing exists yet: nothing is read
    arn = secretsmanager.create_secret(Name="acme/weather-api-key", SecretString="first")["ARN"]
    assert container.get("weather") == "first"

    secretsmanager.put_secret_value(SecretId=arn, SecretString="rotated")
    assert container.get("weather") == "first"
    assert _secrets(secretsmanager, {"weather": "acme/weather-api-key"}).get("weather") == "rotated"


def test_a_secret_named_by_its_arn_is_read_by_it(secretsmanager: Any) -> None:
    arn = secretsmanager.create_secret(Name="ledger", SecretString="by arn")["ARN"]
    assert _secrets(secretsmanager, {"ledger": arn}).get("ledger") == "by arn"


def test_a_missing_secret_is_named_with_aws_reason_and_read_again_next_time(secretsmanager: Any) -> None:
    container = _secrets(secretsmanager, {"weather": "acme/weather-api-key"})
    with pytest.raises(SecretUnavailable) as raised:
        container.get("weather")
    assert str(raised.value) == (
        "tool secret 'weather' (acme/weather-api-key) could not be read: ResourceNotFoundException"
    )
    secretsmanager.create_secret(Name="acme/weather-api-key", SecretString="now there")
    assert container.get("weather") == "now there"


def test_a_binary_secret_is_refused_by_name(secretsmanager: Any) -> None:
    secretsmanager.create_secret(Name="certificate", SecretBinary=b"\x00\x01")
    with pytest.raises(SecretUnavailable, match=r"^tool secret 'cert' \(certificate\) has no text value"):
        _secrets(secretsmanager, {"cert": "certificate"}).get("cert")
