"""The DynamoDB task store under moto: conditional transitions, races, expiry and owner isolation."""

from __future__ import annotations

import contextlib
import json
import math
import random
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from botocore.exceptions import ClientError
from local_stack.aws import EmbeddedAws
from local_stack.provision import ProvisionedStack

from mcp_runtime import wire
from mcp_runtime._aws import AwsRejected
from mcp_runtime.limits import MAX_TASK_KEPT_ANSWERS_BYTES, encoded_size, kept_answer_bytes
from mcp_runtime.mrtr import elicitation_request
from mcp_runtime.tasks import schema
from mcp_runtime.tasks.errors import (
    OperationsOutOfOrder,
    TaskAnswersFull,
    TaskConflict,
    TaskNotFound,
    TaskStoreRefused,
)
from mcp_runtime.tasks.history import DynamoTaskHistory, TaskSummary
from mcp_runtime.tasks.models import (
    CANCELLED,
    COMPLETED,
    EFFECT_RESUME,
    EFFECT_STOP,
    FAILED,
    INPUT_REQUIRED,
    WORKING,
    ClientSnapshot,
    TaskRecord,
    expiry_epoch,
    iso_timestamp,
)
from mcp_runtime.tasks.service import new_task_id
from mcp_runtime.tasks.store import AnswerOutcome, CancelOutcome, DynamoTaskStore, part_key, step_key, task_key
from tests.integration.task_harness import ALICE, MALLORY, Clock, TaskEnvironment, TaskResources, request_context

TTL_MS = 60_000
# A task's items: its hot item and its two parts (`mcp_runtime.tasks.store`).
TASK_ITEMS = (("task#", ""), ("part#", "#call"), ("part#", "#work"))
RESULT = {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}
ERROR = {"code": wire.INTERNAL_ERROR, "message": "Task execution failed"}


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def request(message: str) -> dict[str, Any]:
    return elicitation_request(message, {"type": "object", "properties": {"ok": {"type": "boolean"}}}).to_wire()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def task_env(embedded_aws: EmbeddedAws, deployed: ProvisionedStack) -> TaskEnvironment:
    """The template's table alone: the store's own behaviour, with no execution started from its stream."""
    return TaskEnvironment(
        embedded_aws, TaskResources.of(deployed), embedded_aws.client("dynamodb"), embedded_aws.client("stepfunctions")
    )


@pytest.fixture
def store(task_env: TaskEnvironment, clock: Clock) -> DynamoTaskStore:
    return task_env.store(clock)


def create(store: DynamoTaskStore, clock: Clock, ttl_ms: int | None = TTL_MS, owner: str = ALICE.id) -> TaskRecord:
    stamp = iso_timestamp(clock())
    record = TaskRecord(
        task_id=new_task_id(),
        owner=owner,
        status=WORKING,
        created_at=stamp,
        last_updated_at=stamp,
        ttl_ms=ttl_ms,
        version=1,
        tool_name="some_tool",
        arguments={"n": 1, "nested": {"list": [1, 2.5, "x", None]}},
        client=ClientSnapshot(wire.PROTOCOL_VERSION, {"elicitation": {}}),
        prepared={"name": "Alice"},
        poll_interval_ms=500,
        expires_at=expiry_epoch(clock(), ttl_ms),
        create_token=(token := new_task_id()),
        write_id=token,
        execution_name="",
    )
    store.create(record)
    return record


def await_input(store: DynamoTaskStore, task_id: str, keys: list[str], token: str = "token-1") -> TaskRecord:
    """What the worker's store_token step does: questions under fresh keys and the task token."""
    record = store.get(task_id)
    issued = record.issued_keys + tuple((key, key.split(".")[0]) for key in keys)
    store.await_input(
        task_id, record.version, {key: request(f"question {key}") for key in keys}, issued, {"step": 1}, token
    )
    return store.get(task_id)


# ---- creation, reads, expiry ------------------------------------------------------------------------


def test_a_created_task_reads_back_exactly_as_written(store: DynamoTaskStore, clock: Clock) -> None:
    record = create(store, clock)

    assert store.load(record.task_id) == record


def test_the_item_records_owner_creation_time_and_an_expiry_of_creation_plus_ttl(
    store: DynamoTaskStore, clock: Clock, task_env: TaskEnvironment
) -> None:
    clock.now = 1_900_000_000.25
    record = create(store, clock, ttl_ms=90_500)

    item = task_env.dynamodb.get_item(TableName=store.table_name, Key=task_key(record.task_id), ConsistentRead=True)[
        "Item"
    ]

    assert item[schema.PARTITION_KEY] == {"S": f"task#{record.task_id}"}
    assert item[schema.OWNER_INDEX_PARTITION_KEY] == {"S": ALICE.id}
    assert item[schema.OWNER_INDEX_SORT_KEY] == {"S": "2030-03-17T17:46:40.250Z"}
    assert item[schema.TTL_ATTRIBUTE] == {"N": str(math.ceil(1_900_000_000.25 + 90.5))}
    assert item["version"] == {"N": "1"}


def test_task_ids_are_unguessable_url_safe_and_at_least_128_bits() -> None:
    ids = {new_task_id() for _ in range(1000)}

    assert len(ids) == 1000
    assert all(len(task_id) == 32 and task_id.replace("-", "").replace("_", "").isalnum() for task_id in ids)


def test_a_task_without_ttl_has_no_expiry_attribute_and_never_expires(
    store: DynamoTaskStore, clock: Clock, task_env: TaskEnvironment
) -> None:
    record = create(store, clock, ttl_ms=None)
    item = task_env.dynamodb.get_item(TableName=store.table_name, Key=task_key(record.task_id))["Item"]

    clock.advance(10 * 365 * 86_400)

    assert schema.TTL_ATTRIBUTE not in item
    assert item["ttlMs"] == {"NULL": True}
    assert store.get(record.task_id, ALICE.id).ttl_ms is None


def test_a_task_is_readable_until_its_ttl_lapses_and_not_found_after_though_dynamodb_still_holds_it(
    store: DynamoTaskStore, clock: Clock, task_env: TaskEnvironment
) -> None:
    record = create(store, clock)

    clock.advance(TTL_MS / 1000 - 0.5)
    assert store.get(record.task_id, ALICE.id).task_id == record.task_id

    clock.advance(1.5)
    with pytest.raises(TaskNotFound, match=r"^Task not found$"):
        store.get(record.task_id, ALICE.id)
    assert "Item" in task_env.dynamodb.get_item(TableName=store.table_name, Key=task_key(record.task_id))


def test_writes_to_an_expired_task_answer_not_found(store: DynamoTaskStore, clock: Clock) -> None:
    record = create(store, clock)
    await_input(store, record.task_id, ["confirm"])
    clock.advance(TTL_MS / 1000 + 1)

    with pytest.raises(TaskNotFound):
        store.cancel(record.task_id, ALICE.id)
    with pytest.raises(TaskNotFound):
        store.answer(record.task_id, ALICE.id, {"confirm": accept(ok=True)})


def test_creating_a_task_with_an_existing_id_is_a_conflict(store: DynamoTaskStore, clock: Clock) -> None:
    record = create(store, clock)

    with pytest.raises(TaskConflict):
        store.create(replace(record, create_token="another create", arguments={"n": 2}))
    assert store.load(record.task_id) == record


def test_a_create_sent_again_after_its_answer_was_lost_meets_its_own_write_and_succeeds(
    store: DynamoTaskStore, clock: Clock
) -> None:
    record = create(store, clock)

    store.create(record)  # the same create token: this create, applied before

    assert store.load(record.task_id) == record


def test_a_discarded_create_is_gone_with_its_parts_and_a_discard_of_someone_elses_create_is_refused_quietly(
    store: DynamoTaskStore, clock: Clock, task_env: TaskEnvironment
) -> None:
    kept, dropped = create(store, clock), create(store, clock)

    store.discard(kept.task_id, "not its create token")
    store.discard(dropped.task_id, dropped.create_token)
    store.discard("never-created-0000000000", "anything")

    assert store.load(kept.task_id) == kept
    with pytest.raises(TaskNotFound):
        store.get(dropped.task_id, ALICE.id)
    keys = [item["pk"]["S"] for item in task_env.dynamodb.scan(TableName=store.table_name)["Items"]]
    assert sorted(keys) == sorted(f"{prefix}{kept.task_id}{suffix}" for prefix, suffix in TASK_ITEMS)


# ---- owner isolation ----------------------------------------------------------------------------------


def test_another_principal_gets_exactly_the_not_found_of_an_unknown_id(store: DynamoTaskStore, clock: Clock) -> None:
    record = create(store, clock)
    await_input(store, record.task_id, ["confirm"])

    def outcome(call: Any, *args: Any) -> tuple[type[BaseException], str]:
        with pytest.raises(TaskNotFound) as caught:
            call(*args)
        return type(caught.value), str(caught.value)

    not_found = (TaskNotFound, "Task not found")
    for task_id, principal in ((record.task_id, MALLORY.id), ("no-such-task", ALICE.id)):
        assert outcome(store.get, task_id, principal) == not_found
        assert outcome(store.answer, task_id, principal, {"confirm": accept(ok=True)}) == not_found
        assert outcome(store.answer, task_id, principal, {}) == not_found
        assert outcome(store.cancel, task_id, principal) == not_found
    after = store.get(record.task_id, ALICE.id)
    assert after.status == INPUT_REQUIRED
    assert after.answers == {}


# ---- transitions --------------------------------------------------------------------------------------


def test_a_terminal_status_is_written_once(store: DynamoTaskStore, clock: Clock) -> None:
    record = create(store, clock)
    store.finish(record.task_id, COMPLETED, RESULT, expected_version=1)

    with pytest.raises(TaskConflict):
        store.finish(record.task_id, FAILED, ERROR)
    with pytest.raises(TaskConflict):
        store.set_status_message(record.task_id, "still going")
    assert store.cancel(record.task_id, ALICE.id) == CancelOutcome(False)
    final = store.get(record.task_id, ALICE.id)
    assert (final.status, final.result, final.error, final.version) == (COMPLETED, RESULT, None, 2)


def test_a_completion_written_with_a_stale_version_loses(store: DynamoTaskStore, clock: Clock) -> None:
    record = create(store, clock)
    await_input(store, record.task_id, ["confirm"])
    store.answer(record.task_id, ALICE.id, {"confirm": accept(ok=True)})

    with pytest.raises(TaskConflict):
        store.finish(record.task_id, COMPLETED, RESULT, expected_version=record.version)
    assert store.get(record.task_id, ALICE.id).status == WORKING


def test_a_cancel_before_completion_wins_and_the_late_completion_is_refused(
    store: DynamoTaskStore, clock: Clock
) -> None:
    record = create(store, clock)

    assert store.cancel(record.task_id, ALICE.id) == CancelOutcome(True)
    with pytest.raises(TaskConflict):
        store.finish(record.task_id, COMPLETED, RESULT, expected_version=record.version)
    final = store.get(record.task_id, ALICE.id)
    assert (final.status, final.result) == (CANCELLED, None)


def test_a_completion_before_a_cancel_wins_and_the_cancel_is_a_no_op(store: DynamoTaskStore, clock: Clock) -> None:
    record = create(store, clock)
    store.finish(record.task_id, COMPLETED, RESULT, expected_version=record.version)

    assert store.cancel(record.task_id, ALICE.id) == CancelOutcome(False)
    assert store.get(record.task_id, ALICE.id).status == COMPLETED


def test_cancelling_a_task_awaiting_input_clears_its_token_and_questions_and_asks_for_its_execution_to_stop(
    store: DynamoTaskStore, clock: Clock
) -> None:
    record = create(store, clock)
    await_input(store, record.task_id, ["confirm"], token="waiting-token")

    outcome = store.cancel(record.task_id, ALICE.id)

    after = store.get(record.task_id, ALICE.id)
    assert outcome == CancelOutcome(True)
    assert (after.status, after.input_requests, after.task_token, after.effect) == (CANCELLED, {}, None, EFFECT_STOP)


def test_an_answer_arriving_after_a_cancel_is_ignored(store: DynamoTaskStore, clock: Clock) -> None:
    record = create(store, clock)
    await_input(store, record.task_id, ["confirm"])
    store.cancel(record.task_id, ALICE.id)

    assert store.answer(record.task_id, ALICE.id, {"confirm": accept(ok=True)}) == AnswerOutcome((), False)
    assert store.get(record.task_id, ALICE.id).answers == {}


def test_awaiting_input_after_a_cancel_is_refused(store: DynamoTaskStore, clock: Clock) -> None:
    record = create(store, clock)
    store.cancel(record.task_id, ALICE.id)

    outcome = store.await_input(
        record.task_id, record.version, {"confirm": request("?")}, (("confirm", "confirm"),), {}, "t"
    )

    assert (outcome.applied, outcome.record.status) == (False, CANCELLED)
    assert store.get(record.task_id, ALICE.id).status == CANCELLED


def test_await_input_sent_again_after_its_answer_was_lost_finds_itself_applied(
    store: DynamoTaskStore, clock: Clock
) -> None:
    record = create(store, clock)
    issued = (("confirm", "confirm"),)
    store.await_input(record.task_id, record.version, {"confirm": request("?")}, issued, {}, "token-a")

    again = store.await_input(record.task_id, record.version, {"confirm": request("?")}, issued, {}, "token-b")

    assert (again.applied, again.record.status, again.record.task_token) == (True, INPUT_REQUIRED, "token-a")
    assert store.replace_token(record.task_id, "token-a", "token-b")
    assert not store.replace_token(record.task_id, "token-a", "token-c")
    assert store.get(record.task_id).task_token == "token-b"


def test_progress_is_recorded_while_working_and_refused_once_the_task_stopped(
    store: DynamoTaskStore, clock: Clock
) -> None:
    record = create(store, clock)
    clock.advance(2)
    store.set_status_message(record.task_id, "3 of 10 done")

    working = store.get(record.task_id, ALICE.id)
    store.cancel(record.task_id, ALICE.id)

    assert (working.status_message, working.version) == ("3 of 10 done", 1)
    assert working.last_updated_at == iso_timestamp(clock())
    with pytest.raises(TaskConflict):
        store.set_status_message(record.task_id, "4 of 10 done")


# ---- answers -------------------------------------------------------------------------------------------


def test_answering_every_outstanding_key_resumes_and_keeps_the_token_until_the_run_consumes_it(
    store: DynamoTaskStore, clock: Clock
) -> None:
    record = create(store, clock)
    await_input(store, record.task_id, ["name", "confirm"], token="token-7")

    outcome = store.answer(record.task_id, ALICE.id, {"name": accept(name="A"), "confirm": accept(ok=True)})

    after = store.get(record.task_id, ALICE.id)
    assert (outcome, outcome.task_token) == (AnswerOutcome(("name", "confirm"), True), "token-7")  # sent next
    assert (after.status, after.input_requests, after.task_token, after.effect) == (
        WORKING,
        {},
        "token-7",
        EFFECT_RESUME,
    )
    assert after.answers == {"name": accept(name="A"), "confirm": accept(ok=True)}
    store.set_status_message(record.task_id, "resumed")
    consumed = store.get(record.task_id, ALICE.id)
    assert (consumed.task_token, consumed.effect) == (None, None)


def test_an_update_sent_again_after_its_answer_was_lost_asks_for_the_resume_again(
    store: DynamoTaskStore, clock: Clock
) -> None:
    record = create(store, clock)
    await_input(store, record.task_id, ["confirm"], token="token-8")
    answer = {"confirm": accept(ok=True)}
    store.answer(record.task_id, ALICE.id, answer)
    first = store.get(record.task_id, ALICE.id)

    again = store.answer(record.task_id, ALICE.id, answer)

    after = store.get(record.task_id, ALICE.id)
    assert (again, again.task_token) == (AnswerOutcome(("confirm",), True), "token-8")  # the API sends it again
    assert (after.status, after.task_token, after.effect, after.answers) == (WORKING, "token-8", EFFECT_RESUME, answer)
    assert after.write_id != first.write_id  # a new stream record: the supervisor sends the token again
    assert store.answer(record.task_id, ALICE.id, {"confirm": accept(ok=False)}) == AnswerOutcome((), False)


def test_a_partial_answer_leaves_only_the_outstanding_keys_and_does_not_resume(
    store: DynamoTaskStore, clock: Clock
) -> None:
    record = create(store, clock)
    await_input(store, record.task_id, ["name", "confirm"])

    outcome = store.answer(record.task_id, ALICE.id, {"name": accept(name="A")})

    after = store.get(record.task_id, ALICE.id)
    assert outcome == AnswerOutcome(("name",), False)
    assert after.status == INPUT_REQUIRED
    assert list(after.input_requests) == ["confirm"]
    assert after.task_token == "token-1"


def test_answers_to_never_issued_already_answered_and_superseded_keys_are_ignored(
    store: DynamoTaskStore, clock: Clock
) -> None:
    record = create(store, clock)
    await_input(store, record.task_id, ["name", "confirm"])

    assert store.answer(record.task_id, ALICE.id, {"never-issued": accept(ok=True)}) == AnswerOutcome((), False)
    assert store.answer(record.task_id, ALICE.id, {"name": accept(name="first")}) == AnswerOutcome(("name",), False)
    assert store.answer(
        record.task_id, ALICE.id, {"name": accept(name="second"), "confirm": accept(ok=True)}
    ) == AnswerOutcome(("confirm",), True)
    # The tool asks again (its earlier answer did not validate): a new wire key supersedes "name".
    await_input(store, record.task_id, ["name.2"], token="token-2")
    assert store.answer(record.task_id, ALICE.id, {"name": accept(name="third")}) == AnswerOutcome((), False)

    after = store.get(record.task_id, ALICE.id)
    assert after.answers == {"name": accept(name="first"), "confirm": accept(ok=True)}
    assert list(after.input_requests) == ["name.2"]
    assert after.answers_by_tool_key() == {"name": accept(name="first"), "confirm": accept(ok=True)}


def test_the_newest_answered_key_is_what_the_tool_sees_for_its_own_key(store: DynamoTaskStore, clock: Clock) -> None:
    record = create(store, clock)
    await_input(store, record.task_id, ["name"])
    store.answer(record.task_id, ALICE.id, {"name": {"action": "accept", "content": {"name": 42}}})
    await_input(store, record.task_id, ["name.2"], token="token-2")
    store.answer(record.task_id, ALICE.id, {"name.2": accept(name="Alice")})

    assert store.get(record.task_id).answers_by_tool_key() == {"name": accept(name="Alice")}


def test_an_empty_update_changes_nothing(store: DynamoTaskStore, clock: Clock) -> None:
    record = create(store, clock)
    before = await_input(store, record.task_id, ["confirm"])

    assert store.answer(record.task_id, ALICE.id, {}) == AnswerOutcome((), False)
    assert store.get(record.task_id, ALICE.id) == before


# ---- errors --------------------------------------------------------------------------------------------


def test_a_refusal_becomes_a_store_refusal_chained_from_the_client_error_and_is_not_retried(
    task_env: TaskEnvironment,
) -> None:
    calls: list[str] = []
    task_env.dynamodb.meta.events.register("before-call.dynamodb.GetItem", lambda **_: calls.append("GetItem"))
    missing_table = DynamoTaskStore("no-such-table", task_env.dynamodb)

    with pytest.raises(TaskStoreRefused, match="ResourceNotFoundException") as caught:
        missing_table.get("anything")

    assert isinstance(caught.value.__cause__, AwsRejected)
    assert isinstance(caught.value.__cause__.__cause__, ClientError)
    assert calls == ["GetItem"]


# ---- randomized interleavings --------------------------------------------------------------------------


class Interleaving:
    """One task, three actors taking turns in a random order, each acting on what it last read.

    worker: reads, then completes / asks for input / fails / reports progress with the version it read, or
    records its next step on the step item of its slot (or dies between the step's mark and its record),
    as a run that begins then (its first write, refused once the task does not work) or as one that
    began before (its step writes leave the hot item alone, so they land even after a cancel or a settle);
    client: answers a random mix of keys (outstanding, answered, never issued) or cancels;
    reconciler: reads, then settles failed with the version it read (an execution found dead).
    """

    def __init__(self, store: DynamoTaskStore, clock: Clock, rng: random.Random) -> None:
        self.store = store
        self.rng = rng
        self.clock = clock
        self.record = create(store, clock)
        self.task_id = self.record.task_id
        self.worker_view: TaskRecord | None = None
        self.reconciler_view: TaskRecord | None = None
        self.first_answers: dict[str, Any] = {}
        self.terminal: TaskRecord | None = None
        self.last_seen = self.record
        self.asks = 0
        self.recorded: dict[str, dict[str, Any]] = {}
        # A write of the running tool (progress, a step) since the last questions: it consumed the
        # token their answers resume the execution with (that run is the resumed one).
        self.token_consumed = False
        self.begun = False  # a run began (its first write landed): later steps may be that run's

    def step(self) -> None:
        actor = self.rng.choice((self.worker, self.worker, self.client, self.client, self.reconciler))
        actor()
        self.check()

    def worker(self) -> None:
        if self.worker_view is None:
            self.worker_view = self.store.get(self.task_id)
            return
        view, self.worker_view = self.worker_view, None
        move = self.rng.choice(("complete", "ask", "ask", "protocol_error", "crash", "progress", "step"))
        try:
            if move == "step":
                slot = len(self.recorded)
                key, now = f"step:s{slot}", self.clock()
                if not self.begun or self.rng.random() < 0.5:  # a run that begins now, else one that began before
                    self.store.begin_run(self.task_id, f"run-{slot}")
                    self.token_consumed = self.begun = True
                self.store.mark_step(self.task_id, key, mark("worker", now + 60), now, slot=slot)
                if self.rng.random() < 0.8:  # else: the invocation died in the step, before its record
                    self.recorded[key] = self.store.record_operation(self.task_id, key, {"v": slot}, None, slot=slot)
            elif move == "complete":
                self.store.finish(self.task_id, COMPLETED, RESULT, expected_version=view.version)
            elif move == "protocol_error":
                self.store.finish(self.task_id, FAILED, {"code": wire.INVALID_PARAMS, "message": "bad"}, view.version)
            elif move == "crash":  # the state machine's Catch: no version, only "not yet terminal"
                self.store.finish(self.task_id, FAILED, ERROR)
            elif move == "progress":
                self.store.set_status_message(self.task_id, "busy")
                self.token_consumed = True
            else:
                self.asks += 1
                keys = [f"q{self.asks}a", f"q{self.asks}b"][: self.rng.randint(1, 2)]
                issued = view.issued_keys + tuple((key, key) for key in keys)
                asked = self.store.await_input(
                    self.task_id, view.version, {k: request(k) for k in keys}, issued, {}, f"token-{self.asks}"
                )
                self.token_consumed = self.token_consumed and not asked.applied
        except TaskConflict:
            pass

    def client(self) -> None:
        current = self.last_seen  # a client acts on its last poll, which may be stale by now
        if self.rng.random() < 0.2:
            self.store.cancel(self.task_id, ALICE.id)
            return
        candidates = list(current.input_requests) + list(current.answers) + ["never-issued"]
        chosen = self.rng.sample(candidates, k=self.rng.randint(0, len(candidates)))
        responses = {key: accept(ok=self.rng.random() < 0.5) for key in chosen}
        outcome = self.store.answer(self.task_id, ALICE.id, responses)
        for key in outcome.accepted_keys:
            assert self.first_answers.setdefault(key, responses[key]) == responses[key], f"{key} answered twice"
        if outcome.resumed:
            resumed = self.store.get(self.task_id)
            # The token stays until the resumed run's first write (an answer sent again after it finds none).
            assert resumed.status == WORKING, "resumed, yet not working"
            assert resumed.task_token is not None or self.token_consumed, "resumed without a token to send"

    def reconciler(self) -> None:
        if self.reconciler_view is None:
            self.reconciler_view = self.store.get(self.task_id)
            return
        view, self.reconciler_view = self.reconciler_view, None
        with contextlib.suppress(TaskConflict):
            self.store.finish(self.task_id, FAILED, ERROR, expected_version=view.version)

    def check(self) -> None:
        now = self.last_seen = self.store.get(self.task_id, ALICE.id)  # never lost
        issued = {wire_key for wire_key, _ in now.issued_keys}
        assert now.status in (WORKING, INPUT_REQUIRED, COMPLETED, FAILED, CANCELLED)
        if self.terminal is not None:
            assert now == self.terminal, "a terminal task changed"
        if now.is_terminal:
            self.terminal = now
            assert (now.result is not None) == (now.status == COMPLETED)
            assert (now.error is not None) == (now.status == FAILED)
            assert now.input_requests == {} and now.task_token is None
        elif now.status == INPUT_REQUIRED:
            assert now.input_requests and now.task_token is not None
        else:  # working: the task token of the last questions stays until the resumed run's first write
            assert now.input_requests == {}
        assert set(now.input_requests) <= issued and set(now.answers) <= issued
        assert not set(now.input_requests) & set(now.answers), "a key is both answered and outstanding"
        if now.is_terminal:  # settled: what only a working task needs is gone, whatever it carried
            assert (now.answers, now.issued_keys, now.arguments) == ({}, (), {})
        else:
            assert now.answers == self.first_answers, "an answer was lost or overwritten"


# The 200 seeded interleavings in four parts of 50, so parallel test workers share them.
SEED_PARTS = [range(start, start + 50) for start in range(0, 200, 50)]


@pytest.mark.parametrize("seeds", SEED_PARTS, ids=[f"seeds-{part.start}-{part.stop - 1}" for part in SEED_PARTS])
def test_no_interleaving_of_cancel_update_completion_and_crash_loses_a_task_or_breaks_its_state(
    store: DynamoTaskStore, clock: Clock, seeds: range
) -> None:
    for seed in seeds:
        run = Interleaving(store, clock, random.Random(seed))
        for _ in range(8):
            run.step()
        store.cancel(run.task_id, ALICE.id)  # whatever happened, the client can always end it
        final = store.get(run.task_id, ALICE.id)
        assert final.is_terminal, f"seed {seed}: task left {final.status}"
        kept = {key: entry for key, entry in store.load(run.task_id).steps.items() if entry.get("state") != "running"}
        assert kept == run.recorded, f"seed {seed}: a step record lost, or one kept that the worker was refused"


def test_concurrent_conditional_writes_to_one_item_have_exactly_one_winner(task_env: TaskEnvironment) -> None:
    """DynamoDB applies each write to an item atomically; the local moto is held to the same (without
    the `conditional_writes_are_atomic` moto patch, several writers win in about a third of these rounds)."""
    key = {schema.PARTITION_KEY: {"S": "task#race-0000000000000000"}}
    big = {"big": {"S": "x" * 300_000}, "fields": {"M": {f"k{n}": {"S": "v" * 100} for n in range(500)}}}
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0001)  # threads interleave often, as on a busy machine
    try:
        for round_number in range(10):
            task_env.dynamodb.put_item(TableName=task_env.resources.table_name, Item={**key, **big})
            winners = claim_concurrently(task_env, key, writers=24)
            item = task_env.dynamodb.get_item(TableName=task_env.resources.table_name, Key=key, ConsistentRead=True)
            assert len(winners) == 1, f"round {round_number}: {winners}"
            assert item["Item"]["winner"] == {"N": str(winners[0])}
    finally:
        sys.setswitchinterval(interval)


def claim_concurrently(task_env: TaskEnvironment, key: dict[str, Any], writers: int) -> list[int]:
    winners: list[int] = []

    def claim(writer: int) -> None:
        try:
            task_env.dynamodb.update_item(
                TableName=task_env.resources.table_name,
                Key=key,
                UpdateExpression="SET #winner = :writer",
                ConditionExpression="attribute_not_exists(#winner)",
                ExpressionAttributeNames={"#winner": "winner"},
                ExpressionAttributeValues={":writer": {"N": str(writer)}},
            )
            winners.append(writer)
        except ClientError as exc:
            assert exc.response["Error"]["Code"] == "ConditionalCheckFailedException"

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return winners


@pytest.mark.parametrize(("status", "missing"), [(COMPLETED, "result"), (FAILED, "error")])
def test_a_terminal_task_item_without_its_payload_is_an_internal_error_not_an_invented_answer(
    task_env: TaskEnvironment, store: DynamoTaskStore, clock: Clock, status: str, missing: str
) -> None:
    from mcp_runtime.errors import InternalError

    record = create(store, clock)
    task_env.dynamodb.update_item(
        TableName=task_env.resources.table_name,
        Key=task_key(record.task_id),
        UpdateExpression="SET #status = :status REMOVE #payload",
        ExpressionAttributeNames={"#status": "status", "#payload": missing},
        ExpressionAttributeValues={":status": {"S": status}},
    )
    service = task_env.service()
    with pytest.raises(InternalError) as refused:
        service.get(record.task_id, request_context())
    assert refused.value.to_error_object() == {"code": wire.INTERNAL_ERROR, "message": "Failed to retrieve task"}


# ---- what a task keeps of its answers -----------------------------------------------------------------
def test_answers_past_what_a_task_keeps_across_rounds_are_refused_and_write_nothing(
    store: DynamoTaskStore, clock: Clock
) -> None:
    record = create(store, clock)
    await_input(store, record.task_id, ["a"])
    big = accept(ok=True, note="x" * (60 * 1024))
    store.answer(record.task_id, ALICE.id, {"a": big})
    kept = store.get(record.task_id).answers_bytes
    assert kept == kept_answer_bytes("a", big) == encoded_size(big) + 3
    await_input(store, record.task_id, ["b"], token="token-2")
    before = store.get(record.task_id)

    with pytest.raises(TaskAnswersFull) as refused:
        store.answer(record.task_id, ALICE.id, {"b": big})

    assert (refused.value.kept_bytes, refused.value.adding_bytes) == (kept, kept_answer_bytes("b", big))
    assert refused.value.limit_bytes == MAX_TASK_KEPT_ANSWERS_BYTES
    assert store.get(record.task_id) == before
    small = accept(ok=True)
    assert store.answer(record.task_id, ALICE.id, {"b": small}) == AnswerOutcome(("b",), True)
    assert store.get(record.task_id).answers_bytes == kept + kept_answer_bytes("b", small)


# ---- the owner index, as the template declares it ----------------------------------------------------------
def test_the_owner_index_holds_only_what_the_history_reads_and_the_history_pages_from_it(
    task_env: TaskEnvironment, store: DynamoTaskStore, clock: Clock
) -> None:
    table = task_env.resources.table_name
    indexes = task_env.dynamodb.describe_table(TableName=table)["Table"]["GlobalSecondaryIndexes"]
    (index,) = [index for index in indexes if index["IndexName"] == schema.OWNER_INDEX]  # beside ActiveTasks
    assert (index["IndexName"], index["Projection"]) == (
        schema.OWNER_INDEX,
        {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(schema.OWNER_INDEX_ATTRIBUTES)},
    )
    first = create(store, clock)
    clock.advance(1)
    second = create(store, clock)
    clock.advance(1)
    store.set_status_message(second.task_id, "half way")
    create(store, clock, owner=MALLORY.id)

    indexed = task_env.dynamodb.query(
        TableName=table,
        IndexName=schema.OWNER_INDEX,
        KeyConditionExpression="#owner = :owner",
        ExpressionAttributeNames={"#owner": schema.OWNER_INDEX_PARTITION_KEY},
        ExpressionAttributeValues={":owner": {"S": ALICE.id}},
    )["Items"]
    keys = {schema.PARTITION_KEY, schema.OWNER_INDEX_PARTITION_KEY, schema.OWNER_INDEX_SORT_KEY}
    assert sorted(sorted(item) for item in indexed) == sorted(
        [
            sorted(keys | set(schema.OWNER_INDEX_ATTRIBUTES) - {"statusMessage"}),
            sorted(keys | set(schema.OWNER_INDEX_ATTRIBUTES)),
        ]
    )

    history = DynamoTaskHistory(table, task_env.dynamodb, clock=clock)
    newest = history.page(ALICE.id, limit=1)
    assert newest.tasks == [
        TaskSummary(second.task_id, "some_tool", WORKING, second.created_at, iso_timestamp(clock()), "half way")
    ]
    assert newest.next_cursor is not None
    older = history.page(ALICE.id, limit=1, cursor=newest.next_cursor)
    assert older.tasks == [TaskSummary(first.task_id, "some_tool", WORKING, first.created_at, first.created_at, None)]


# ---- a step's running mark ------------------------------------------------------------------------------
def mark(run: str, expires: float) -> dict[str, Any]:
    return {"state": "running", "run": run, "expires": expires}


def begun(store: DynamoTaskStore, clock: Clock, run: str = "run-1", ttl_ms: int | None = TTL_MS) -> TaskRecord:
    """A task whose run began (its first write: the step items open to it), as every run does."""
    record = create(store, clock, ttl_ms=ttl_ms)
    store.begin_run(record.task_id, run)
    return record


@pytest.fixture
def table_calls(task_env: TaskEnvironment) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """(operation, parameters) of each call the store makes to the table during the test."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def record(model: Any, params: dict[str, Any], **_: Any) -> None:
        calls.append((model.name, params))

    task_env.dynamodb.meta.events.register("before-parameter-build.dynamodb.*", record)
    yield calls
    task_env.dynamodb.meta.events.unregister("before-parameter-build.dynamodb.*", record)


def batch_gets(calls: list[tuple[str, dict[str, Any]]]) -> list[int]:
    """How many keys each BatchGetItem among `calls` asked for."""
    return [
        sum(len(table["Keys"]) for table in params["RequestItems"].values())
        for name, params in calls
        if name == "BatchGetItem"
    ]


# A step's entry is on the work part (`slot` None: the first small records, and tasks from before
# step items) or on the step item of its slot: the same rules hold in both places.
PLACES = pytest.mark.parametrize("slot", [None, 0], ids=["on the work part", "on its step item"])


@PLACES
def test_a_step_is_marked_once_until_its_mark_expires_and_then_another_run_takes_it_over(
    store: DynamoTaskStore, clock: Clock, slot: int | None
) -> None:
    record = begun(store, clock)
    now = clock()
    first = mark("run-1", now + 60)

    assert store.mark_step(record.task_id, "step:charge", first, now, slot=slot) == first
    assert store.mark_step(record.task_id, "step:charge", mark("run-2", now + 90), now + 59, slot=slot) == first
    later = mark("run-3", now + 200)
    assert store.mark_step(record.task_id, "step:charge", later, now + 61, slot=slot) == later  # run-1 died


@PLACES
def test_a_recorded_value_replaces_any_runs_mark_and_the_first_value_wins(
    store: DynamoTaskStore, clock: Clock, slot: int | None
) -> None:
    record = begun(store, clock)
    store.mark_step(record.task_id, "step:charge", mark("run-1", clock() + 60), clock(), slot=slot)

    kept = store.record_operation(record.task_id, "step:charge", {"v": "from run 2", "ms": 5}, {}, slot=slot)
    again = store.record_operation(record.task_id, "step:charge", {"v": "from run 1", "ms": 9}, {}, slot=slot)
    marked = store.mark_step(record.task_id, "step:charge", mark("run-3", clock() + 60), clock(), slot=slot)

    assert kept == again == marked == {"v": "from run 2", "ms": 5}
    assert store.load(record.task_id).steps == {"step:charge": kept}


@PLACES
def test_a_run_removes_only_its_own_mark(store: DynamoTaskStore, clock: Clock, slot: int | None) -> None:
    record = begun(store, clock)
    theirs = mark("run-1", clock() + 60)
    store.mark_step(record.task_id, "step:charge", theirs, clock(), slot=slot)

    store.unmark_step(record.task_id, "step:charge", "run-2", slot=slot)
    assert store.load(record.task_id).steps == {"step:charge": theirs}
    store.unmark_step(record.task_id, "step:charge", "run-1", slot=slot)
    assert store.load(record.task_id).steps == {}


def test_a_steps_mark_and_record_are_one_write_each_of_its_own_item_with_the_tasks_ttl_and_leave_the_hot_item_alone(
    store: DynamoTaskStore, clock: Clock, task_env: TaskEnvironment, table_calls: list[tuple[str, dict[str, Any]]]
) -> None:
    record = begun(store, clock)
    hot = store.get(record.task_id)
    table_calls.clear()

    store.mark_step(record.task_id, "step:charge", mark("run-1", clock() + 60), clock(), slot=0, expires_at=1234)
    store.record_operation(record.task_id, "step:charge", {"v": 1, "ms": 5}, None, slot=0, expires_at=1234)

    assert [(name, params["Key"]) for name, params in table_calls] == [("UpdateItem", step_key(record.task_id, 0))] * 2
    item = task_env.dynamodb.get_item(
        TableName=task_env.resources.table_name, Key=step_key(record.task_id, 0), ConsistentRead=True
    )["Item"]
    assert item == {
        **step_key(record.task_id, 0),
        schema.STEP_KEY_ATTRIBUTE: {"S": "step:charge"},
        schema.STEP_RECORD_ATTRIBUTE: {"M": {"v": {"S": "1"}, "ms": {"N": "5"}}},
        schema.TTL_ATTRIBUTE: {"N": "1234"},
    }
    assert store.get(record.task_id) == hot
    loaded = store.load(record.task_id)
    assert (loaded.step_items, loaded.steps_open, loaded.steps, loaded.step_slots) == (
        0,
        True,
        {"step:charge": {"v": 1, "ms": 5}},
        {"step:charge": 0},
    )


def test_the_workers_read_finds_the_step_items_a_run_wrote_past_the_count_up_to_the_first_slot_none_wrote(
    store: DynamoTaskStore, clock: Clock, table_calls: list[tuple[str, dict[str, Any]]]
) -> None:
    record = begun(store, clock)
    for slot in range(15):
        store.record_operation(record.task_id, f"step:s{slot}", {"v": slot}, None, slot=slot)
    store.mark_step(record.task_id, "step:s15", mark("run-1", clock() + 60), clock(), slot=15)
    store.unmark_step(record.task_id, "step:s15", "run-1", slot=15)  # taken back: the slot stays, empty
    store.record_operation(record.task_id, "step:s16", {"v": 16}, None, slot=16)
    store.record_operation(record.task_id, "step:s18", {"v": 18}, None, slot=18)  # past a slot none wrote
    table_calls.clear()

    loaded = store.load(record.task_id)

    assert loaded.steps == {f"step:s{slot}": {"v": slot} for slot in (*range(15), 16)}
    assert batch_gets(table_calls) == [3, 10, 20]  # the hot item and its parts; the looks past the count


def test_a_run_that_ends_at_a_boundary_counts_its_step_items_and_a_task_of_few_steps_is_then_read_in_one_request(
    store: DynamoTaskStore, clock: Clock, table_calls: list[tuple[str, dict[str, Any]]]
) -> None:
    record = begun(store, clock)
    for slot in range(3):  # each marked on its item, recorded on the work part (the first small records)
        store.mark_step(record.task_id, f"step:s{slot}", mark("run-1", clock() + 60), clock(), slot=slot)
        store.record_operation(record.task_id, f"step:s{slot}", {"v": slot, "n": slot}, {"at": slot})
    store.checkpoint(record.task_id, {"at": 3}, step_items=3)
    table_calls.clear()

    loaded = store.load(record.task_id)

    assert (loaded.step_items, loaded.steps_open, loaded.scratch) == (3, False, {"at": 3})
    assert loaded.steps == {f"step:s{slot}": {"v": slot, "n": slot} for slot in range(3)}
    assert batch_gets(table_calls) == [3]


def test_a_task_whose_step_items_1_0_0_counted_is_read_whole_gaps_of_deleted_marks_included(
    store: DynamoTaskStore, clock: Clock, task_env: TaskEnvironment, table_calls: list[tuple[str, dict[str, Any]]]
) -> None:
    # 1.0.0 counted each step item on the hot item before writing it, and deleted a mark taken back.
    record = create(store, clock)
    for slot in (0, 2):
        task_env.dynamodb.put_item(
            TableName=task_env.resources.table_name,
            Item={
                **step_key(record.task_id, slot),
                schema.STEP_KEY_ATTRIBUTE: {"S": f"step:s{slot}"},
                schema.STEP_RECORD_ATTRIBUTE: {"M": {"v": {"S": str(slot)}}},
            },
        )
    task_env.dynamodb.update_item(
        TableName=task_env.resources.table_name,
        Key=task_key(record.task_id),
        UpdateExpression="SET #count = :count",
        ExpressionAttributeNames={"#count": schema.STEP_ITEMS_ATTRIBUTE},
        ExpressionAttributeValues={":count": {"N": "3"}},
    )
    table_calls.clear()

    loaded = store.load(record.task_id)

    assert (loaded.steps, loaded.step_slots) == (
        {"step:s0": {"v": 0}, "step:s2": {"v": 2}},
        {"step:s0": 0, "step:s2": 2},
    )
    assert batch_gets(table_calls) == [3, 3]


def test_the_step_items_count_only_grows_when_a_slower_run_ends_at_a_boundary_with_fewer(
    store: DynamoTaskStore, clock: Clock
) -> None:
    record = begun(store, clock)
    store.record_operation(record.task_id, "wait:", {"until": clock() + 60}, None, slot=9, step_items=10)
    store.begin_run(record.task_id, "run-slow")

    store.checkpoint(record.task_id, {}, step_items=3)

    assert (store.get(record.task_id).step_items, store.get(record.task_id).steps_open) == (10, True)


@pytest.mark.parametrize(("counted", "shown"), [(0, (2, False)), (5, (5, True))], ids=["fewer", "more"])
def test_questions_count_the_step_items_their_run_wrote_unless_another_run_counted_more(
    store: DynamoTaskStore, clock: Clock, counted: int, shown: tuple[int, bool]
) -> None:
    record = begun(store, clock)
    if counted:  # a run that went further ended at its own boundary, then this one began again
        store.checkpoint(record.task_id, {}, step_items=counted)
        store.begin_run(record.task_id, "run-2")
    for slot in range(2):
        store.record_operation(record.task_id, f"step:s{slot}", {"v": slot}, None, slot=slot)
    version = store.get(record.task_id).version

    asked = store.await_input(record.task_id, version, {"q": request("q")}, (("q", "q"),), {}, "token-1", step_items=2)

    assert asked.applied and asked.record.status == INPUT_REQUIRED
    assert (asked.record.step_items, asked.record.steps_open) == shown


def test_a_run_that_takes_over_a_dead_runs_mark_finds_the_record_it_kept_on_the_work_part_and_does_not_run_it_again(
    store: DynamoTaskStore, clock: Clock
) -> None:
    # run-1 marked the step on its item, kept its record on the work part, and died before its next step.
    record = begun(store, clock)
    now = clock()
    store.mark_step(record.task_id, "step:charge", mark("run-1", now + 60), now, slot=0)
    store.record_operation(record.task_id, "step:charge", {"v": "charged", "ms": 5, "n": 0}, {})

    # run-2 read the task before that record, and comes to the step once run-1's mark has expired.
    found = store.mark_step(record.task_id, "step:charge", mark("run-2", now + 200), now + 61, slot=0)

    assert found == {"v": "charged", "ms": 5, "n": 0}


def test_an_operation_asked_in_another_order_than_an_earlier_run_is_refused_and_leaves_the_record(
    store: DynamoTaskStore, clock: Clock
) -> None:
    record = begun(store, clock)
    store.record_operation(record.task_id, "step:first", {"v": 1}, None, slot=0)

    with pytest.raises(OperationsOutOfOrder):
        store.mark_step(record.task_id, "step:other", mark("run-2", clock() + 60), clock(), slot=0)
    with pytest.raises(OperationsOutOfOrder):
        store.record_operation(record.task_id, "wait:", {"until": 1.0}, {}, slot=0)

    assert store.load(record.task_id).steps == {"step:first": {"v": 1}}


def test_settling_a_task_without_a_ttl_deletes_its_step_items_and_one_with_a_ttl_leaves_them_to_expire(
    store: DynamoTaskStore, clock: Clock, task_env: TaskEnvironment
) -> None:
    kept, expiring = begun(store, clock, ttl_ms=None), begun(store, clock)
    for task in (kept, expiring):
        store.record_operation(task.task_id, "wait:", {"until": clock()}, None, slot=0, step_items=1)  # counted
        store.begin_run(task.task_id, "run-2")
        for slot in range(1, 30):  # more than one BatchWriteItem's 25, past the count
            store.record_operation(task.task_id, f"step:s{slot}", {"v": slot}, None, slot=slot)
        store.finish(task.task_id, COMPLETED, RESULT)

    def step_items(task_id: str) -> int:
        keys = [step_key(task_id, slot) for slot in range(30)]
        found = task_env.dynamodb.batch_get_item(RequestItems={task_env.resources.table_name: {"Keys": keys}})
        return len(found["Responses"][task_env.resources.table_name])

    assert (step_items(kept.task_id), step_items(expiring.task_id)) == (0, 30)
    assert store.get(kept.task_id, ALICE.id).status == COMPLETED


def test_a_runs_first_write_and_its_look_between_steps_refuse_a_cancelled_task(
    store: DynamoTaskStore, clock: Clock
) -> None:
    record = begun(store, clock)
    store.keep_working(record.task_id)
    store.cancel(record.task_id, ALICE.id)

    with pytest.raises(TaskConflict):
        store.begin_run(record.task_id, "run-2")
    with pytest.raises(TaskConflict):
        store.keep_working(record.task_id)


def test_the_look_between_steps_renews_the_lease_only_once_half_of_it_is_gone(
    store: DynamoTaskStore, clock: Clock, table_calls: list[tuple[str, dict[str, Any]]]
) -> None:
    record = begun(store, clock, ttl_ms=None)
    table_calls.clear()

    clock.advance(store.lease_seconds / 2 - 60)
    store.keep_working(record.task_id)
    assert [name for name, _ in table_calls] == ["GetItem"]
    clock.advance(61)
    store.keep_working(record.task_id)
    assert [name for name, _ in table_calls] == ["GetItem", "GetItem", "UpdateItem"]
    assert store.get(record.task_id).last_updated_at == iso_timestamp(clock())


def test_marking_a_step_of_a_cancelled_task_is_a_conflict(store: DynamoTaskStore, clock: Clock) -> None:
    record = create(store, clock)
    store.cancel(record.task_id, ALICE.id)

    with pytest.raises(TaskConflict):
        store.mark_step(record.task_id, "step:charge", mark("run-1", clock() + 60), clock())


# ---- the execution-level failure writes check which execution is current ---------------------------


def test_the_fail_of_an_execution_the_task_moved_on_from_leaves_the_task_to_the_current_one(
    store: DynamoTaskStore, clock: Clock, task_env: TaskEnvironment
) -> None:
    from mcp_runtime.tasks.worker import TaskWorker
    from mcp_runtime.tools import Registry

    task_id = create(store, clock).task_id
    store.renew(task_id, task_id, f"{task_id}.2")  # the task continues in a new execution
    worker = TaskWorker(store, task_env.executor(), Registry())

    stale = worker.handle({"action": "fail", "taskId": task_id, "executionName": task_id, "failure": {}})

    assert stale["outcome"] == wire.OUTCOME_OVERTAKEN
    assert (store.get(task_id).status, store.get(task_id).execution) == (WORKING, f"{task_id}.2")
    current = worker.handle({"action": "fail", "taskId": task_id, "executionName": f"{task_id}.2", "failure": {}})
    assert current["outcome"] == wire.OUTCOME_FAILED
    assert (store.get(task_id).status, store.get(task_id).error) == (FAILED, ERROR)


# ---- a callback completed after its deadline -------------------------------------------------------


def test_a_callback_completed_after_its_deadline_is_refused_409_saying_why_and_nothing_is_written(
    store: DynamoTaskStore, clock: Clock
) -> None:
    from mcp_runtime.tasks.callbacks import LATE, REFUSED, CallbackService
    from mcp_runtime.tasks.durable import encode_callback_token, token_hash

    late, timely = create(store, clock, ttl_ms=None).task_id, create(store, clock, ttl_ms=None).task_id
    for task_id in (late, timely):
        waiting = {
            "state": "waiting",
            "name": "ci",
            "hash": token_hash("s3cret"),
            "timeout": 60,
            "deadline": clock() + 60,
        }
        store.record_operation(task_id, "callback:ci", waiting, {})
    callbacks = CallbackService(store, None)

    def complete(task_id: str, secret: str = "s3cret") -> tuple[int, dict[str, Any]]:
        body = {"token": encode_callback_token(task_id, "callback:ci", secret), "result": {"ok": True}}
        answer = callbacks.complete(json.dumps(body).encode())
        return answer.status, answer.body

    assert complete(timely) == (200, {"completed": True})
    clock.advance(61)
    before = store.get(late)

    assert complete(late) == (409, LATE)
    assert LATE == {"message": "The callback's deadline has passed: the task no longer takes a completion"}
    assert store.get(late) == before  # nothing written: the run after the timeout reports it timed out
    assert complete(late, "forged") == (404, REFUSED)  # only the token's holder learns it was late


# ---- a callback's completion: its record on the work part, then the effect on the hot item ----------


WAITING_CALLBACK = {"state": "waiting", "name": "build", "hash": "hash-of-the-secret", "timeout": None}


def test_a_completion_recorded_whose_resume_was_never_asked_is_asked_again_by_the_holders_retry(
    store: DynamoTaskStore, clock: Clock, task_env: TaskEnvironment
) -> None:
    task_id = create(store, clock).task_id
    store.record_operation(task_id, "callback:build", dict(WAITING_CALLBACK), {})
    assert store.await_callback(task_id, "callback:build", "token-of-the-callback", "Waiting for build").applied
    # The first completion's record landed; its effect write did not (the function died between).
    task_env.dynamodb.update_item(
        TableName=store.table_name,
        Key=part_key(task_id, schema.WORK_PART),
        UpdateExpression="SET steps.#k.#s = :done, steps.#k.v = :v",
        ExpressionAttributeNames={"#k": "callback:build", "#s": "state"},
        ExpressionAttributeValues={":done": {"S": "done"}, ":v": {"S": '{"built":true}'}},
    )

    assert store.complete_callback(task_id, "callback:build", "hash-of-the-secret", {"v": {"built": True}})
    task = store.get(task_id)
    assert (task.effect, task.task_token) == (EFFECT_RESUME, "token-of-the-callback")
    # Asked once: a completion sent again now is refused, as a second completion is.
    assert not store.complete_callback(task_id, "callback:build", "hash-of-the-secret", {"v": {"built": 2}})
    assert not store.complete_callback(task_id, "callback:build", "a-forged-hash", {"v": {"built": 3}})
    assert store.load(task_id).steps["callback:build"]["v"] == {"built": True}


def test_a_completion_of_a_settled_task_is_refused_and_asks_for_nothing(store: DynamoTaskStore, clock: Clock) -> None:
    task_id = create(store, clock).task_id
    store.record_operation(task_id, "callback:build", dict(WAITING_CALLBACK), {})
    store.cancel(task_id, ALICE.id)

    assert not store.complete_callback(task_id, "callback:build", "hash-of-the-secret", {"v": {"built": True}})
    assert store.get(task_id).effect == EFFECT_STOP
