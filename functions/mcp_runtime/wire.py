"""Wire constants of MCP 2026-07-28 (stateless), the tasks extension, and the handshake era (2025);
and the outcomes the task worker returns to the state machine that runs it.

Names, codes and header names are exact; everything else in the runtime imports them from here.
"""

from __future__ import annotations

from typing import Any, Final, Literal, get_args

JSONRPC_VERSION: Final = "2.0"
PROTOCOL_VERSION: Final = "2026-07-28"
SUPPORTED_PROTOCOL_VERSIONS: Final[tuple[str, ...]] = (PROTOCOL_VERSION,)

# params._meta keys
# Every key the 2026-07-28 revision reserves in `_meta` starts with this.
META_PREFIX: Final = "io.modelcontextprotocol/"
META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
META_PROGRESS_TOKEN: Final = "progressToken"

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"

# HTTP headers, lower-cased: header names compare case-insensitively.
HEADER_PROTOCOL_VERSION: Final = "mcp-protocol-version"
HEADER_METHOD: Final = "mcp-method"
HEADER_NAME: Final = "mcp-name"
HEADER_PARAM_PREFIX: Final = "mcp-param-"
X_MCP_HEADER: Final = "x-mcp-header"

# JSON-RPC error codes
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
HEADER_MISMATCH: Final = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022

ResultType = Literal["complete", "input_required", "task"]
RESULT_COMPLETE: Final = "complete"
RESULT_INPUT_REQUIRED: Final = "input_required"
RESULT_TASK: Final = "task"

CacheScope = Literal["public", "private"]

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL_TASK_STATUSES: Final[frozenset[str]] = frozenset({"completed", "failed", "cancelled"})

# Methods that earlier revisions had and 2026-07-28 removed: always -32601 / HTTP 404.
REMOVED_METHODS: Final[frozenset[str]] = frozenset(
    {
        "initialize",
        "notifications/initialized",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "tasks/result",
        "tasks/list",
    }
)

# Methods whose Mcp-Name header mirrors a body field.
NAME_HEADER_SOURCES: Final[dict[str, str]] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
# The real Python tasks client omits Mcp-Name on tasks/*; a missing header is tolerated there.
NAME_HEADER_OPTIONAL: Final[frozenset[str]] = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})

# Methods that may answer with an InputRequiredResult.
MRTR_METHODS: Final[frozenset[str]] = frozenset({"tools/call", "prompts/get", "resources/read"})

INPUT_METHOD_ELICIT: Final = "elicitation/create"
INPUT_METHOD_SAMPLING: Final = "sampling/createMessage"
INPUT_METHOD_ROOTS: Final = "roots/list"

JSONObject = dict[str, Any]
RequestId = str | int

# ---- the handshake era: 2025-11-25 (and 2025-06-18 / 2025-03-26, which differ only in shapes) ----
LEGACY_PROTOCOL_VERSION: Final = "2025-11-25"
LEGACY_PROTOCOL_VERSIONS: Final[tuple[str, ...]] = ("2025-11-25", "2025-06-18", "2025-03-26")
# Revisions whose elicitation requests carry no `mode` (it arrived with 2025-11-25).
LEGACY_VERSIONS_WITHOUT_ELICITATION_MODE: Final[frozenset[str]] = frozenset({"2025-06-18", "2025-03-26"})
# Revisions without structured tool output, output schemas or titles (they arrived with 2025-06-18).
LEGACY_VERSIONS_WITHOUT_STRUCTURED_OUTPUT: Final[frozenset[str]] = frozenset({"2025-03-26"})

HEADER_SESSION_ID: Final = "mcp-session-id"
HEADER_LAST_EVENT_ID: Final = "last-event-id"

METHOD_INITIALIZE: Final = "initialize"
METHOD_PING: Final = "ping"
METHOD_SET_LOG_LEVEL: Final = "logging/setLevel"
METHOD_SUBSCRIBE: Final = "resources/subscribe"
METHOD_UNSUBSCRIBE: Final = "resources/unsubscribe"
NOTIFICATION_INITIALIZED: Final = "notifications/initialized"
NOTIFICATION_CANCELLED: Final = "notifications/cancelled"
NOTIFICATION_PROGRESS: Final = "notifications/progress"
NOTIFICATION_MESSAGE: Final = "notifications/message"

# Result members that exist only in 2026-07-28 and are dropped from 2025 results.
MODERN_ONLY_RESULT_KEYS: Final[frozenset[str]] = frozenset({"resultType", "ttlMs", "cacheScope"})


# ---- the task workflow: what the worker returns to infra/statemachine/task_workflow.asl.json ----
# The `outcome` of each worker step. The NextStep Choice branches on the run's: every value it names
# is one of these, and each of these goes where tests/infra/test_workflow_outcomes.py says.
WorkerOutcome = Literal[
    "completed",
    "failed",
    "crashed",
    "input_required",
    "callback",
    "wait",
    "continue",
    "renew",
    "settle",
    "awaiting",
    "gone",
    "not_working",
    "not_current",
    "overtaken",
]
# The run settled the task itself (completed, also for a result with isError: true; or failed).
OUTCOME_COMPLETED: Final = "completed"
OUTCOME_FAILED: Final = "failed"
# Routed to a FAILED execution. The worker no longer answers it (a tool that raises settles its task
# failed and answers "failed", counted as ToolExceptions); kept so a run of the previous worker
# during a deployment still routes.
OUTCOME_CRASHED: Final = "crashed"
# The run ended at a durable boundary; what comes next: a token wait for input or for a callback,
# a Wait state, another round in a fresh invocation, or a new execution of the same task.
OUTCOME_INPUT_REQUIRED: Final = "input_required"
OUTCOME_CALLBACK: Final = "callback"
OUTCOME_WAIT: Final = "wait"
OUTCOME_CONTINUE: Final = "continue"
OUTCOME_RENEW: Final = "renew"
# The terminal write could not be made in time: the state machine's Settle step makes it.
OUTCOME_SETTLE: Final = "settle"
# WaitForToken stored its task token: the task awaits what it asked for (or, when it had arrived
# already, that step resumed the execution itself).
OUTCOME_AWAITING: Final = "awaiting"
# The ones that end an execution the task no longer needs, each for one reason:
# the task item does not exist (it expired, or never was);
OUTCOME_GONE: Final = "gone"
# the run found the task not working (settled, cancelled, or waiting for input on a token that
# another step holds): nothing to run;
OUTCOME_NOT_WORKING: Final = "not_working"
# the run found the task naming another execution, which carries it on;
OUTCOME_NOT_CURRENT: Final = "not_current"
# a conditional write of this step lost to another write that reached the task first (a cancel, a
# terminal write by another attempt, the sweeper or MarkFailedInTable, its removal at expiry):
# that write stands.
OUTCOME_OVERTAKEN: Final = "overtaken"
WORKER_OUTCOMES: Final[tuple[WorkerOutcome, ...]] = get_args(WorkerOutcome)
