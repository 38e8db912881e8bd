"""One asyncio event loop per process, for `async def` tools, reused by every warm invocation.

`asyncio.run` per call would make a new loop each time: a module-level `asyncio.Lock`, or a client
pool a tool creates on its first call, is bound to the loop it was first used on and breaks on the
next call. So async tools all run on this one loop, one call at a time (a Lambda environment serves
one request at a time; a second thread waits for the first).

Work a tool leaves running when it returns (`asyncio.create_task` without awaiting it) does not
survive the invocation: Lambda freezes or ends the environment once the answer is sent. It is
logged as a warning, never silently kept.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import asyncio

T = TypeVar("T")
log = logging.getLogger(__name__)

_loop: asyncio.AbstractEventLoop | None = None
_running = threading.Lock()


def process_loop() -> asyncio.AbstractEventLoop:
    """The process's event loop, made on first use (and again only if something closed it)."""
    global _loop
    if _loop is None or _loop.is_closed():
        import asyncio  # imported by the first async tool's call, never by a cold start that has none

        _loop = asyncio.new_event_loop()
    return _loop


def run(coroutine: Coroutine[Any, Any, T], owner: str) -> T:
    """Run a tool's coroutine to its end on the process's loop; `owner` names the tool in the warning
    about tasks it left pending."""
    import asyncio  # only an async tool's call gets here (a cold start with none imports no asyncio)

    with _running:
        loop = process_loop()
        if loop.is_running():  # only reachable from inside this loop: a sync call nested in an async tool
            coroutine.close()
            raise RuntimeError(f"{owner}: an async tool cannot be run from inside another async tool")
        try:
            return loop.run_until_complete(coroutine)
        finally:
            pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
            if pending:
                log.warning(
                    "%s left %d asyncio task(s) pending when it returned (%s); work started in the background "
                    "does not survive the invocation: await it before returning",
                    owner,
                    len(pending),
                    ", ".join(sorted(task.get_name() for task in pending)),
                )
