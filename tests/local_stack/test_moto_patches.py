"""Each patch of `local_stack.moto_patches`: the AWS behaviour with it, moto 5.2.5's own without it.

For a patch named `p` there are two tests: `test_p__as_aws` (fails on an unpatched moto) and
`test_p__moto_without_it` (runs inside `moto_patches.without("p")` and asserts what moto does
instead: it fails once a moto upgrade fixes that point, which says the patch can go).
`test_every_patch_has_both_tests` keeps a new patch from coming in untested.

One `ThreadedMotoServer` for the module, as the local stack runs it (state machines executed,
MOTO_PORT pointing the interpreter at it), with every patch applied; each test makes its own
uniquely named resources. Enforcement is relaxed after each test.
"""

from __future__ import annotations

import io
import json
import queue
import re
import threading
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from local_stack.aws import (
    LambdaThrottled,
    register_function,
    register_invoker,
    unregister_function,
)

from local_stack import iam_enforcement, moto_patches
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


def error_of(response: dict[str, Any]) -> tuple[int, str, str]:
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"], response["Error"]["Message"]


@dataclass
class Aws:
    endpoint: str
    admin: dict[str, str]

    def client(self, service: str, credentials: dict[str, str] | None = None) -> Any:
        keys = credentials or {"AWS_ACCESS_KEY_ID": "setup", "AWS_SECRET_ACCESS_KEY": "setup"}
        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=keys["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=keys["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=keys.get("AWS_SESSION_TOKEN"),
        )

    def role(self, statements: list[dict[str, Any]], service: str = "lambda.amazonaws.com") -> str:
        name = unique("role")
        trust = {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}
        iam = self.client("iam")
        arn = iam.create_role(
            RoleName=name, AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [trust]})
        )["Role"]["Arn"]
        if statements:
            policy = {"Version": "2012-10-17", "Statement": statements}
            iam.put_role_policy(RoleName=name, PolicyName="DefaultPolicy", PolicyDocument=json.dumps(policy))
        return str(arn)

    def as_role(self, service: str, statements: list[dict[str, Any]]) -> Any:
        return self.client(
            service, iam_enforcement.assume_role_credentials(self.endpoint, self.role(statements), "patch-test")
        )

    def function(self) -> tuple[str, str]:
        """A Lambda function in moto (what runs is what the test registers): (name, ARN)."""
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w") as bundle:
            bundle.writestr("handler.py", "")
        created = self.client("lambda").create_function(
            FunctionName=unique("fn"),
            Runtime="python3.13",
            Role=self.role([]),
            Handler="handler.main",
            Code={"ZipFile": archive.getvalue()},
        )
        return str(created["FunctionName"]), str(created["FunctionArn"])

    def state_machine(self, definition: dict[str, Any], statements: list[dict[str, Any]] | None = None) -> str:
        role = self.role(statements or [], "states.amazonaws.com")
        created = self.client("stepfunctions").create_state_machine(
            name=unique("machine"), definition=json.dumps(definition), roleArn=role
        )
        return str(created["stateMachineArn"])

    def start(self, machine: str) -> str:
        return str(self.client("stepfunctions").start_execution(stateMachineArn=machine, input="{}")["executionArn"])

    def finished(self, execution_arn: str, timeout: float = 20.0) -> dict[str, Any]:
        return finished(self.client("stepfunctions", self.admin), execution_arn, timeout)

    def table(self, **extra: Any) -> str:
        name = unique("table")
        self.client("dynamodb").create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            **extra,
        )
        return name


@pytest.fixture(scope="module")
def aws() -> Iterator[Aws]:
    with embedded_moto() as (endpoint, admin):
        moto_patches.apply()
        yield Aws(endpoint, admin)


# ------------------------------------------------------------------------------------ the registry


def test_every_patch_has_both_tests() -> None:
    names = [patch.name for patch in moto_patches.patches()]
    missing = [
        f"test_{name}__{kind}"
        for name in names
        for kind in ("as_aws", "moto_without_it")
        if not callable(globals().get(f"test_{name}__{kind}"))
    ]
    described = [
        patch.name
        for patch in moto_patches.patches()
        if not (patch.aws and patch.moto and patch.reference.startswith("https://docs.aws.amazon.com/"))
    ]
    readme = (Path(moto_patches.__file__).parent / "README.md").read_text(encoding="utf-8")
    unlisted = [name for name in names if f"| `{name}` |" not in readme]
    assert len(names) == len(set(names)) >= 10
    assert (missing, described, unlisted) == ([], [], [])


def test_without_undoes_the_named_patches_only_inside_the_block(aws: Aws) -> None:
    from moto.awslambda_simple.models import LambdaSimpleBackend

    patched = LambdaSimpleBackend.invoke
    before = moto_patches.applied()

    with moto_patches.without("lambda_invoke_runs_the_function"):
        inside = moto_patches.applied()
        original = LambdaSimpleBackend.invoke

    assert set(before) - set(inside) == {"lambda_invoke_runs_the_function"}
    assert original.__module__ == "moto.awslambda_simple.models"
    assert set(moto_patches.applied()) == set(before)
    assert LambdaSimpleBackend.invoke.__module__ == patched.__module__ == "local_stack.moto_patches._lambda"
    with pytest.raises(ValueError, match="no moto patch"), moto_patches.without("no_such_patch"):
        pass


# ------------------------------------------------------------------------------------------ Lambda


def test_lambda_invoke_runs_the_function__as_aws(aws: Aws) -> None:
    name, _ = aws.function()
    lam = aws.client("lambda")
    register_function(name, lambda event, context: {"doubled": event["n"] * 2})
    try:
        answered = lam.invoke(FunctionName=name, Payload=b'{"n": 2}')
        register_function(name, lambda event, context: int("x"))
        failed = lam.invoke(FunctionName=name, Payload=b"{}")

        def throttled(body: bytes, headers: dict[str, str]) -> tuple[bytes, str | None]:
            raise LambdaThrottled(name, "ReservedFunctionConcurrentInvocationLimitExceeded")

        register_invoker(name, throttled)
        too_many = refused(lambda: lam.invoke(FunctionName=name, Payload=b"{}"))
    finally:
        unregister_function(name)

    assert json.loads(answered["Payload"].read()) == {"doubled": 4}
    assert "FunctionError" not in answered
    assert failed["FunctionError"] == "Unhandled"
    assert json.loads(failed["Payload"].read()) == {
        "errorType": "ValueError",
        "errorMessage": "invalid literal for int() with base 10: 'x'",
    }
    assert error_of(too_many) == (429, "TooManyRequestsException", "Rate Exceeded.")
    assert too_many["Reason"] == "ReservedFunctionConcurrentInvocationLimitExceeded"


def test_lambda_invoke_runs_the_function__moto_without_it(aws: Aws) -> None:
    name, _ = aws.function()
    register_function(name, lambda event, context: {"doubled": event["n"] * 2})
    try:
        with moto_patches.without("lambda_invoke_runs_the_function"):
            answered = aws.client("lambda").invoke(FunctionName=name, Payload=b'{"n": 2}')
    finally:
        unregister_function(name)

    assert answered["Payload"].read() == b'{"n": 2}'  # the request, echoed: nothing ran
    assert "FunctionError" not in answered


# ---------------------------------------------------------------------------------- Step Functions


@dataclass
class Parked:
    execution_arn: str
    token: str


def park(aws: Aws, then: dict[str, Any] | None = None) -> Parked:
    """A running execution waiting on a task token (and, once answered, running `then`: a long Wait)."""
    name, arn = aws.function()
    tokens: queue.Queue[str] = queue.Queue()
    register_function(name, lambda event, context: tokens.put(event["token"]) or {})
    definition = {
        "StartAt": "Park",
        "States": {
            "Park": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
                "Parameters": {"FunctionName": arn, "Payload": {"token.$": "$$.Task.Token"}},
                **({"Next": "Then"} if then else {"End": True}),
            },
            **({"Then": then} if then else {}),
        },
    }
    execution_arn = aws.start(aws.state_machine(definition))
    try:
        return Parked(execution_arn, tokens.get(timeout=20))
    finally:
        unregister_function(name)


LINGER = {"Type": "Wait", "Seconds": 600, "End": True}


def history_types(aws: Aws, execution_arn: str) -> list[str]:
    events = aws.client("stepfunctions").get_execution_history(executionArn=execution_arn)["events"]
    return [str(event["type"]) for event in events]


def test_stop_execution_ends_a_callback_wait__as_aws(aws: Aws) -> None:
    parked = park(aws)
    sfn = aws.client("stepfunctions")

    sfn.stop_execution(executionArn=parked.execution_arn, error="Stop", cause="test")

    assert aws.finished(parked.execution_arn)["status"] == "ABORTED"
    assert eventually(lambda: history_types(aws, parked.execution_arn)[-1] == "ExecutionAborted")
    late = refused(lambda: sfn.send_task_failure(taskToken=parked.token, error="Wake"))
    assert error_of(late) == (400, "TaskTimedOut", moto_patches.TOKEN_CLOSED_MESSAGE)


def test_stop_execution_ends_a_callback_wait__moto_without_it(aws: Aws) -> None:
    with moto_patches.without("stop_execution_ends_a_callback_wait"):
        parked = park(aws)
        sfn = aws.client("stepfunctions")
        sfn.stop_execution(executionArn=parked.execution_arn, error="Stop", cause="test")
        stopped = sfn.describe_execution(executionArn=parked.execution_arn)["status"]
        history = history_types(aws, parked.execution_arn)
        # The interpreter still waits on the callback: an answer sent now is taken, and only then
        # does the stopped execution end.
        woken = sfn.send_task_success(taskToken=parked.token, output="{}")

    assert (stopped, "ExecutionAborted" in history) == ("RUNNING", False)
    assert woken["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert aws.finished(parked.execution_arn)["status"] == "ABORTED"


def stopped_while_choosing(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """An execution stopped as its Choice state starts evaluating its rules (where a StopExecution may land
    in AWS too: the stop is made from the interpreter's thread, just before the first rule): its status
    and its last history event, once the interpreter ended."""
    from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent
    from moto.stepfunctions.parser.asl.component.state.choice.choice_rule import ChoiceRule

    sfn = aws.client("stepfunctions")
    stops: list[str] = []

    def stop_then_evaluate(rule: Any, env: Any) -> None:
        execution_arn = env.states.context_object.context_object_data["Execution"]["Id"]
        if not stops:
            stops.append(execution_arn)
            sfn.stop_execution(executionArn=execution_arn, error="Stop", cause="cancelled")
        EvalComponent.eval(rule, env)

    monkeypatch.setattr(ChoiceRule, "eval", stop_then_evaluate)
    # Each rule the stopped program skips leaves the Choice popping something else: the third finds nothing.
    rules = [{"Variable": f"$.{name}", "IsPresent": True, "Next": "Done"} for name in ("x", "y", "z")]
    choose = {
        "StartAt": "Pick",
        "States": {
            "Pick": {"Type": "Choice", "Choices": rules, "Default": "Done"},
            "Done": {"Type": "Pass", "End": True},
        },
    }
    execution_arn = aws.start(aws.state_machine(choose))
    ended = ("ExecutionAborted", "ExecutionFailed")
    assert eventually(lambda: history_types(aws, execution_arn)[-1] in ended)
    return aws.finished(execution_arn)["status"], history_types(aws, execution_arn)[-1]


def test_stop_during_a_choice_ends_aborted__as_aws(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    assert stopped_while_choosing(aws, monkeypatch) == ("ABORTED", "ExecutionAborted")


def test_stop_during_a_choice_ends_aborted__moto_without_it(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    with moto_patches.without("stop_during_a_choice_ends_aborted"):
        assert stopped_while_choosing(aws, monkeypatch) == ("FAILED", "ExecutionFailed")


def pass_through() -> dict[str, Any]:
    return {"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}


def statuses_seen(aws: Aws, reports: int) -> list[str]:
    """Run one execution to its end, listening until `reports` statuses came for it: those statuses."""
    seen: list[tuple[str, str]] = []
    stop_listening = moto_patches.on_execution_status(
        lambda execution: seen.append((str(execution.exec_arn), str(execution.exec_status.value)))
    )
    try:
        execution_arn = aws.start(aws.state_machine(pass_through()))
        aws.finished(execution_arn)
        # The end is reported just after DescribeExecution shows it (the worker records it first).
        eventually(lambda: len([arn for arn, _ in seen if arn == execution_arn]) >= reports or None)
    finally:
        stop_listening()
    return [status for arn, status in seen if arn == execution_arn]


def test_execution_status_changes_are_reported__as_aws(aws: Aws) -> None:
    assert statuses_seen(aws, reports=2) == ["RUNNING", "SUCCEEDED"]


def test_execution_status_changes_are_reported__moto_without_it(aws: Aws) -> None:
    with moto_patches.without("execution_status_changes_are_reported"):
        statuses = statuses_seen(aws, reports=0)

    assert statuses == []


def test_answered_task_token_times_out__as_aws(aws: Aws) -> None:
    parked = park(aws, then=LINGER)
    sfn = aws.client("stepfunctions")
    sfn.send_task_success(taskToken=parked.token, output="{}")
    try:
        success = refused(lambda: sfn.send_task_success(taskToken=parked.token, output="{}"))
        failure = refused(lambda: sfn.send_task_failure(taskToken=parked.token, error="Late"))
        status = sfn.describe_execution(executionArn=parked.execution_arn)["status"]
    finally:
        sfn.stop_execution(executionArn=parked.execution_arn)

    assert status == "RUNNING"
    closed = (400, "TaskTimedOut", moto_patches.TOKEN_CLOSED_MESSAGE)
    assert [error_of(success), error_of(failure)] == [closed, closed]


def test_answered_task_token_times_out__moto_without_it(aws: Aws) -> None:
    with moto_patches.without("answered_task_token_times_out"):
        parked = park(aws, then=LINGER)
        sfn = aws.client("stepfunctions")
        sfn.send_task_success(taskToken=parked.token, output="{}")
        try:
            again = sfn.send_task_success(taskToken=parked.token, output="{}")
        finally:
            sfn.stop_execution(executionArn=parked.execution_arn)

    assert again["ResponseMetadata"]["HTTPStatusCode"] == 200  # accepted a second time


def entered_time(aws: Aws) -> str:
    definition = {
        "StartAt": "Look",
        "States": {"Look": {"Type": "Pass", "Parameters": {"entered.$": "$$.State.EnteredTime"}, "End": True}},
    }
    finished = aws.finished(aws.start(aws.state_machine(definition)))
    assert finished["status"] == "SUCCEEDED", finished
    return str(json.loads(finished["output"])["entered"])


def test_entered_time_in_milliseconds__as_aws(aws: Aws) -> None:
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entered_time(aws))


def test_entered_time_in_milliseconds__moto_without_it(aws: Aws) -> None:
    with moto_patches.without("entered_time_in_milliseconds"):
        moto_time = entered_time(aws)

    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00", moto_time)


def run_as_the_role(aws: Aws) -> dict[str, Any]:
    """Under enforcement, an execution whose role may invoke the function it calls: how it ended."""
    name, arn = aws.function()
    machine = aws.state_machine(
        invoking(arn, {"n": 1}), [{"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": arn}]
    )
    register_function(name, lambda event, context: {"ok": event["n"]})
    sfn = aws.client("stepfunctions", aws.admin)
    iam_enforcement.enforce()
    try:
        return aws.finished(str(sfn.start_execution(stateMachineArn=machine, input="{}")["executionArn"]))
    finally:
        iam_enforcement.relax()
        unregister_function(name)


def test_interpreter_calls_with_the_state_machine_role__as_aws(aws: Aws) -> None:
    finished = run_as_the_role(aws)

    assert finished["status"] == "SUCCEEDED"
    assert json.loads(finished["output"])["Payload"] == {"ok": 1}


def test_interpreter_calls_with_the_state_machine_role__moto_without_it(aws: Aws) -> None:
    with moto_patches.without("interpreter_calls_with_the_state_machine_role"):
        finished = run_as_the_role(aws)

    assert (finished["status"], finished["error"]) == ("FAILED", "Lambda.UnrecognizedClientException")
    assert finished["cause"].startswith("The security token included in the request is invalid.")


def parsing_of_a_machine_created_and_run_twice(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int, list[str]]:
    """A state machine is created, then, counted: a second one with the same definition is created and
    run twice. How many times its text was lexed and its components built, and how the runs ended."""
    from moto.stepfunctions.parser.asl.antlr.runtime.ASLLexer import ASLLexer
    from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor

    definition = {"StartAt": "Done", "States": {"Done": {"Type": "Pass", "Result": {"n": 1}, "End": True}}}
    aws.state_machine(definition)
    counts = {ASLLexer: 0, Preprocessor: 0}
    for counted in counts:
        original = counted.__init__

        def counting(self: Any, *args: Any, _counted: Any = counted, _original: Any = original, **kwargs: Any) -> None:
            counts[_counted] += 1
            _original(self, *args, **kwargs)

        monkeypatch.setattr(counted, "__init__", counting)
    machine = aws.state_machine(definition)
    sfn = aws.client("stepfunctions")
    runs = [sfn.start_execution(stateMachineArn=machine, name=unique("run"), input="{}") for _ in range(2)]
    ended = [aws.finished(str(run["executionArn"])) for run in runs]
    return counts[ASLLexer], counts[Preprocessor], [f"{end['status']} {end['output']}" for end in ended]


def test_definitions_are_parsed_once__as_aws(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    lexed, built, ended = parsing_of_a_machine_created_and_run_twice(aws, monkeypatch)

    assert (lexed, built, ended) == (0, 2, ['SUCCEEDED {"n": 1}', 'SUCCEEDED {"n": 1}'])


def test_definitions_are_parsed_once__moto_without_it(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    with moto_patches.without("definitions_are_parsed_once"):
        lexed, built, ended = parsing_of_a_machine_created_and_run_twice(aws, monkeypatch)

    assert (lexed, built, ended) == (3, 3, ['SUCCEEDED {"n": 1}', 'SUCCEEDED {"n": 1}'])


# ---------------------------------------------------------------------------------------- DynamoDB

RENDEZVOUS_SECONDS = 0.5


def race_two_conditional_puts(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Two PutItem with attribute_not_exists(pk) on one new key, each holding at its condition until
    the other reaches it too (or RENDEZVOUS_SECONDS pass): what each answered."""
    from moto.dynamodb.models import table as table_module

    table = aws.table()
    original = table_module.get_filter_expression
    arrived = threading.Semaphore(0)
    both = threading.Event()
    count = [0]
    count_lock = threading.Lock()

    def get_filter_expression(expression: Any, *args: Any, **kwargs: Any) -> Any:
        if expression == "attribute_not_exists(pk)":
            with count_lock:
                count[0] += 1
                if count[0] == 2:
                    both.set()
            arrived.release()
            both.wait(RENDEZVOUS_SECONDS)  # the condition is read: wait for the other writer
        return original(expression, *args, **kwargs)

    monkeypatch.setattr(table_module, "get_filter_expression", get_filter_expression)
    outcomes: list[str] = []

    def put() -> None:
        try:
            aws.client("dynamodb").put_item(
                TableName=table, Item={"pk": {"S": "k"}}, ConditionExpression="attribute_not_exists(pk)"
            )
            outcomes.append("written")
        except ClientError as error:
            outcomes.append(str(error.response["Error"]["Code"]))

    writers = [threading.Thread(target=put) for _ in range(2)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(timeout=20)
    return sorted(outcomes)


def test_conditional_writes_are_atomic__as_aws(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    assert race_two_conditional_puts(aws, monkeypatch) == ["ConditionalCheckFailedException", "written"]


def test_conditional_writes_are_atomic__moto_without_it(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    with moto_patches.without("conditional_writes_are_atomic"):
        outcomes = race_two_conditional_puts(aws, monkeypatch)

    assert outcomes == ["written", "written"]


def read_stream_once(aws: Aws) -> tuple[str, set[str]]:
    """Put an item, read the table's stream once: (the iterator used, the iterators moto still holds)."""
    from moto.dynamodbstreams.models import dynamodbstreams_backends

    table = aws.table(StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"})
    aws.client("dynamodb").put_item(TableName=table, Item={"pk": {"S": "k"}})
    streams = aws.client("dynamodbstreams")
    stream_arn = streams.list_streams(TableName=table)["Streams"][0]["StreamArn"]
    shard = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=stream_arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")[
        "ShardIterator"
    ]
    records = streams.get_records(ShardIterator=iterator)["Records"]
    assert [record["eventName"] for record in records] == ["INSERT"]
    return str(iterator), set(dynamodbstreams_backends[ACCOUNT][REGION].shard_iterators)


def test_used_shard_iterators_are_forgotten__as_aws(aws: Aws) -> None:
    iterator, held = read_stream_once(aws)

    assert iterator not in held


def test_used_shard_iterators_are_forgotten__moto_without_it(aws: Aws) -> None:
    with moto_patches.without("used_shard_iterators_are_forgotten"):
        iterator, held = read_stream_once(aws)

    assert iterator in held


# --------------------------------------------------------------------------------------------- IAM


def get_item_granted_on_the_table(aws: Aws) -> Callable[[], Any]:
    table = aws.table()
    table_arn = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}"
    dynamodb = aws.as_role("dynamodb", [{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": table_arn}])
    iam_enforcement.enforce()
    return lambda: dynamodb.get_item(TableName=table, Key={"pk": {"S": "k"}})


def test_iam_authorizes_the_resources_a_request_names__as_aws(aws: Aws) -> None:
    get_item = get_item_granted_on_the_table(aws)

    assert "Item" not in get_item()


def test_iam_authorizes_the_resources_a_request_names__moto_without_it(aws: Aws) -> None:
    with moto_patches.without("iam_authorizes_the_resources_a_request_names"):
        response = refused(get_item_granted_on_the_table(aws))

    # Checked against resource "*" (the statement names the table), answered in XML to a JSON client.
    role = re.escape(f"arn:aws:sts::{ACCOUNT}:assumed-role/") + r"role-\w+/patch-test"
    assert error_of(response)[:2] == (403, "403")
    assert re.search(
        rf"<Code>AccessDenied</Code><Message>User: {role} is not authorized to perform: dynamodb:GetItem</Message>",
        error_of(response)[2],
    )


def get_object_granted_where_a_condition_does_not_hold(aws: Aws) -> Callable[[], Any]:
    bucket = unique("bucket")
    aws.client("s3").create_bucket(Bucket=bucket)
    aws.client("s3").put_object(Bucket=bucket, Key="a.txt", Body=b"a")
    elsewhere = {"StringEquals": {"aws:RequestedRegion": "eu-west-1"}}
    statement = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{bucket}/*"}
    s3 = aws.as_role("s3", [{**statement, "Condition": elsewhere}])
    iam_enforcement.enforce()
    return lambda: s3.get_object(Bucket=bucket, Key="a.txt")["Body"].read()


def test_iam_s3_conditions_are_evaluated__as_aws(aws: Aws) -> None:
    response = refused(get_object_granted_where_a_condition_does_not_hold(aws))

    assert error_of(response) == (403, "AccessDenied", "Access Denied")


def test_iam_s3_conditions_are_evaluated__moto_without_it(aws: Aws) -> None:
    with moto_patches.without("iam_s3_conditions_are_evaluated"):
        body = get_object_granted_where_a_condition_does_not_hold(aws)()

    assert body == b"a"  # the condition on a key moto does not supply is ignored


# ----------------------------------------------------------------------------------------- Cognito


def signing_keys_of_new_pools(aws: Aws) -> tuple[list[Any], list[dict[str, Any]]]:
    """Three new user pools: the key objects moto signs their tokens with, and their published JWKS."""
    import urllib.request

    from moto.cognitoidp.models import cognitoidp_backends

    cognito = aws.client("cognito-idp")
    pools = [cognito.create_user_pool(PoolName=unique("pool"))["UserPool"]["Id"] for _ in range(3)]
    backend = cognitoidp_backends[ACCOUNT][REGION]
    published = []
    for pool in pools:
        with urllib.request.urlopen(f"{aws.endpoint}/{pool}/.well-known/jwks.json") as answer:
            published.append(json.loads(answer.read()))
    return [backend.user_pools[pool].json_web_key for pool in pools], published


def test_user_pools_import_their_signing_key_once__as_aws(aws: Aws) -> None:
    keys, published = signing_keys_of_new_pools(aws)

    assert keys[0] is keys[1] is keys[2]
    (jwk,) = published[0]["keys"]
    assert published == [published[0]] * 3
    assert (jwk["kid"], jwk["n"]) == ("dummy", keys[0].as_dict(private=False)["n"])


def test_user_pools_import_their_signing_key_once__moto_without_it(aws: Aws) -> None:
    with moto_patches.without("user_pools_import_their_signing_key_once"):
        keys, _ = signing_keys_of_new_pools(aws)

    assert len({id(key) for key in keys}) == 3
    assert {key.as_dict(private=False)["n"] for key in keys} == {keys[0].as_dict(private=False)["n"]}


# ------------------------------------------------------------------------------------------ server


def lookups_while_three_requests_are_answered(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int, list[int]]:
    """How many times the server listed moto's package directory and inspected a response class while
    answering three ListTables requests, and how it answered them."""
    import inspect
    import os

    import moto

    package = os.path.dirname(moto.__file__)
    counts = {"listed": 0, "inspected": 0}
    listdir, getmembers = os.listdir, inspect.getmembers

    def counting_listdir(path: Any = ".") -> list[str]:
        counts["listed"] += str(path) == package
        return listdir(path)

    def counting_getmembers(target: Any, predicate: Any = None) -> list[tuple[str, Any]]:
        counts["inspected"] += 1
        return getmembers(target, predicate)

    dynamodb = aws.client("dynamodb")
    dynamodb.list_tables()  # whatever the first request of a process looks up
    monkeypatch.setattr(os, "listdir", counting_listdir)
    monkeypatch.setattr(inspect, "getmembers", counting_getmembers)
    answers = [dynamodb.list_tables()["ResponseMetadata"]["HTTPStatusCode"] for _ in range(3)]
    monkeypatch.undo()
    return counts["listed"], counts["inspected"], answers


def test_requests_are_dispatched_from_a_fixed_index__as_aws(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    assert lookups_while_three_requests_are_answered(aws, monkeypatch) == (0, 0, [200, 200, 200])


def test_requests_are_dispatched_from_a_fixed_index__moto_without_it(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    with moto_patches.without("requests_are_dispatched_from_a_fixed_index"):
        looked_up = lookups_while_three_requests_are_answered(aws, monkeypatch)

    assert looked_up == (3, 3, [200, 200, 200])
