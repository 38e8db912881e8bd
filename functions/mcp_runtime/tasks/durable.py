"""Durable steps, waits and callbacks: what `ctx.step`, `ctx.wait` and `ctx.wait_for_callback` do in a task.

Named after AWS Lambda durable functions' SDK. A task tool runs from the top on every invocation of
the worker; each durable operation is recorded on the task item (or in S3 when large) the first
time it completes, and returns its record at once on every later run:

- `step(name, fn)` runs `fn()` once for the task and records its JSON value before the tool goes
  on. Before `fn()` starts, a conditional write marks the step running, until this invocation's
  deadline (and a margin): a second run of the same task that meets the mark (Step Functions retried
  while this invocation still runs) does not run `fn()`; it ends its round with a short wait, and the
  state machine runs the tool again later, when the step is recorded or the mark has expired. So a
  step's `fn()` runs again only after the invocation running it died (timed out, crashed) or could
  not record it; pass `idempotency_key(name)` to external systems it calls.
- `wait(seconds)` records when the wait ends and ends the invocation: the execution sits in a
  Step Functions Wait state with no Lambda running, then the tool runs again and the wait returns.
- `wait_for_callback(name, submit)` records a single-use callback (the hash of an unguessable
  token), hands `submit` the token and the URL an external system completes it at, and ends the
  invocation: the execution waits on a task token until that completion arrives (or the wait
  times out), then the tool runs again and gets what the external system sent.

Before a step starts, the run checks the invocation's remaining time: when the longest step so far
would not fit, the invocation ends at this boundary (`ContinueLater`) and the state machine runs
the tool again in a fresh one, where the finished steps return at once. A run's first write and
every wait's and callback's are conditioned on the task still working, and a step that begins
`STEP_STATUS_SECONDS` or more after the run last saw the task working looks at it first (one read):
so a cancel is noticed at a step boundary within that time, and at each wait.
Operations are keyed by kind, name and how often the name came up in this run (`step:fetch`,
`step:fetch#2`): a tool must ask for them in the same order on every run.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import math
import secrets
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

from .._aws import seconds_left
from ..limits import (
    MAX_INLINE_RECORD_BYTES,
    MAX_OPERATION_NAME_BYTES,
    MAX_OPERATIONS,
    MAX_RECORD_BYTES,
    MAX_WAIT_SECONDS,
    WORK_PART_RECORDS_BYTES,
    encoded_size,
)
from ..tools import ToolError
from .errors import OperationsOutOfOrder, TaskConflict, TaskNoLongerRunning, TaskNotFound
from .payloads import PayloadStore, is_pointer

T = TypeVar("T")
log = logging.getLogger(__name__)

# Kept free at a step boundary beyond the longest step: the step's record and the worker's answer.
STEP_RESERVE_SECONDS: Final = 2.0
# A step's running mark lasts until the invocation's deadline plus this margin (the deadline's own
# reserve, and clocks that differ between invocations); outside any deadline, Lambda's longest invocation.
STEP_MARK_MARGIN_SECONDS: Final = 10.0
STEP_MARK_UNBOUNDED_SECONDS: Final = 900.0
# A run that meets another run's mark waits at most this long before it looks again.
STEP_BUSY_RECHECK_SECONDS: Final = 30
# A step's writes leave the task's hot item alone: a step that begins this long or more after the run last
# saw its task working reads the task first (`OperationStore.keep_working`), so a cancelled task's run
# starts no step after that. Our choice: a read a step for steps longer than this, at most one a second
# (1 RRU) for shorter ones.
STEP_STATUS_SECONDS: Final = 1.0
STEP_RUNNING: Final = "running"
# Counted for every record beyond its key and JSON: its `ms` and DynamoDB's own framing of the entry.
RECORD_FRAMING_BYTES: Final = 24
CALLBACK_WAITING: Final = "waiting"
CALLBACK_DONE: Final = "done"


# The mark a run keeps on the task while it runs the tool (a step mark under this key, with the
# execution and round it belongs to), removed when the run ends at a durable boundary: a run that
# finds one of its own round and execution follows a run that was cut short (timed out, crashed).
RUN_MARK_KEY: Final = "run:in-progress"


@dataclass(frozen=True, slots=True)
class InterruptedRun:
    """What a run that was cut short left behind: whether it was inside a step, and the steps recorded."""

    in_step: bool
    recorded_steps: tuple[str, ...]


class Suspend(BaseException):
    """Ends this run of the tool at a durable boundary; the state machine takes over from here.

    A BaseException, so a tool's own `except Exception` cannot swallow it."""


class ContinueLater(Suspend):
    """The invocation is running out of time: go on in a fresh one."""


class WaitFor(Suspend):
    def __init__(self, seconds: int) -> None:
        super().__init__(seconds)
        self.seconds = seconds


class AwaitCallback(Suspend):
    def __init__(self, key: str, name: str, timeout_seconds: int | None, slot: int | None = None) -> None:
        super().__init__(key)
        self.key = key
        self.name = name
        self.timeout_seconds = timeout_seconds
        self.slot = slot  # the step item its record is on (None: the work part)


class CannotRecord(BaseException):
    """The task cannot record the operation its tool asks for (past the task's limit of operations, or
    asked in another order than an earlier run's): the task fails with `reason`. A BaseException, so a
    tool's own `except Exception` cannot swallow it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CallbackFailed(ToolError):
    """The external system reported a failure; unhandled, the task completes with it as a tool error."""


class CallbackTimedOut(ToolError):
    """Nobody completed the callback within its timeout."""


@dataclass(frozen=True, slots=True)
class _Recorded:
    """A step whose value is recorded: it returns at once."""

    value: Any


@dataclass(frozen=True, slots=True)
class _Started:
    """A step this run marked as running, started at `at` (monotonic seconds)."""

    key: str
    at: float


@dataclass(frozen=True, slots=True)
class Callback:
    """What `submit` hands the external system: POST `{"token": ..., "result": ...}` to `url`
    (or `{"token": ..., "error": {"message": ...}}`). The token works once."""

    name: str
    token: str
    url: str


def record_cost(key: str, record: Mapping[str, Any]) -> int:
    """What a durable record takes of the work part: its key, its JSON, and room for its `ms` and `n`."""
    return len(key.encode()) + encoded_size(record) + RECORD_FRAMING_BYTES


def is_step_mark(record: Mapping[str, Any]) -> bool:
    """A step some run has started and not recorded: `{"state": "running", "run": ..., "expires": ...}`."""
    return record.get("state") == STEP_RUNNING


class OperationStore(Protocol):
    """What a durable run needs of the task store (`DynamoTaskStore` implements it)."""

    def begin_run(self, task_id: str, run_id: str) -> None:
        """The run's first write: the task works (TaskConflict once not), its token and effect consumed,
        its lease renewed, its step items open to run `run_id`."""
        ...

    def keep_working(self, task_id: str) -> None:
        """A look at the task between steps: TaskConflict once it does not work (the lease renewed when low)."""
        ...

    def mark_step(
        self,
        task_id: str,
        key: str,
        mark: dict[str, Any],
        now: float,
        *,
        slot: int | None = None,
        expires_at: int | None = None,
        opens: bool = False,
    ) -> dict[str, Any]:
        """Mark the step running on the item of its `slot` (`expires_at`: the task's TTL) unless another
        run's mark is live there (or its value is recorded); returns what the step's entry holds after the
        write: this mark, another's, or the value. `slot` None: the run's own mark, on the work part
        (with `opens`, the run's first write too). Raises TaskConflict when the task is known to have
        stopped working."""
        ...

    def unmark_step(self, task_id: str, key: str, run_id: str, *, slot: int | None = None) -> None:
        """Remove this run's mark (its `fn()` raised); another run's mark or a value stays."""
        ...

    def record_operation(
        self,
        task_id: str,
        key: str,
        record: dict[str, Any],
        scratch: Mapping[str, Any] | None,
        *,
        replace: bool = False,
        parked_until: float | None = None,
        slot: int | None = None,
        expires_at: int | None = None,
        step_items: int | None = None,
    ) -> dict[str, Any]:
        """Write the operation's record (first writer wins unless `replace`) on the work part, or on the
        item of its `slot` (`expires_at`: the task's TTL); returns the record kept. Raises TaskConflict
        when the task is known to have stopped working. `scratch` (None: left as it is) is kept with it.
        `parked_until`: when the wait this record starts ends (the task's lease runs past it).
        `step_items`: for a wait or a callback (the run ends there), the step items the run wrote."""
        ...


def token_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def encode_callback_token(task_id: str, key: str, secret: str, slot: int | None = None) -> str:
    """`<task id>.<address, base64url>.<secret>`: the address finds the record (its key, and `<n>/`
    before it when the record is on step item n), the secret proves the holder."""
    import base64

    address = key if slot is None else f"{slot}/{key}"
    encoded = base64.urlsafe_b64encode(address.encode()).decode().rstrip("=")
    return f"{task_id}.{encoded}.{secret}"


def callback_address(address: str) -> tuple[str, int | None]:
    """(the record's key, its step item or None) of a decoded token's address: keys begin with their
    kind (`callback:`), never with a digit."""
    slot, separator, key = address.partition("/")
    if separator and slot.isdigit() and key:
        return key, int(slot)
    return address, None


def decode_callback_token(token: str) -> tuple[str, str, str] | None:
    import base64
    import binascii

    parts = token.split(".")
    if len(parts) != 3 or not all(parts) or len(token) > 1024:
        return None
    task_id, encoded, secret = parts
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return (task_id, key, secret) if key else None


def _json_value(value: Any) -> Any:
    """What a step returns, on its first run and every replay alike: its JSON value."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        value = dump(mode="json")
    return json.loads(json.dumps(value, ensure_ascii=False))


class DurableRun:
    """The durable operations of one run of a task's tool (one worker invocation)."""

    def __init__(
        self,
        task_id: str,
        records: Mapping[str, dict[str, Any]],
        store: OperationStore,
        payloads: PayloadStore | None,
        *,
        payloads_expire: bool,
        scratch: Callable[[], Mapping[str, Any]],
        callback_url: str,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        time_left: Callable[[], float | None] = seconds_left,
        max_operations: int = MAX_OPERATIONS,
        step_slots: Mapping[str, int] | None = None,
        expires_at: int | None = None,
        step_items: int = 0,
    ) -> None:
        self.task_id = task_id
        self.records = dict(records)
        self.store = store
        self.payloads = payloads
        self.payloads_expire = payloads_expire  # False for a task without a TTL: its objects are kept
        self.callback_url = callback_url
        self._scratch = scratch
        self.max_operations = max_operations
        # The records on step items, by key (their slot); the others are on the work part, and take
        # there (keys, values, pointers) at most WORK_PART_RECORDS_BYTES, so its writes stay 1 WRU.
        self._on_items = dict(step_slots or {})
        self._work_bytes = sum(record_cost(key, rec) for key, rec in self.records.items() if key not in self._on_items)
        # Each operation's slot: how many the run asked for before it (the n of its step item).
        self._slots: dict[str, int] = {}
        self.expires_at = expires_at  # the task's TTL, on the step items this run creates
        # The slots written so far (by this run or those before it): what the run's boundary counts.
        numbered = [int(r["n"]) for r in self.records.values() if isinstance(r.get("n"), int)]
        self.step_items = max([step_items, *(n + 1 for n in numbered), *(n + 1 for n in self._on_items.values())])
        self._clock = clock
        self._monotonic = monotonic
        self._time_left = time_left
        self._seen_working = monotonic()  # the load that made this run found its task working
        self._seen: Counter[tuple[str, str]] = Counter()
        self._in_step = False
        # Steps recorded in this invocation: a run that recorded none never ends early (it must progress).
        self.recorded_here = 0
        self.run_id = secrets.token_urlsafe(12)
        self._run_marked = False  # begin(mark=True) wrote this run's in-progress mark
        # A run replays while it has records and has not yet asked for an operation they do not hold:
        # what the tool reports meanwhile, an earlier run reported already. `on_live` is called when the
        # first new operation begins (before it runs).
        self.replaying = any(not is_step_mark(record) for record in self.records.values())
        self.on_live: Callable[[], None] | None = None

    # ---- runs cut short (the rerun policy) ---------------------------------------------------------
    def interrupted_run(self, execution: str, round_number: int) -> InterruptedRun | None:
        """The run of this execution's round that was cut short before this one, if one was: it left
        its mark (a run that ends at a boundary removes it; a settled task has none)."""
        mark = self.records.get(RUN_MARK_KEY)
        if mark is None or mark.get("execution") != execution or mark.get("round") != round_number:
            return None
        in_step = any(
            is_step_mark(record) and record.get("run") == mark.get("run")
            for key, record in self.records.items()
            if key != RUN_MARK_KEY
        )
        return InterruptedRun(in_step, self.recorded_steps())

    def recorded_steps(self) -> tuple[str, ...]:
        """The keys of the steps recorded for the task so far."""
        return tuple(
            key for key, record in self.records.items() if key.startswith("step:") and not is_step_mark(record)
        )

    def begin(self, execution: str, round_number: int, *, mark: bool) -> None:
        """The run's first write (`OperationStore.begin_run`); with `mark`, it also marks this run as in
        progress (with its execution and round) until it ends at a boundary (the rerun policy)."""
        if not mark:
            try:
                self.store.begin_run(self.task_id, self.run_id)
            except (TaskConflict, TaskNotFound):
                raise TaskNoLongerRunning(self.task_id) from None
            self._seen_working = self._monotonic()
            return
        left = self._time_left()
        now = self._clock()
        lasts = (STEP_MARK_UNBOUNDED_SECONDS if left is None else max(0.0, left)) + STEP_MARK_MARGIN_SECONDS
        run_mark = {
            "state": STEP_RUNNING,
            "run": self.run_id,
            "expires": round(now + lasts, 3),
            "execution": execution,
            "round": round_number,
        }
        try:
            self.store.mark_step(self.task_id, RUN_MARK_KEY, run_mark, now, opens=True)
        except (TaskConflict, TaskNotFound):
            raise TaskNoLongerRunning(self.task_id) from None
        self._seen_working = self._monotonic()
        self._run_marked = True

    def unmark_run(self) -> None:
        """This run ended at a durable boundary (a wait, a question, a callback, a continuation)."""
        if not self._run_marked:
            return
        try:
            self.store.unmark_step(self.task_id, RUN_MARK_KEY, self.run_id)  # on the work part
        except Exception as exc:  # the mark then names an earlier round: no later run reads it as cut short
            log.warning("task %s: the run's in-progress mark was not removed (%s)", self.task_id, exc)

    # ---- keys and time ----------------------------------------------------------------------------
    def _key(self, kind: str, name: str) -> str:
        if self._in_step:
            raise RuntimeError("durable operations cannot be nested inside a step")
        if len(name.encode()) > MAX_OPERATION_NAME_BYTES:
            raise ToolError(f"A step, wait or callback name may be at most {MAX_OPERATION_NAME_BYTES} bytes")
        self._seen[(kind, name)] += 1
        count = self._seen[(kind, name)]
        key = f"{kind}:{name}" + (f"#{count}" if count > 1 else "")
        self._slots[key] = len(self._slots)
        if self.replaying and (key not in self.records or is_step_mark(self.records[key])):
            self.replaying = False
            if self.on_live is not None:
                self.on_live()
        return key

    def idempotency_key(self, name: str) -> str:
        """Stable for this task and name across every run: for external systems that deduplicate."""
        return hashlib.sha256(f"{self.task_id}/{name}".encode()).hexdigest()[:32]

    @property
    def in_step(self) -> bool:
        return self._in_step

    def longest_step_seconds(self) -> float:
        return max(
            (float(r.get("ms") or 0) / 1000 for k, r in self.records.items() if k.startswith("step:")), default=0
        )

    def time_is_short(self) -> bool:
        """Whether the longest step so far (and the reserve) no longer fits in this invocation."""
        left = self._time_left()
        if left is None or self.recorded_here == 0:
            return False
        return left < self.longest_step_seconds() + STEP_RESERVE_SECONDS

    # ---- step ------------------------------------------------------------------------------------
    def step(self, name: str, fn: Callable[[], T]) -> Any:
        started = self._begin_step(name)
        if isinstance(started, _Recorded):
            return started.value
        self._in_step = True
        try:
            produced = fn()
        except BaseException:
            self._unmark(started.key)
            raise
        finally:
            self._in_step = False
        return self._finish_step(started, produced)

    async def step_async(self, name: str, fn: Callable[[], Any]) -> Any:
        """`step` for async tools: `fn` may be sync or async (its awaitable is awaited inside the step)."""
        started = self._begin_step(name)
        if isinstance(started, _Recorded):
            return started.value
        self._in_step = True
        try:
            produced = fn()
            if inspect.isawaitable(produced):
                produced = await produced
        except BaseException:
            self._unmark(started.key)
            raise
        finally:
            self._in_step = False
        return self._finish_step(started, produced)

    def _begin_step(self, name: str) -> _Recorded | _Started:
        """The step's recorded value, or this run's mark on it (then the caller runs `fn`)."""
        key = self._key("step", name)
        found = self.records.get(key)
        if found is not None and not is_step_mark(found):
            return _Recorded(self._value_of(found))
        if found is not None and found.get("run") != self.run_id and float(found.get("expires") or 0) > self._clock():
            raise WaitFor(self._recheck_after(found))  # another run's live mark, as read (from before step items too)
        if self.time_is_short():
            raise ContinueLater(key)
        self._check_room(key)
        self._keep_working()
        found = self._mark(key)
        if not is_step_mark(found):
            self.records[key] = found
            return _Recorded(self._value_of(found))  # recorded by another run meanwhile
        if found.get("run") != self.run_id:
            # Another run is in this step now: look again once it has had time to record it.
            raise WaitFor(self._recheck_after(found))
        return _Started(key, self._monotonic())

    def _recheck_after(self, mark: Mapping[str, Any]) -> int:
        return max(1, min(STEP_BUSY_RECHECK_SECONDS, math.ceil(float(mark["expires"]) - self._clock())))

    def _finish_step(self, started: _Started, produced: Any) -> Any:
        key = started.key
        try:
            value = _json_value(produced)
            record = self._stored_record(key, value)
            record["ms"] = round((self._monotonic() - started.at) * 1000)
            self._check_room(key, record)
        except BaseException:
            self._unmark(key)
            raise
        kept = self._record(key, record)
        self.recorded_here += 1
        return self._value_of(kept)

    def _keep_working(self) -> None:
        """Before a step's writes (which leave the task's hot item alone): look at the task when the run
        last saw it working `STEP_STATUS_SECONDS` ago or more; TaskNoLongerRunning once it does not."""
        if self._monotonic() - self._seen_working < STEP_STATUS_SECONDS:
            return
        try:
            self.store.keep_working(self.task_id)
        except (TaskConflict, TaskNotFound):
            raise TaskNoLongerRunning(self.task_id) from None
        self._seen_working = self._monotonic()

    def _mark(self, key: str) -> dict[str, Any]:
        """Mark the step running on its own step item (its record then goes there or to the work part)."""
        left = self._time_left()
        now = self._clock()
        lasts = (STEP_MARK_UNBOUNDED_SECONDS if left is None else max(0.0, left)) + STEP_MARK_MARGIN_SECONDS
        mark = {"state": STEP_RUNNING, "run": self.run_id, "expires": round(now + lasts, 3)}
        slot = self._slots[key]
        self.step_items = max(self.step_items, slot + 1)
        try:
            return self.store.mark_step(self.task_id, key, mark, now, slot=slot, expires_at=self.expires_at)
        except (TaskConflict, TaskNotFound):
            raise TaskNoLongerRunning(self.task_id) from None
        except OperationsOutOfOrder as exc:
            raise CannotRecord(_out_of_order(exc)) from None

    def _unmark(self, key: str) -> None:
        try:
            self.store.unmark_step(self.task_id, key, self.run_id, slot=self._slots[key])
        except Exception as exc:  # the mark then lasts until it expires: a later run waits that long
            log.warning("task %s: running mark of %s not removed (%s)", self.task_id, key, exc)

    # ---- wait ------------------------------------------------------------------------------------
    def wait(self, seconds: float) -> None:
        if not 0 < seconds <= MAX_WAIT_SECONDS:
            raise ValueError(f"ctx.wait takes 0 < seconds <= {MAX_WAIT_SECONDS}")
        key = self._key("wait", "")
        found = self.records.get(key)
        now = self._clock()
        if found is None:
            self._check_room(key)
            found = self._record(key, {"until": now + seconds}, parked_until=now + seconds, keep_scratch=True)
        left = float(found["until"]) - now
        if left <= 0:
            return
        raise WaitFor(max(1, math.ceil(left)))

    # ---- callbacks -------------------------------------------------------------------------------
    def wait_for_callback(
        self, name: str, submit: Callable[[Callback], Any], timeout_seconds: float | None = None
    ) -> Any:
        key = self._key("callback", name)
        found = self.records.get(key)
        if found is not None and found.get("state") == CALLBACK_DONE:
            if "error" in found:
                raise CallbackFailed(f"Callback {name!r} failed: {found['error']}")
            return self._value_of(found)
        now = self._clock()
        if found is not None and found.get("deadline") is not None and now >= float(found["deadline"]):
            raise CallbackTimedOut(f"Callback {name!r} was not completed within {found.get('timeout')} seconds")
        timeout = None if timeout_seconds is None else max(1, math.ceil(timeout_seconds))
        if found is not None and found.get("awaited"):
            # Awaited before and woken without a completion: wait again, the external system has the token.
            raise AwaitCallback(key, name, self._remaining(found), self._on_items.get(key))
        self._check_room(key)
        # First time, or a run that died before its wait began: issue a (new) token and submit it.
        secret = secrets.token_urlsafe(32)
        record = {
            "state": CALLBACK_WAITING,
            "name": name,
            "hash": token_hash(secret),
            "timeout": timeout,
            "deadline": None if timeout is None else now + timeout,
        }
        # On its own item: the completion writes up to 4 KB into the record, which the work part keeps small.
        self._record(key, record, replace=found is not None, keep_scratch=True, own_item=True)
        slot = self._on_items.get(key)
        submit(Callback(name, encode_callback_token(self.task_id, key, secret, slot), self.callback_url))
        raise AwaitCallback(key, name, timeout, slot)

    def _remaining(self, record: Mapping[str, Any]) -> int | None:
        if record.get("deadline") is None:
            return None
        return max(1, math.ceil(float(record["deadline"]) - self._clock()))

    # ---- records ---------------------------------------------------------------------------------
    def _stored_record(self, key: str, value: Any) -> dict[str, Any]:
        """`{"v": value}` inline when small, else a pointer to the value in S3."""
        size = encoded_size(value)
        if size > MAX_RECORD_BYTES:
            raise ToolError(
                f"Step {key!r} returned {size} bytes; a step's value may be at most {MAX_RECORD_BYTES} bytes"
            )
        if size <= MAX_INLINE_RECORD_BYTES:
            return {"v": value}
        if self.payloads is None:
            raise ToolError(f"Step {key!r} returned {size} bytes, more than the task item can hold")
        return {"ref": self.payloads.put(self.task_id, key, value, expires=self.payloads_expire)}

    def _check_room(self, key: str, record: Mapping[str, Any] | None = None) -> None:
        """CannotRecord for an operation past the task's limit (`max_operations`, TASK_MAX_STEPS)."""
        slot = self._slots[key]
        if slot >= self.max_operations and key not in self.records:
            raise CannotRecord(
                f"A task may record at most {self.max_operations} steps, waits and callbacks (TASK_MAX_STEPS); "
                f"its tool asked for one more: {key}"
            )

    def _record(
        self,
        key: str,
        record: dict[str, Any],
        replace: bool = False,
        parked_until: float | None = None,
        *,
        keep_scratch: bool = False,
        own_item: bool = False,
    ) -> dict[str, Any]:
        """Write the record on the work part while it fits there (so a task of a few small steps is read
        in one request), else on the item of its slot; a callback replaced stays where it was. The
        scratch goes with it when it costs no write of its own (on the work part), and always for a wait
        or a callback (`keep_scratch`: the invocation ends there)."""
        self._check_room(key, record)
        slot = self._slots[key]
        entry = {**record, "n": slot}
        previous = self.records.get(key)
        adding = record_cost(key, entry) - (record_cost(key, previous) if previous and key not in self._on_items else 0)
        # A callback replaced stays where it was; anything else goes on the work part while it fits.
        fits = not own_item and self._work_bytes + adding <= WORK_PART_RECORDS_BYTES
        on_work_part = key not in self._on_items if replace else fits
        self.step_items = max(self.step_items, slot + 1)
        try:
            kept = self.store.record_operation(
                self.task_id,
                key,
                entry if on_work_part else dict(record),
                self._scratch() if on_work_part or keep_scratch else None,
                replace=replace,
                parked_until=parked_until,
                slot=None if on_work_part else slot,
                expires_at=self.expires_at,
                step_items=None if key.startswith("step:") else self.step_items,
            )
        except (TaskConflict, TaskNotFound):
            raise TaskNoLongerRunning(self.task_id) from None  # cancelled: noticed at this boundary
        except OperationsOutOfOrder as exc:
            raise CannotRecord(_out_of_order(exc)) from None
        self.records[key] = kept
        if on_work_part:
            self._work_bytes += adding
            self._on_items.pop(key, None)
        else:
            self._on_items[key] = slot
        return kept

    def _value_of(self, record: Mapping[str, Any]) -> Any:
        if "ref" in record and is_pointer(record["ref"]):
            if self.payloads is None:
                raise RuntimeError("a record points at the payload bucket, which is not configured")
            return self.payloads.get(record["ref"])
        return record.get("v")


def _out_of_order(exc: OperationsOutOfOrder) -> str:
    log.error("%s", exc)
    return "The task's tool asked for its steps, waits and callbacks in another order than in an earlier run"


__all__ = [
    "AwaitCallback",
    "Callback",
    "CallbackFailed",
    "CallbackTimedOut",
    "CannotRecord",
    "ContinueLater",
    "DurableRun",
    "OperationStore",
    "Suspend",
    "WaitFor",
    "is_step_mark",
]
