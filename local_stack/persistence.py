"""What the local stack keeps across restarts: the items of the template's tables, the Secrets Manager
secrets, the S3 objects, the KMS keys and the people of the user pools.

moto keeps everything in memory, so a restart of `make run` would lose every task and handle. With
`LOCAL_STATE_DIR` (`make run` sets `build/local-stack/state`, git-ignored; `make run FRESH=1` starts
clean) the stack writes them there when it stops and puts them back when it starts, after the template's
resources were created:
- each table's items, one a line in DynamoDB's own JSON (binary values base64, as on the wire), so every
  attribute type comes back as it was (the OAuth bridge keeps binary keys);
- every secret's value (a template's secret gets its saved value back: the sealing key that opened
  yesterday's handles opens them today; one made with `make secret` is made again);
- every object of every bucket, with its content type and metadata;
- each of the template's KMS keys, its id and its key material (moto's, read from its backend: AWS never
  lets a key out), put back under its id when the key is made again (`key_restorer`, called as the
  template's keys are created, before anything names them): an access token the OAuth bridge signed
  yesterday verifies today, and the bridge's items sealed with its key open;
- each user pool's people, with their username, `sub`, attributes and status (moto's backend: Cognito
  makes a new `sub` for every user it creates), put back into the pool made again: a refresh token of the
  bridge still refreshes, as the person it was issued to is still in the pool.
The snapshot holds secrets: its directory is 0700 and its files 0600 (`local_stack.private_files`).

Step Functions executions cannot be carried over: an execution that was running when the stack
stopped is gone after the restart, as if it had died: for each task it left active, the stack puts the
status change Step Functions would have sent (`ABORTED`) on its event bus, and the supervisor settles
the task as it settles any execution that ended without a terminal write (`mcp_runtime.tasks.supervisor`).
"""

from __future__ import annotations

import base64
import json
import logging
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local_stack.private_files import open_private, private_directory, write_private
from local_stack.provision import ProvisionedStack
from mcp_runtime.tasks import schema
from mcp_runtime.tasks.models import ACTIVE_STATUSES
from mcp_runtime.tasks.schema import EXECUTION_STATUS_CHANGE

log = logging.getLogger(__name__)
BATCH = 25  # BatchWriteItem's limit
SECRETS_FILE = "secrets.json"
OBJECTS_DIR = "s3"
KEYS_FILE = "kms.json"
USERS_FILE = "cognito.json"


def _snapshot_dir(root: Path, stack_name: str) -> Path:
    return root / stack_name


def save(root: Path, provisioned: ProvisionedStack, client: Callable[[str], Any]) -> int:
    """Write every item, secret and object; returns how many items. Replaces the previous snapshot
    atomically (a stop that fails halfway leaves the last whole one)."""
    private_directory(root)
    target = _snapshot_dir(root, provisioned.template.stack_name)
    scratch = target.with_name(target.name + ".saving")
    shutil.rmtree(scratch, ignore_errors=True)
    private_directory(scratch)
    dynamodb = client("dynamodb")
    count = 0
    for logical_id, table in provisioned.tables.items():
        with open(open_private(scratch / f"{logical_id}.jsonl"), "w", encoding="utf-8") as out:
            for item in _scan(dynamodb, table):
                out.write(json.dumps(to_wire(item)) + "\n")
                count += 1
    write_private(scratch / SECRETS_FILE, json.dumps(_secrets(client("secretsmanager"))))
    _save_objects(client("s3"), scratch / OBJECTS_DIR)
    write_private(scratch / KEYS_FILE, json.dumps(_keys(client("kms"), provisioned.keys)))
    write_private(scratch / USERS_FILE, json.dumps(_users(client("cognito-idp"), provisioned.user_pools)))
    shutil.rmtree(target, ignore_errors=True)
    scratch.rename(target)
    return count


def to_wire(item: dict[str, Any]) -> dict[str, Any]:
    """An item as boto3 gives it (binary values as bytes), in DynamoDB's JSON (binary values base64)."""
    return {name: _attribute(value, _b64encode) for name, value in item.items()}


def from_wire(item: dict[str, Any]) -> dict[str, Any]:
    """`to_wire` undone: the item as boto3 takes it."""
    return {name: _attribute(value, base64.b64decode) for name, value in item.items()}


def _b64encode(data: bytes) -> str:
    return base64.b64encode(bytes(data)).decode("ascii")


def _attribute(value: dict[str, Any], convert: Callable[[Any], Any]) -> dict[str, Any]:
    """One attribute value with its binary parts converted (B, BS, and inside M and L)."""
    ((kind, inner),) = value.items()
    if kind == "B":
        return {kind: convert(inner)}
    if kind == "BS":
        return {kind: [convert(member) for member in inner]}
    if kind == "M":
        return {kind: {name: _attribute(member, convert) for name, member in inner.items()}}
    if kind == "L":
        return {kind: [_attribute(member, convert) for member in inner]}
    return value


def _secrets(secretsmanager: Any) -> list[dict[str, Any]]:
    saved = []
    for page in secretsmanager.get_paginator("list_secrets").paginate():
        for listed in page.get("SecretList") or []:
            try:
                value = secretsmanager.get_secret_value(SecretId=listed["ARN"])
            except secretsmanager.exceptions.ResourceNotFoundException:
                continue  # no value yet (created without one), or deleted meanwhile
            secret: dict[str, Any] = {"name": listed["Name"], "description": listed.get("Description") or ""}
            if "SecretString" in value:
                secret["string"] = value["SecretString"]
            else:
                secret["binary"] = base64.b64encode(value["SecretBinary"]).decode("ascii")
            saved.append(secret)
    return saved


def _save_objects(s3: Any, directory: Path) -> None:
    """Each object's body in a file of its own; `index.jsonl` says whose (bucket, key, type, metadata)."""
    private_directory(directory)
    with open(open_private(directory / "index.jsonl"), "w", encoding="utf-8") as index:
        number = 0
        for bucket in s3.list_buckets().get("Buckets") or []:
            name = bucket["Name"]
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
                for listed in page.get("Contents") or []:
                    got = s3.get_object(Bucket=name, Key=listed["Key"])
                    number += 1
                    write_private(directory / f"{number}.body", got["Body"].read())
                    entry = {
                        "bucket": name,
                        "key": listed["Key"],
                        "file": f"{number}.body",
                        "contentType": got.get("ContentType") or "binary/octet-stream",
                        "metadata": got.get("Metadata") or {},
                    }
                    index.write(json.dumps(entry) + "\n")


def _kms_backend(kms: Any, key_id: str) -> Any:
    from moto.kms.models import kms_backends

    arn = str(kms.describe_key(KeyId=key_id)["KeyMetadata"]["Arn"])
    _, _, _, region, account, _ = arn.split(":", 5)
    return kms_backends[account][region]


def _keys(kms: Any, keys: dict[str, str]) -> dict[str, dict[str, str]]:
    """Each template key by logical id: its id, its symmetric material and its private key (PKCS #8 PEM)."""
    from cryptography.hazmat.primitives import serialization

    saved = {}
    for logical_id, key_id in keys.items():
        key = _kms_backend(kms, key_id).keys[key_id]
        private = key.private_key.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        saved[logical_id] = {"id": key_id, "material": _b64encode(key.key_material), "private": private.decode()}
    return saved


def key_restorer(root: Path | None, stack_name: str, kms: Any) -> Callable[[str, str], str]:
    """What `provision` calls with each key it created (logical id, key id): the id the key has from now on.
    A key the last run saved becomes that key again (its id, its material); any other stays as made."""
    source = _snapshot_dir(root, stack_name) / KEYS_FILE if root is not None else None
    saved: dict[str, dict[str, str]] = (
        json.loads(source.read_text(encoding="utf-8")) if source is not None and source.exists() else {}
    )

    def restore(logical_id: str, key_id: str) -> str:
        kept = saved.get(logical_id)
        if kept is None:
            return key_id
        from cryptography.hazmat.primitives import serialization

        backend = _kms_backend(kms, key_id)
        key = backend.keys.pop(key_id)
        key.id, key.arn = kept["id"], key.arn.replace(key_id, kept["id"])
        key.key_material = base64.b64decode(kept["material"])
        key.private_key.private_key = serialization.load_pem_private_key(kept["private"].encode(), password=None)
        backend.keys[key.id] = key
        return str(key.id)

    return restore


def _cognito_pool(cognito: Any, pool_id: str) -> Any:
    from moto.cognitoidp.models import cognitoidp_backends

    arn = str(cognito.describe_user_pool(UserPoolId=pool_id)["UserPool"]["Arn"])
    _, _, _, region, account, _ = arn.split(":", 5)
    return cognitoidp_backends[account][region].user_pools[pool_id]


def _users(cognito: Any, pools: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    """Each pool's people by the pool's logical id (its id is made anew at each start)."""
    saved: dict[str, list[dict[str, Any]]] = {}
    for logical_id, pool_id in pools.items():
        saved[logical_id] = [
            {
                "username": user.username,
                "sub": user.id,
                "password": user.password,
                "status": str(getattr(user.status, "value", user.status)),
                "enabled": user.enabled,
                "attributes": user.attributes,
            }
            for user in _cognito_pool(cognito, pool_id).users.values()
        ]
    return saved


def _restore_users(cognito: Any, pools: dict[str, str], saved: dict[str, list[dict[str, Any]]]) -> None:
    from moto.cognitoidp.models import CognitoIdpUser, UserStatus

    for logical_id, people in saved.items():
        if logical_id not in pools:
            continue
        pool = _cognito_pool(cognito, pools[logical_id])
        for person in people:
            user = CognitoIdpUser(
                pool.id, person["username"], person["password"], UserStatus(person["status"]), person["attributes"]
            )
            user.id = person["sub"]
            user.update_attributes([{"Name": "sub", "Value": person["sub"]}])
            user.enabled = person["enabled"]
            pool.users[user.username] = user


@dataclass(frozen=True)
class Restored:
    items: int
    lost_executions: tuple[tuple[str, str], ...]  # (task id, execution name) of the tasks left active


def restore(root: Path, provisioned: ProvisionedStack, client: Callable[[str], Any]) -> Restored:
    """Put the saved items, secrets and objects back into the freshly created stack."""
    source = _snapshot_dir(root, provisioned.template.stack_name)
    if not source.is_dir():
        return Restored(0, ())
    dynamodb = client("dynamodb")
    count = 0
    lost: list[tuple[str, str]] = []
    for logical_id, table in provisioned.tables.items():
        path = source / f"{logical_id}.jsonl"
        if not path.exists():
            continue
        items = [from_wire(json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line]
        lost.extend(task for task in map(_active_task, items) if task is not None)
        for start in range(0, len(items), BATCH):
            requests = [{"PutRequest": {"Item": item}} for item in items[start : start + BATCH]]
            pending: dict[str, Any] = {table: requests}
            while pending:
                pending = dynamodb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
        count += len(items)
    if (source / SECRETS_FILE).exists():
        _restore_secrets(client("secretsmanager"), json.loads((source / SECRETS_FILE).read_text(encoding="utf-8")))
    if (source / OBJECTS_DIR / "index.jsonl").exists():
        _restore_objects(client("s3"), source / OBJECTS_DIR)
    if (source / USERS_FILE).exists():
        saved_users = json.loads((source / USERS_FILE).read_text(encoding="utf-8"))
        _restore_users(client("cognito-idp"), provisioned.user_pools, saved_users)
    return Restored(count, tuple(lost))


def _restore_secrets(secretsmanager: Any, saved: list[dict[str, Any]]) -> None:
    for secret in saved:
        value = (
            {"SecretString": secret["string"]}
            if "string" in secret
            else {"SecretBinary": base64.b64decode(secret["binary"])}
        )
        try:  # the template's secrets exist already (with a value of their own): the saved one replaces it
            secretsmanager.put_secret_value(SecretId=secret["name"], **value)
        except secretsmanager.exceptions.ResourceNotFoundException:
            extra = {"Description": secret["description"]} if secret.get("description") else {}
            secretsmanager.create_secret(Name=secret["name"], **value, **extra)


def _restore_objects(s3: Any, directory: Path) -> None:
    existing = {bucket["Name"] for bucket in s3.list_buckets().get("Buckets") or []}
    for line in (directory / "index.jsonl").read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if entry["bucket"] not in existing:
            s3.create_bucket(Bucket=entry["bucket"])
            existing.add(entry["bucket"])
        s3.put_object(
            Bucket=entry["bucket"],
            Key=entry["key"],
            Body=(directory / entry["file"]).read_bytes(),
            ContentType=entry["contentType"],
            Metadata=entry["metadata"],
        )


def _active_task(item: dict[str, Any]) -> tuple[str, str] | None:
    key = str(item.get(schema.PARTITION_KEY, {}).get("S", ""))
    status = str(item.get("status", {}).get("S", ""))
    if not key.startswith(schema.TASK_KEY_PREFIX) or status not in ACTIVE_STATUSES:
        return None
    task_id = key.removeprefix(schema.TASK_KEY_PREFIX)
    return task_id, str(item.get("executionName", {}).get("S") or task_id)


def lost_execution_event(state_machine_arn: str, task_id: str, execution_name: str) -> dict[str, Any]:
    """The status change Step Functions sends when an execution is stopped: `ABORTED`."""
    arn = state_machine_arn.replace(":stateMachine:", ":execution:") + f":{execution_name}"
    now = int(time.time() * 1000)
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": EXECUTION_STATUS_CHANGE,
        "source": "aws.states",
        "account": arn.split(":")[4],
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "region": arn.split(":")[3],
        "resources": [arn],
        "detail": {
            "executionArn": arn,
            "stateMachineArn": state_machine_arn,
            "name": execution_name,
            "status": "ABORTED",
            "startDate": None,
            "stopDate": now,
            "input": json.dumps({"taskId": task_id}),
            "output": None,
            "error": None,
            "cause": None,
        },
    }


def _scan(dynamodb: Any, table: str) -> Iterator[dict[str, Any]]:
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = dynamodb.scan(**kwargs)
        yield from page.get("Items") or []
        if "LastEvaluatedKey" not in page:
            return
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
