"""The DynamoDB task store under moto: conditional transitions, races, expiry and owner isolation."""

from __future__ import annotations

import contextlib
import math
import random
from typing import Any

import pytest
from botocore.exceptions import ClientError

from mcp_runtime import wire
from mcp_runtime.mrtr import elicitation_request
from mcp_runtime.tasks import schema
from mcp_runtime.tasks.errors import TaskConflict, TaskNotFound, TaskStoreUnavailable
from mcp_runtime.tasks.models import (
    CANCELLED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    WORKING,
    ClientSnapshot,
    TaskRecord,
    expiry_epoch,
    iso_timestamp,
)
from mcp_runtime.tasks.service import new_task_id
from mcp_runtime.tasks.store import AnswerOutcome, CancelOutcome, DynamoTaskStore, task_key
from tests.integration.task_harness import ALICE, MALLORY, Clock, TaskEnvironment, request_context

TTL_MS = 60_000
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
    )
    store.create(record)
    return record


def park(store: DynamoTaskStore, task_id: str, keys: list[str], token: str = "token-1") -> TaskRecord:
    """What the worker's park step does: questions under fresh keys and the callback token."""
    record = store.get(task_id)
    issued = record.issued_keys + tuple((key, key.split(".")[0]) for key in keys)
    store.park(task_id, record.version, {key: request(f"question {key}") for key in keys}, issued, {"step": 1}, token)
    return store.get(task_id)


# ---- creation, reads, expiry ------------------------------------------------------------------------


def test_a_created_task_reads_back_exactly_as_written(store: DynamoTaskStore, clock: Clock) -> None:
    record = create(store, clock)

    assert store.get(record.task_id, ALICE.id) == record


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
    park(store, record.task_id, ["confirm"])
    clock.advance(TTL_MS / 1000 + 1)

    with pytest.raises(TaskNotFound):
        store.cancel(record.task_id, ALICE.id)
    with pytest.raises(TaskNotFound):
        store.answer(record.task_id, ALICE.id, {"confirm": accept(ok=True)})


def test_creating_a_task_with_an_existing_id_is_a_conflict(store: DynamoTaskStore, clock: Clock) -> None:
    record = create(store, clock)

    with pytest.raises(TaskConflict):
        store.create(record)


# ---- owner isolation ----------------------------------------------------------------------------------


def test_another_principal_gets_exactly_the_not_found_of_an_unknown_id(store: DynamoTaskStore, clock: Clock) -> None:
    record = create(store, clock)
    park(store, record.task_id, ["confirm"])

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
    park(store, record.task_id, ["confirm"])
    store.answer(record.task_id, ALICE.id, {"confirm": accept(ok=True)})

    with pytest.raises(TaskConflict):
        store.finish(record.task_id, COMPLETED, RESULT, expected_version=record.version)
    assert store.get(record.task_id, ALICE.id).status == WORKING


def test_a_cancel_before_completion_wins_and_the_late_completion_is_refused(
    store: DynamoTaskStore, clock: Clock
) -> None:
    record = create(store, clock)

    assert store.cancel(record.task_id, ALICE.id) == CancelOutcome(True, None)
    with pytest.raises(TaskConflict):
        store.finish(record.task_id, COMPLETED, RESULT, expected_version=record.version)
    final = store.get(record.task_id, ALICE.id)
    assert (final.status, final.result) == (CANCELLED, None)


def test_a_completion_before_a_cancel_wins_and_the_cancel_is_a_no_op(store: DynamoTaskStore, clock: Clock) -> None:
    record = create(store, clock)
    store.finish(record.task_id, COMPLETED, RESULT, expected_version=record.version)

    assert store.cancel(record.task_id, ALICE.id) == CancelOutcome(False)
    assert store.get(record.task_id, ALICE.id).status == COMPLETED


def test_cancelling_a_parked_task_hands_back_its_token_and_clears_the_questions(
    store: DynamoTaskStore, clock: Clock
) -> None:
    record = create(store, clock)
    park(store, record.task_id, ["confirm"], token="parked-token")

    outcome = store.cancel(record.task_id, ALICE.id)

    after = store.get(record.task_id, ALICE.id)
    assert outcome == CancelOutcome(True, "parked-token")
    assert (after.status, after.input_requests, after.task_token) == (CANCELLED, {}, None)


def test_an_answer_arriving_after_a_cancel_is_ignored(store: DynamoTaskStore, clock: Clock) -> None:
    record = create(store, clock)
    park(store, record.task_id, ["confirm"])
    store.cancel(record.task_id, ALICE.id)

    assert store.answer(record.task_id, ALICE.id, {"confirm": accept(ok=True)}) == AnswerOutcome((), None)
    assert store.get(record.task_id, ALICE.id).answers == {}


def test_a_park_after_a_cancel_is_refused(store: DynamoTaskStore, clock: Clock) -> None:
    record = create(store, clock)
    store.cancel(record.task_id, ALICE.id)

    with pytest.raises(TaskConflict):
        store.park(record.task_id, record.version, {"confirm": request("?")}, (("confirm", "confirm"),), {}, "token")
    assert store.get(record.task_id, ALICE.id).status == CANCELLED


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


def test_answering_every_outstanding_key_resumes_with_the_parked_token(store: DynamoTaskStore, clock: Clock) -> None:
    record = create(store, clock)
    park(store, record.task_id, ["name", "confirm"], token="token-7")

    outcome = store.answer(record.task_id, ALICE.id, {"name": accept(name="A"), "confirm": accept(ok=True)})

    after = store.get(record.task_id, ALICE.id)
    assert outcome == AnswerOutcome(("name", "confirm"), "token-7")
    assert (after.status, after.input_requests, after.task_token) == (WORKING, {}, None)
    assert after.answers == {"name": accept(name="A"), "confirm": accept(ok=True)}


def test_a_partial_answer_leaves_only_the_outstanding_keys_and_does_not_resume(
    store: DynamoTaskStore, clock: Clock
) -> None:
    record = create(store, clock)
    park(store, record.task_id, ["name", "confirm"])

    outcome = store.answer(record.task_id, ALICE.id, {"name": accept(name="A")})

    after = store.get(record.task_id, ALICE.id)
    assert outcome == AnswerOutcome(("name",), None)
    assert after.status == INPUT_REQUIRED
    assert list(after.input_requests) == ["confirm"]
    assert after.task_token == "token-1"


def test_answers_to_never_issued_already_answered_and_superseded_keys_are_ignored(
    store: DynamoTaskStore, clock: Clock
) -> None:
    record = create(store, clock)
    park(store, record.task_id, ["name", "confirm"])

    assert store.answer(record.task_id, ALICE.id, {"never-issued": accept(ok=True)}) == AnswerOutcome((), None)
    assert store.answer(record.task_id, ALICE.id, {"name": accept(name="first")}) == AnswerOutcome(("name",), None)
    assert store.answer(
        record.task_id, ALICE.id, {"name": accept(name="second"), "confirm": accept(ok=True)}
    ) == AnswerOutcome(("confirm",), "token-1")
    # The tool asks again (its earlier answer did not validate): a new wire key supersedes "name".
    park(store, record.task_id, ["name.2"], token="token-2")
    assert store.answer(record.task_id, ALICE.id, {"name": accept(name="third")}) == AnswerOutcome((), None)

    after = store.get(record.task_id, ALICE.id)
    assert after.answers == {"name": accept(name="first"), "confirm": accept(ok=True)}
    assert list(after.input_requests) == ["name.2"]
    assert after.answers_by_tool_key() == {"name": accept(name="first"), "confirm": accept(ok=True)}


def test_the_newest_answered_key_is_what_the_tool_sees_for_its_own_key(store: DynamoTaskStore, clock: Clock) -> None:
    record = create(store, clock)
    park(store, record.task_id, ["name"])
    store.answer(record.task_id, ALICE.id, {"name": {"action": "accept", "content": {"name": 42}}})
    park(store, record.task_id, ["name.2"], token="token-2")
    store.answer(record.task_id, ALICE.id, {"name.2": accept(name="Alice")})

    assert store.get(record.task_id).answers_by_tool_key() == {"name": accept(name="Alice")}


def test_an_empty_update_changes_nothing(store: DynamoTaskStore, clock: Clock) -> None:
    record = create(store, clock)
    before = park(store, record.task_id, ["confirm"])

    assert store.answer(record.task_id, ALICE.id, {}) == AnswerOutcome((), None)
    assert store.get(record.task_id, ALICE.id) == before


# ---- errors --------------------------------------------------------------------------------------------


def test_dynamodb_errors_become_store_errors_chained_from_the_client_error(task_env: TaskEnvironment) -> None:
    missing_table = DynamoTaskStore("no-such-table", task_env.dynamodb)

    with pytest.raises(TaskStoreUnavailable, match="ResourceNotFoundException") as caught:
        missing_table.get("anything")

    assert isinstance(caught.value.__cause__, ClientError)


# ---- randomized interleavings --------------------------------------------------------------------------


class Interleaving:
    """One task, three actors taking turns in a random order, each acting on what it last read.

    worker: reads, then completes / parks / fails / reports progress with the version it read;
    client: answers a random mix of keys (outstanding, answered, never issued) or cancels;
    reconciler: reads, then settles failed with the version it read (an execution found dead).
    """

    def __init__(self, store: DynamoTaskStore, clock: Clock, rng: random.Random) -> None:
        self.store = store
        self.rng = rng
        self.record = create(store, clock)
        self.task_id = self.record.task_id
        self.worker_view: TaskRecord | None = None
        self.reconciler_view: TaskRecord | None = None
        self.first_answers: dict[str, Any] = {}
        self.tokens_handed_out: list[str] = []
        self.terminal: TaskRecord | None = None
        self.last_seen = self.record
        self.parks = 0

    def step(self) -> None:
        actor = self.rng.choice((self.worker, self.worker, self.client, self.client, self.reconciler))
        actor()
        self.check()

    def worker(self) -> None:
        if self.worker_view is None:
            self.worker_view = self.store.get(self.task_id)
            return
        view, self.worker_view = self.worker_view, None
        move = self.rng.choice(("complete", "park", "park", "protocol_error", "crash", "progress"))
        try:
            if move == "complete":
                self.store.finish(self.task_id, COMPLETED, RESULT, expected_version=view.version)
            elif move == "protocol_error":
                self.store.finish(self.task_id, FAILED, {"code": wire.INVALID_PARAMS, "message": "bad"}, view.version)
            elif move == "crash":  # the state machine's Catch: no version, only "not yet terminal"
                self.store.finish(self.task_id, FAILED, ERROR)
            elif move == "progress":
                self.store.set_status_message(self.task_id, "busy")
            else:
                self.parks += 1
                keys = [f"q{self.parks}a", f"q{self.parks}b"][: self.rng.randint(1, 2)]
                issued = view.issued_keys + tuple((key, key) for key in keys)
                self.store.park(
                    self.task_id, view.version, {k: request(k) for k in keys}, issued, {}, f"token-{self.parks}"
                )
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
            assert key not in self.first_answers, f"accepted {key} twice"
            self.first_answers[key] = responses[key]
        if outcome.resume_token is not None:
            self.tokens_handed_out.append(outcome.resume_token)

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
        else:
            assert now.input_requests == {} and now.task_token is None
        assert set(now.input_requests) <= issued and set(now.answers) <= issued
        assert not set(now.input_requests) & set(now.answers), "a key is both answered and outstanding"
        assert now.answers == self.first_answers, "an answer was lost or overwritten"
        assert len(self.tokens_handed_out) == len(set(self.tokens_handed_out)), "a parked token resumed twice"


def test_no_interleaving_of_cancel_update_completion_and_crash_loses_a_task_or_breaks_its_state(
    store: DynamoTaskStore, clock: Clock
) -> None:
    for seed in range(300):
        run = Interleaving(store, clock, random.Random(seed))
        for _ in range(8):
            run.step()
        store.cancel(run.task_id, ALICE.id)  # whatever happened, the client can always end it
        final = store.get(run.task_id, ALICE.id)
        assert final.is_terminal, f"seed {seed}: task left {final.status}"


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
