"""Domain errors of the task side. The store and the executor raise these, never botocore's."""

from __future__ import annotations


class TaskError(Exception):
    """Base of every task-store and executor error."""


class TaskNotFound(TaskError):
    """Unknown id, expired item, or an item owned by another principal: callers cannot tell which."""


class TaskConflict(TaskError):
    """A conditional write lost: the task moved on (terminal, awaiting input again, or another writer won)."""


class TaskStoreUnavailable(TaskError):
    """DynamoDB throttled, failed or was unreachable for the whole budget; safe to retry.

    The state machine retries on this name (a worker step that raises it did nothing irreversible).
    """


class TaskStoreRefused(TaskError):
    """DynamoDB refused the request (validation, access, a missing table): retrying cannot help.

    The message (for logs) carries AWS's own words; `code` alone may go into a task's error."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class TaskAnswersFull(TaskError):
    """These answers would take what the task keeps of its answers past `MAX_TASK_KEPT_ANSWERS_BYTES`;
    nothing was written."""

    def __init__(self, kept_bytes: int, adding_bytes: int, limit_bytes: int) -> None:
        super().__init__(f"task answers: {kept_bytes} kept + {adding_bytes} new > {limit_bytes} bytes")
        self.kept_bytes = kept_bytes
        self.adding_bytes = adding_bytes
        self.limit_bytes = limit_bytes


class OperationsOutOfOrder(TaskError):
    """A run asked for a durable operation where an earlier run recorded another (its tool asked for
    them in another order): the task cannot go on from its records."""


class CallbackLate(TaskError):
    """A completion, by the token's holder, of a callback whose deadline has passed: the task went on
    (or goes on) without it; nothing was written."""


class TaskTooLarge(TaskError):
    """What a create would store is over `limits.MAX_TASK_CREATED_BYTES`; nothing was written."""

    def __init__(self, size_bytes: int, limit_bytes: int) -> None:
        super().__init__(f"task item of {size_bytes} bytes > {limit_bytes} bytes")
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes


class ExecutorUnavailable(TaskError):
    """Step Functions throttled, failed or was unreachable for the whole budget; safe to retry."""


class ExecutorRefused(TaskError):
    """Step Functions refused the request for good (access, a missing state machine, bad input).

    The message (for logs) carries AWS's own words."""


class TaskNoLongerRunning(Exception):
    """Raised inside a running tool (from a progress report) once the task was cancelled or settled.

    Deliberately not a TaskError: it unwinds the tool's code, and the worker treats it as "stop now".
    """
