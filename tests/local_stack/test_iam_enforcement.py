"""IAM enforcement on the embedded moto: each call succeeds or fails exactly as its role's statements say.

One real `ThreadedMotoServer` on a free port for the module (the local stack's own, executing
state machines); real boto3 clients with assumed-role credentials; policies shaped like the CDK
template's (statements on table, index, state machine, executions and secret ARNs, one conditioned
on dynamodb:LeadingKeys). moto's state is process-wide: every test makes its own uniquely named
resources, and enforcement is relaxed after each test.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from local_stack.iam_enforcement import (
    LEADING_KEYS,
    STATE_MACHINE_SESSION_NAME,
    AccessDenied,
    InvalidCredentials,
    access_key_id_from_authorization,
    assume_role_credentials,
    authorize,
)

from local_stack import iam_enforcement
from tests.local_stack.embedded_moto import (
    ACCOUNT,
    REGION,
    embedded_moto,
    eventually,
    finished,
    invoking,
    refused,
    relaxed_around_each_test,  # noqa: F401 (an autouse fixture)
    unique,
)

SESSION = "fn"


def trust(service: str) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [{"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": service}}],
    }


def allow(actions: str | list[str], resources: str | list[str], **extra: Any) -> dict[str, Any]:
    """A statement as CDK writes it (a lone action or resource is a string)."""
    return {"Action": actions, "Effect": "Allow", "Resource": resources, **extra}


# What a function role holds besides its grants (CDK adds it to every function's role).
LOGS_ONLY = allow(
    ["logs:CreateLogStream", "logs:PutLogEvents"], f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/lambda/fn:*"
)


def handles_only(prefix: str = "handle#") -> dict[str, Any]:
    return {"ForAllValues:StringLike": {LEADING_KEYS: [f"{prefix}*"]}}


def denial(principal: str, action: str, resource: str) -> str:
    return (
        f"User: {principal} is not authorized to perform: {action} on resource: {resource} "
        f"because no identity-based policy allows the {action} action"
    )


def session_arn(role_name: str, session: str = SESSION) -> str:
    return f"arn:aws:sts::{ACCOUNT}:assumed-role/{role_name}/{session}"


def assert_access_denied(response: dict[str, Any], status: int, role_name: str, action: str, resource: str) -> None:
    """AWS's own AccessDenied answer to the session of `role_name` for `action` on `resource`."""
    assert response["ResponseMetadata"]["HTTPStatusCode"] == status
    assert response["Error"]["Code"] == "AccessDeniedException"
    assert response["Error"]["Message"] == denial(session_arn(role_name), action, resource)


@dataclass
class Aws:
    """The moto server, set-up clients (work while enforcement is relaxed) and role sessions."""

    endpoint: str
    admin: dict[str, str] = field(default_factory=dict)

    def setup(self, service: str) -> Any:
        return self.client(service, {"AWS_ACCESS_KEY_ID": "setup", "AWS_SECRET_ACCESS_KEY": "setup"})

    def client(self, service: str, credentials: dict[str, str]) -> Any:
        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=credentials["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=credentials["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=credentials.get("AWS_SESSION_TOKEN"),
        )

    def as_admin(self, service: str) -> Any:
        return self.client(service, self.admin)

    def role(self, statements: list[dict[str, Any]], *, service: str = "lambda.amazonaws.com") -> tuple[str, str]:
        """A role with one inline policy holding the statements, as CDK's DefaultPolicy does: (name, ARN)."""
        name = unique("role")
        iam = self.setup("iam")
        arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust(service)))["Role"]["Arn"]
        self.set_statements(name, statements)
        return name, str(arn)

    def set_statements(self, role_name: str, statements: list[dict[str, Any]]) -> None:
        document = json.dumps({"Version": "2012-10-17", "Statement": statements})
        with iam_enforcement.relaxed():
            self.setup("iam").put_role_policy(RoleName=role_name, PolicyName="DefaultPolicy", PolicyDocument=document)

    def as_role(self, service: str, role_arn: str) -> Any:
        return self.client(service, assume_role_credentials(self.endpoint, role_arn, SESSION))

    def enforced_session(self, service: str, statements: list[dict[str, Any]]) -> tuple[str, Any]:
        """A new role holding `statements` and a client in its session, with enforcement turned on:
        (role name, client)."""
        role_name, role_arn = self.role(statements)
        client = self.as_role(service, role_arn)
        iam_enforcement.enforce()
        return role_name, client

    def table(self) -> tuple[str, str]:
        """A table keyed like the task table, with an owner index: (name, ARN)."""
        name = unique("tasks")
        description = self.setup("dynamodb").create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "owner", "AttributeType": "S"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "by-owner",
                    "KeySchema": [{"AttributeName": "owner", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
        )
        return name, str(description["TableDescription"]["TableArn"])

    def function(self) -> str:
        """A Lambda function (its code never runs: the test's invoke replacement answers): its ARN."""
        _, role_arn = self.role([LOGS_ONLY])
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w") as bundle:
            bundle.writestr("handler.py", "def handler(event, context):\n    return event\n")
        created = self.setup("lambda").create_function(
            FunctionName=unique("fn"),
            Runtime="python3.13",
            Role=role_arn,
            Handler="handler.handler",
            Code={"ZipFile": archive.getvalue()},
        )
        return str(created["FunctionArn"])

    def state_machine(self, definition: dict[str, Any], statements: list[dict[str, Any]]) -> tuple[str, str]:
        """A state machine whose role holds the statements: (ARN, role name)."""
        role_name, role_arn = self.role(statements, service="states.amazonaws.com")
        created = self.setup("stepfunctions").create_state_machine(
            name=unique("machine"), definition=json.dumps(definition), roleArn=role_arn, type="STANDARD"
        )
        return str(created["stateMachineArn"]), role_name

    def finished(self, execution_arn: str, sfn: Any = None) -> dict[str, Any]:
        """The execution's description once it is no longer RUNNING."""
        return finished(sfn or self.as_admin("stepfunctions"), execution_arn)


@pytest.fixture(scope="module")
def aws() -> Iterator[Aws]:
    """The local stack's embedded moto (`embedded_moto`)."""
    with embedded_moto() as (endpoint, admin):
        yield Aws(endpoint, admin)


@dataclass
class Invocation:
    function_arn: str
    payload: dict[str, Any]
    access_key_id: str


@pytest.fixture
def invocations(monkeypatch: pytest.MonkeyPatch) -> list[Invocation]:
    """moto's no-Docker invoke replaced as the local stack does it: authorize, record, answer JSON."""
    from moto.awslambda_simple.models import LambdaSimpleBackend

    seen: list[Invocation] = []

    def invoke(
        self: Any, function_name: str, qualifier: str | None, body: Any, headers: Any, response_headers: Any
    ) -> bytes:
        function_arn = self.get_function(function_name, qualifier).function_arn
        access_key_id = access_key_id_from_authorization(headers.get("Authorization"))
        assert access_key_id is not None
        authorize(access_key_id, "lambda:InvokeFunction", function_arn)
        raw = body.decode() if isinstance(body, bytes) else (body or "{}")
        seen.append(Invocation(function_arn, json.loads(raw), access_key_id))
        payload = json.dumps({"ok": True}).encode()
        response_headers["Content-Length"] = str(len(payload))
        return payload

    monkeypatch.setattr(LambdaSimpleBackend, "invoke", invoke)
    return seen


# ------------------------------------------------------------------------------------------ DynamoDB


def test_a_role_may_make_the_calls_its_statements_allow_on_the_table_they_name(aws: Aws) -> None:
    table, table_arn = aws.table()
    _, dynamodb = aws.enforced_session(
        "dynamodb", [allow(["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"], table_arn)]
    )

    dynamodb.put_item(TableName=table, Item={"pk": {"S": "task#1"}, "status": {"S": "working"}})
    dynamodb.update_item(
        TableName=table,
        Key={"pk": {"S": "task#1"}},
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":s": {"S": "completed"}},
    )

    item = dynamodb.get_item(TableName=table, Key={"pk": {"S": "task#1"}})["Item"]
    assert item == {"pk": {"S": "task#1"}, "status": {"S": "completed"}}


def test_a_call_outside_the_roles_statements_is_denied_naming_the_action_and_the_table(aws: Aws) -> None:
    table, table_arn = aws.table()
    role_name, dynamodb = aws.enforced_session("dynamodb", [allow(["dynamodb:GetItem", "dynamodb:PutItem"], table_arn)])

    response = refused(lambda: dynamodb.delete_item(TableName=table, Key={"pk": {"S": "task#1"}}))

    assert_access_denied(response, 400, role_name, "dynamodb:DeleteItem", table_arn)


def test_a_grant_on_one_table_does_not_reach_another_table(aws: Aws) -> None:
    _, granted_arn = aws.table()
    other, other_arn = aws.table()
    role_name, dynamodb = aws.enforced_session("dynamodb", [allow("dynamodb:GetItem", granted_arn)])

    response = refused(lambda: dynamodb.get_item(TableName=other, Key={"pk": {"S": "task#1"}}))

    assert_access_denied(response, 400, role_name, "dynamodb:GetItem", other_arn)


def test_removing_one_statement_denies_exactly_the_call_it_allowed(aws: Aws) -> None:
    table, table_arn = aws.table()
    reads = allow("dynamodb:GetItem", table_arn)
    writes = allow("dynamodb:PutItem", table_arn)
    role_name, dynamodb = aws.enforced_session("dynamodb", [reads, writes])
    dynamodb.put_item(TableName=table, Item={"pk": {"S": "task#1"}})
    dynamodb.get_item(TableName=table, Key={"pk": {"S": "task#1"}})

    aws.set_statements(role_name, [reads])

    assert dynamodb.get_item(TableName=table, Key={"pk": {"S": "task#1"}})["Item"] == {"pk": {"S": "task#1"}}
    response = refused(lambda: dynamodb.put_item(TableName=table, Item={"pk": {"S": "task#2"}}))
    assert_access_denied(response, 400, role_name, "dynamodb:PutItem", table_arn)


def test_a_put_conditioned_on_leading_keys_is_allowed_for_handle_keys_and_denied_for_task_keys(aws: Aws) -> None:
    table, table_arn = aws.table()
    role_name, dynamodb = aws.enforced_session(
        "dynamodb",
        [
            allow(["dynamodb:GetItem", "dynamodb:UpdateItem"], table_arn),
            allow(["dynamodb:PutItem", "dynamodb:DeleteItem"], table_arn, Condition=handles_only()),
        ],
    )

    dynamodb.put_item(TableName=table, Item={"pk": {"S": "handle#x"}, "value": {"S": "v"}})
    dynamodb.delete_item(TableName=table, Key={"pk": {"S": "handle#x"}})
    put_task = refused(lambda: dynamodb.put_item(TableName=table, Item={"pk": {"S": "task#x"}}))
    delete_task = refused(lambda: dynamodb.delete_item(TableName=table, Key={"pk": {"S": "task#x"}}))

    assert_access_denied(put_task, 400, role_name, "dynamodb:PutItem", table_arn)
    assert_access_denied(delete_task, 400, role_name, "dynamodb:DeleteItem", table_arn)
    assert "Item" not in dynamodb.get_item(TableName=table, Key={"pk": {"S": "task#x"}})


def test_an_explicit_deny_wins_over_an_allow_only_where_its_condition_holds(aws: Aws) -> None:
    table, table_arn = aws.table()
    role_name, dynamodb = aws.enforced_session(
        "dynamodb",
        [
            allow("dynamodb:PutItem", table_arn),
            {
                "Action": "dynamodb:PutItem",
                "Effect": "Deny",
                "Resource": table_arn,
                "Condition": handles_only("audit#"),
            },
        ],
    )

    dynamodb.put_item(TableName=table, Item={"pk": {"S": "task#1"}})
    response = refused(lambda: dynamodb.put_item(TableName=table, Item={"pk": {"S": "audit#1"}}))

    assert response["Error"]["Code"] == "AccessDeniedException"
    assert response["Error"]["Message"] == (
        f"User: {session_arn(role_name)} is not authorized to perform: dynamodb:PutItem on resource: {table_arn} "
        "with an explicit deny in an identity-based policy"
    )


def test_a_query_on_an_index_is_authorized_against_the_index_arn_and_not_the_table(aws: Aws) -> None:
    table, table_arn = aws.table()
    index_arn = f"{table_arn}/index/by-owner"
    role_name, dynamodb = aws.enforced_session("dynamodb", [allow("dynamodb:Query", index_arn)])

    found = dynamodb.query(
        TableName=table,
        IndexName="by-owner",
        KeyConditionExpression="#o = :o",
        ExpressionAttributeNames={"#o": "owner"},
        ExpressionAttributeValues={":o": {"S": "alice"}},
    )
    on_table = refused(
        lambda: dynamodb.query(
            TableName=table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": "task#1"}},
        )
    )

    assert found["Items"] == []
    assert_access_denied(on_table, 400, role_name, "dynamodb:Query", table_arn)


def test_a_transaction_needs_the_per_item_action_and_its_leading_keys_for_every_item(aws: Aws) -> None:
    table, table_arn = aws.table()
    role_name, dynamodb = aws.enforced_session(
        "dynamodb",
        [allow("dynamodb:UpdateItem", table_arn), allow("dynamodb:PutItem", table_arn, Condition=handles_only())],
    )

    def transaction(put_key: str) -> None:
        dynamodb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": {"pk": {"S": put_key}}}},
                {
                    "Update": {
                        "TableName": table,
                        "Key": {"pk": {"S": "task#1"}},
                        "UpdateExpression": "SET v = :v",
                        "ExpressionAttributeValues": {":v": {"S": "1"}},
                    }
                },
            ]
        )

    transaction("handle#1")
    response = refused(lambda: transaction("task#2"))

    assert_access_denied(response, 400, role_name, "dynamodb:PutItem", table_arn)


# ------------------------------------------------------------------------------------ Step Functions

PASS_THROUGH: dict[str, Any] = {"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}


def waiting_on_token(function_arn: str) -> dict[str, Any]:
    """A workflow that waits on a task token handed to the function, like the task workflow's WaitForToken."""
    return {
        "StartAt": "WaitForToken",
        "States": {
            "WaitForToken": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
                "Parameters": {"FunctionName": function_arn, "Payload": {"taskToken.$": "$$.Task.Token"}},
                "End": True,
            }
        },
    }


def executions_of(state_machine_arn: str) -> str:
    """What CDK grants for "executions of this state machine"."""
    return state_machine_arn.replace(":stateMachine:", ":execution:") + ":*"


def test_step_functions_calls_are_authorized_against_the_state_machine_and_its_executions(aws: Aws) -> None:
    granted, _ = aws.state_machine(PASS_THROUGH, [LOGS_ONLY])
    other, _ = aws.state_machine(PASS_THROUGH, [LOGS_ONLY])
    role_name, sfn = aws.enforced_session(
        "stepfunctions",
        [
            allow("states:StartExecution", granted),
            allow(["states:DescribeExecution", "states:StopExecution"], executions_of(granted)),
        ],
    )

    execution_arn = sfn.start_execution(stateMachineArn=granted, name="task-1", input="{}")["executionArn"]
    described = aws.finished(execution_arn, sfn)
    start_other = refused(lambda: sfn.start_execution(stateMachineArn=other, name="task-1", input="{}"))

    assert described["status"] == "SUCCEEDED"
    assert_access_denied(start_other, 400, role_name, "states:StartExecution", other)


def test_send_task_success_is_allowed_only_to_a_role_granted_on_the_state_machine_holding_the_token(
    aws: Aws, invocations: list[Invocation]
) -> None:
    function_arn = aws.function()
    machine, _ = aws.state_machine(waiting_on_token(function_arn), [allow("lambda:InvokeFunction", function_arn)])
    elsewhere, _ = aws.state_machine(PASS_THROUGH, [LOGS_ONLY])
    _, api_role = aws.role([allow(["states:StartExecution", "states:SendTaskSuccess"], machine)])
    stranger_name, stranger_role = aws.role([allow("states:SendTaskSuccess", elsewhere)])
    api = aws.as_role("stepfunctions", api_role)
    stranger = aws.as_role("stepfunctions", stranger_role)
    iam_enforcement.enforce()
    execution_arn = api.start_execution(stateMachineArn=machine, name="task-1", input="{}")["executionArn"]
    token = eventually(
        lambda: next((i.payload["taskToken"] for i in invocations if i.function_arn == function_arn), None)
    )

    denied = refused(lambda: stranger.send_task_success(taskToken=token, output=json.dumps({"resumed": True})))
    api.send_task_success(taskToken=token, output=json.dumps({"resumed": True}))

    assert_access_denied(denied, 400, stranger_name, "states:SendTaskSuccess", machine)
    finished = aws.finished(execution_arn)
    assert (finished["status"], json.loads(finished["output"])) == ("SUCCEEDED", {"resumed": True})


def test_a_task_token_no_execution_holds_is_answered_invalid_token_without_authorization(aws: Aws) -> None:
    _, sfn = aws.enforced_session("stepfunctions", [LOGS_ONLY])

    response = refused(lambda: sfn.send_task_success(taskToken="not-a-token", output="{}"))

    assert response["Error"]["Code"] == "InvalidToken"


def test_the_interpreter_invokes_lambda_with_a_session_of_the_state_machines_role(
    aws: Aws, invocations: list[Invocation]
) -> None:
    function_arn = aws.function()
    allowed, allowed_role = aws.state_machine(
        invoking(function_arn, {"action": "run"}), [allow("lambda:InvokeFunction", function_arn)]
    )
    refused_machine, refused_role = aws.state_machine(
        invoking(function_arn, {"action": "run"}), [allow("lambda:GetFunction", "*")]
    )
    sfn = aws.as_admin("stepfunctions")
    iam_enforcement.enforce()

    succeeded = aws.finished(sfn.start_execution(stateMachineArn=allowed, name="run", input="{}")["executionArn"])
    failed = aws.finished(sfn.start_execution(stateMachineArn=refused_machine, name="run", input="{}")["executionArn"])

    assert succeeded["status"] == "SUCCEEDED"
    assert json.loads(succeeded["output"])["Payload"] == {"ok": True}
    assert [invocation.payload for invocation in invocations] == [{"action": "run"}]
    with pytest.raises(AccessDenied) as caught:  # the key the invoke carried is the allowed role's session
        authorize(invocations[0].access_key_id, "lambda:DeleteFunction", function_arn)
    assert caught.value.principal_arn == session_arn(allowed_role, STATE_MACHINE_SESSION_NAME)
    assert failed["status"] == "FAILED"
    assert failed["error"] == "Lambda.AccessDeniedException"
    principal = session_arn(refused_role, STATE_MACHINE_SESSION_NAME)
    assert failed["cause"].startswith(denial(principal, "lambda:InvokeFunction", function_arn) + " (Service: AWSLambda")


def test_the_interpreters_dynamodb_integration_is_authorized_by_the_state_machines_role(aws: Aws) -> None:
    table, table_arn = aws.table()
    mark_failed = {
        "StartAt": "MarkFailed",
        "States": {
            "MarkFailed": {
                "Type": "Task",
                "Resource": "arn:aws:states:::dynamodb:updateItem",
                "Parameters": {
                    "TableName": table,
                    "Key": {"pk": {"S": "task#1"}},
                    "UpdateExpression": "SET #s = :s",
                    "ExpressionAttributeNames": {"#s": "status"},
                    "ExpressionAttributeValues": {":s": {"S": "failed"}},
                },
                "End": True,
            }
        },
    }
    allowed, _ = aws.state_machine(mark_failed, [allow("dynamodb:UpdateItem", table_arn)])
    refused_machine, refused_role = aws.state_machine(mark_failed, [allow("dynamodb:GetItem", table_arn)])
    sfn = aws.as_admin("stepfunctions")
    iam_enforcement.enforce()

    succeeded = aws.finished(sfn.start_execution(stateMachineArn=allowed, name="fail", input="{}")["executionArn"])
    failed = aws.finished(sfn.start_execution(stateMachineArn=refused_machine, name="fail", input="{}")["executionArn"])

    assert succeeded["status"] == "SUCCEEDED"
    item = aws.as_admin("dynamodb").get_item(TableName=table, Key={"pk": {"S": "task#1"}})["Item"]
    assert item["status"] == {"S": "failed"}
    assert (failed["status"], failed["error"]) == ("FAILED", "DynamoDB.AccessDeniedException")
    principal = session_arn(refused_role, STATE_MACHINE_SESSION_NAME)
    assert failed["cause"].startswith(denial(principal, "dynamodb:UpdateItem", table_arn))


# ------------------------------------------------------------------------- Secrets Manager, Lambda, ...


def test_a_secret_is_read_by_name_or_partial_arn_only_with_a_grant_on_its_full_arn(aws: Aws) -> None:
    secrets = aws.setup("secretsmanager")
    name, other = unique("sealing"), unique("other")
    secret_arn = secrets.create_secret(Name=name, SecretString="key-material")["ARN"]
    other_arn = secrets.create_secret(Name=other, SecretString="elsewhere")["ARN"]
    role_name, client = aws.enforced_session("secretsmanager", [allow("secretsmanager:GetSecretValue", secret_arn)])

    by_name = client.get_secret_value(SecretId=name)["SecretString"]
    by_partial_arn = client.get_secret_value(SecretId=secret_arn.rsplit("-", 1)[0])["SecretString"]
    response = refused(lambda: client.get_secret_value(SecretId=other))

    assert (by_name, by_partial_arn) == ("key-material", "key-material")
    assert_access_denied(response, 400, role_name, "secretsmanager:GetSecretValue", other_arn)


def test_lambda_invoke_is_authorized_as_invoke_function_on_the_function_arn(
    aws: Aws, invocations: list[Invocation]
) -> None:
    function_arn = aws.function()
    function_name = function_arn.rsplit(":", 1)[-1]
    reader_name, reader_arn = aws.role([allow("lambda:GetFunction", function_arn)])
    _, invoker_arn = aws.role([allow("lambda:InvokeFunction", function_arn)])
    reader = aws.as_role("lambda", reader_arn)
    invoker = aws.as_role("lambda", invoker_arn)
    iam_enforcement.enforce()

    configuration = reader.get_function(FunctionName=function_name)["Configuration"]
    answer = json.loads(invoker.invoke(FunctionName=function_name, Payload=b'{"n": 1}')["Payload"].read())
    response = refused(lambda: reader.invoke(FunctionName=function_name, Payload=b"{}"))

    assert configuration["FunctionArn"] == function_arn
    assert answer == {"ok": True}
    assert [invocation.payload for invocation in invocations] == [{"n": 1}]
    assert_access_denied(response, 403, reader_name, "lambda:InvokeFunction", function_arn)


def test_put_events_is_authorized_against_the_event_bus_it_names(aws: Aws) -> None:
    bus = unique("bus")
    bus_arn = aws.setup("events").create_event_bus(Name=bus)["EventBusArn"]
    role_name, events = aws.enforced_session("events", [allow("events:PutEvents", bus_arn)])
    entry = {"Source": "mcp.tasks", "DetailType": "TaskCompleted", "Detail": "{}"}

    sent = events.put_events(Entries=[{**entry, "EventBusName": bus}])
    response = refused(lambda: events.put_events(Entries=[entry]))

    assert sent["FailedEntryCount"] == 0
    default_bus = f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/default"
    assert_access_denied(response, 400, role_name, "events:PutEvents", default_bus)


def test_s3_keeps_its_own_resources_and_errors_and_a_statement_whose_condition_fails_does_not_apply(
    aws: Aws,
) -> None:
    bucket = unique("assets")
    aws.setup("s3").create_bucket(Bucket=bucket)
    aws.setup("s3").put_object(Bucket=bucket, Key="private/a.txt", Body=b"p")
    elsewhere = {"StringEquals": {"aws:RequestedRegion": "eu-west-1"}}
    _, s3 = aws.enforced_session(
        "s3",
        [
            allow("s3:GetObject", f"arn:aws:s3:::{bucket}/*", Condition=elsewhere),
            allow(["s3:GetObject", "s3:PutObject"], f"arn:aws:s3:::{bucket}/public/*"),
        ],
    )

    s3.put_object(Bucket=bucket, Key="public/a.txt", Body=b"a")
    body = s3.get_object(Bucket=bucket, Key="public/a.txt")["Body"].read()
    response = refused(lambda: s3.get_object(Bucket=bucket, Key="private/a.txt"))

    assert body == b"a"
    assert (response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]) == (403, "AccessDenied")


# --------------------------------------------------------------------------------- the helpers' API


def test_authorize_is_silent_when_allowed_and_raises_the_aws_message_otherwise(aws: Aws) -> None:
    _, table_arn = aws.table()
    role_name, role_arn = aws.role([allow("dynamodb:PutItem", table_arn, Condition=handles_only())])
    key = assume_role_credentials(aws.endpoint, role_arn, SESSION)["AWS_ACCESS_KEY_ID"]

    authorize(key, "dynamodb:PutItem", table_arn, {LEADING_KEYS: ["handle#1"]})
    with pytest.raises(AccessDenied) as caught:
        authorize(key, "dynamodb:PutItem", table_arn, {LEADING_KEYS: ["task#1"]})

    assert str(caught.value) == "AccessDeniedException: " + denial(
        session_arn(role_name), "dynamodb:PutItem", table_arn
    )
    assert (caught.value.code, caught.value.explicit) == (400, False)


def test_authorize_refuses_an_access_key_moto_never_issued(aws: Aws) -> None:
    with pytest.raises(InvalidCredentials) as caught:
        authorize("ASIANEVERISSUED0000", "lambda:InvokeFunction", f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:f")

    assert (caught.value.code, caught.value.error_code) == (403, "UnrecognizedClientException")


def test_the_access_key_id_is_read_from_a_sigv4_authorization_header() -> None:
    request = AWSRequest(method="POST", url="http://localhost/2015-03-31/functions/f/invocations", data=b"{}")
    SigV4Auth(Credentials("ASIAEXAMPLEKEY123456", "secret", "token"), "lambda", REGION).add_auth(request)

    assert access_key_id_from_authorization(request.headers["Authorization"]) == "ASIAEXAMPLEKEY123456"
    assert access_key_id_from_authorization(None) is None
    assert access_key_id_from_authorization("Bearer abc") is None


def test_keys_moto_never_issued_are_answered_unrecognized_client_under_enforcement(aws: Aws) -> None:
    table, _ = aws.table()
    dynamodb = aws.client("dynamodb", {"AWS_ACCESS_KEY_ID": "ak", "AWS_SECRET_ACCESS_KEY": "sk"})
    iam_enforcement.enforce()

    response = refused(lambda: dynamodb.get_item(TableName=table, Key={"pk": {"S": "task#1"}}))

    assert response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert response["Error"]["Code"] == "UnrecognizedClientException"


def test_a_user_may_not_assume_a_role_only_a_service_may_assume_yet_the_helper_still_can(aws: Aws) -> None:
    role_name, role_arn = aws.role([LOGS_ONLY])
    sts = aws.as_admin("sts")
    iam_enforcement.enforce()

    response = refused(lambda: sts.assume_role(RoleArn=role_arn, RoleSessionName="user"))
    credentials = assume_role_credentials(aws.endpoint, role_arn, SESSION)

    assert response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert response["Error"]["Code"] == "AccessDenied"
    assert iam_enforcement.enforcing()
    identity = aws.client("sts", credentials).get_caller_identity()
    assert identity["Arn"] == session_arn(role_name)


def test_the_admin_user_may_call_anything_under_enforcement(aws: Aws) -> None:
    table, table_arn = aws.table()
    iam_enforcement.enforce()

    aws.as_admin("dynamodb").put_item(TableName=table, Item={"pk": {"S": "task#1"}})
    aws.as_admin("lambda").list_functions()

    assert aws.as_admin("dynamodb").get_item(TableName=table, Key={"pk": {"S": "task#1"}})["Item"]
    authorize(aws.admin["AWS_ACCESS_KEY_ID"], "dynamodb:DeleteTable", table_arn)  # a user's key: no exception


def test_a_condition_that_cannot_be_evaluated_here_keeps_an_allow_from_applying_and_a_deny_applies(
    aws: Aws,
) -> None:
    table, table_arn = aws.table()
    numeric = {"NumericLessThan": {"dynamodb:ReturnConsumedCapacity": "1"}}
    allow_name, allow_arn = aws.role([allow("dynamodb:GetItem", table_arn, Condition=numeric)])
    deny_name, deny_arn = aws.role(
        [
            allow("dynamodb:GetItem", table_arn),
            {"Action": "dynamodb:GetItem", "Effect": "Deny", "Resource": table_arn, "Condition": numeric},
        ]
    )
    allowed_only_if, denied_if = aws.as_role("dynamodb", allow_arn), aws.as_role("dynamodb", deny_arn)
    iam_enforcement.enforce()

    not_allowed = refused(lambda: allowed_only_if.get_item(TableName=table, Key={"pk": {"S": "task#1"}}))
    denied = refused(lambda: denied_if.get_item(TableName=table, Key={"pk": {"S": "task#1"}}))

    assert_access_denied(not_allowed, 400, allow_name, "dynamodb:GetItem", table_arn)
    assert denied["Error"]["Message"].endswith("with an explicit deny in an identity-based policy")
    assert session_arn(deny_name) in denied["Error"]["Message"]


def test_relaxed_restores_enforcement_and_install_may_be_called_again(aws: Aws) -> None:
    iam_enforcement.install()
    iam_enforcement.enforce()

    with iam_enforcement.relaxed():
        assert not iam_enforcement.enforcing()
        aws.setup("dynamodb").list_tables()

    assert iam_enforcement.enforcing()
    response = refused(lambda: aws.setup("dynamodb").list_tables())
    assert response["Error"]["Code"] == "UnrecognizedClientException"
