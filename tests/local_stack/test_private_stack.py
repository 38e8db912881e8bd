"""The local stack is its user's: moto's admin API refuses whoever lacks the stack's secret, the files
holding secrets are 0600 in 0700 directories, and a snapshot keeps every DynamoDB type.

(The run file's life and a whole restart are in test_newcomer_errors.py and test_persistence.py, on stacks
those tests start anyway.)
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from local_stack.aws import ADMIN_SECRET_HEADER, EmbeddedAws, start_embedded_aws
from local_stack.persistence import from_wire, to_wire
from local_stack.private_files import NotPrivate, private_directory, write_private

REFUSAL = (
    "moto's admin API answers the local stack's own callers only: send its secret in X-Local-Stack-Secret "
    "(the run file build/local-stack/run/<port>.json holds it)"
)


@pytest.fixture(scope="module")
def aws() -> Iterator[EmbeddedAws]:
    previous_port = os.environ.get("MOTO_PORT")
    embedded = start_embedded_aws()
    try:
        yield embedded
    finally:
        embedded.stop()
        if previous_port is None:
            os.environ.pop("MOTO_PORT", None)
        else:
            os.environ["MOTO_PORT"] = previous_port


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/moto-api/reset"),
        ("GET", "/moto-api/"),
        ("GET", "/moto-api/data.json"),
        ("GET", "/moto-api/recorder/download-recording"),
        ("POST", "/moto-api/recorder/start-recording"),
        ("POST", "/moto-api/config"),
    ],
)
def test_moto_admin_api_refuses_a_request_without_the_stacks_secret(aws: EmbeddedAws, method: str, path: str) -> None:
    for headers in ({}, {ADMIN_SECRET_HEADER: "guessed"}, {ADMIN_SECRET_HEADER: aws.admin_secret[:-1]}):
        answer = httpx.request(method, aws.endpoint + path, headers=headers, timeout=10)
        assert (answer.status_code, answer.json()) == (403, {"message": REFUSAL})


def test_moto_admin_api_answers_the_stacks_own_callers_and_aws_calls_need_no_secret(aws: EmbeddedAws) -> None:
    sqs = aws.client("sqs")
    sqs.create_queue(QueueName="kept-until-reset")
    assert [url.rsplit("/", 1)[1] for url in sqs.list_queues()["QueueUrls"]] == ["kept-until-reset"]
    aws.reset()  # /moto-api/reset, with the secret (it raises on an error status)
    assert sqs.list_queues().get("QueueUrls", []) == []


def test_a_snapshot_line_keeps_every_dynamodb_type_binary_included() -> None:
    item = {
        "pk": {"S": "meta#signing-keys"},
        "key": {"B": b"\x00\xffsecret"},
        "keys": {"L": [{"B": b"\x01"}, {"B": b"\x02\x03"}, {"M": {"inner": {"BS": [b"a", b"\x80"]}}}]},
        "count": {"N": "12.5"},
        "tags": {"SS": ["a", "b"]},
        "numbers": {"NS": ["1", "2"]},
        "flag": {"BOOL": True},
        "nothing": {"NULL": True},
        "map": {"M": {"binary": {"B": b"\xfe"}, "number": {"N": "3"}}},
    }
    line = json.dumps(to_wire(item))
    assert json.loads(line)["key"] == {"B": "AP9zZWNyZXQ="}  # DynamoDB's JSON: binary as base64
    assert from_wire(json.loads(line)) == item


def test_a_snapshot_keeps_what_boto3_reads_back_from_a_table(aws: EmbeddedAws) -> None:
    dynamodb = aws.client("dynamodb")
    dynamodb.create_table(
        TableName="every-type",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    item = {
        "pk": {"S": "one"},
        "key": {"B": b"\x00\xff"},
        "set": {"BS": [b"\x01", b"\x02"]},
        "list": {"L": [{"B": b"\x03"}, {"N": str(Decimal("1.5"))}]},
    }
    dynamodb.put_item(TableName="every-type", Item=item)
    (read,) = dynamodb.scan(TableName="every-type")["Items"]
    dynamodb.delete_item(TableName="every-type", Key={"pk": {"S": "one"}})
    dynamodb.put_item(TableName="every-type", Item=from_wire(json.loads(json.dumps(to_wire(read)))))
    assert dynamodb.scan(TableName="every-type")["Items"] == [read]


def test_private_files_are_0600_in_a_0700_directory_even_one_an_earlier_version_left_open(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir(mode=0o755)
    os.chmod(run, 0o755)
    old = run / "3000.json"
    old.write_text("{}")
    os.chmod(old, 0o644)
    write_private(old, '{"administrator": {}}')
    assert stat.S_IMODE(os.stat(run).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(old).st_mode) == 0o600
    assert old.read_text() == '{"administrator": {}}'


def test_a_link_is_refused_as_a_private_directory(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "run").symlink_to(elsewhere)
    with pytest.raises(NotPrivate, match="is not a directory of this user's"):
        private_directory(tmp_path / "run")
