"""Every patch to moto's internals, each a named unit of the registry (moto is pinned exactly: 5.2.5).

A `Patch` says what AWS does (with the documentation page), what moto 5.2.5 does instead, and
installs itself through a `Patcher` that records what it replaced, so that `without(name)` can run
moto with that patch undone. `tests/local_stack/test_moto_patches.py` has, for each, a test of the
AWS behaviour with the patch and one of moto's own behaviour without it; README.md says how to
upgrade moto with them.

Public API
----------
``apply(*groups)``
    The one entry point: apply the patches of these groups ("emulation": every embedded moto, by
    `local_stack.aws`; "iam": enforcement, by `local_stack.iam_enforcement`), or all. Idempotent.
``patches()``, ``applied()``, ``without(*names)``
    The registry, the names in force, and a context manager running moto without some of them.
``set_invoker(function_name, invoker)``, ``LambdaThrottled``, ``Invoker``, ``function_name_of``
    What the patched Lambda Invoke runs for a function.
``on_execution_status(listener)``
    Called with each execution at each of its status changes.
``use_enforcement(enforcement)``, ``Enforcement``, ``RequestFacts``, ``Policy``, ``PolicyStatement``, ``iam_action``
    The IAM patches' decider, and moto's evaluator adapted for it.
"""

from __future__ import annotations

from local_stack.moto_patches import _cognito, _server  # noqa: F401 (they register their patches)
from local_stack.moto_patches._dynamodb import ITEM_LOCK
from local_stack.moto_patches._iam import (
    Enforcement,
    Policy,
    PolicyStatement,
    RequestFacts,
    iam_action,
    use_enforcement,
)
from local_stack.moto_patches._lambda import Invoker, LambdaThrottled, function_name_of, set_invoker
from local_stack.moto_patches._registry import MOTO_VERSION, Patch, Patcher, applied, apply, patches, without
from local_stack.moto_patches._stepfunctions import (
    STATE_MACHINE_SESSION_NAME,
    TOKEN_CLOSED_MESSAGE,
    aws_timestamp,
    on_execution_status,
)

__all__ = [
    "ITEM_LOCK",
    "MOTO_VERSION",
    "STATE_MACHINE_SESSION_NAME",
    "TOKEN_CLOSED_MESSAGE",
    "Enforcement",
    "Invoker",
    "LambdaThrottled",
    "Patch",
    "Patcher",
    "Policy",
    "PolicyStatement",
    "RequestFacts",
    "applied",
    "apply",
    "aws_timestamp",
    "function_name_of",
    "iam_action",
    "on_execution_status",
    "patches",
    "set_invoker",
    "use_enforcement",
    "without",
]
