"""A warm synthesizer: one process keeps the CDK app's imports and jsii's runtime loaded and synthesizes
assembly after assembly, one request at a time, on a Unix socket.

A synthesis in a new process costs about 8 CPU-seconds here, most of it loading jsii's runtime and the
CDK's modules; in a warm process, about 1. `local_stack.synth` uses it when LOCAL_SYNTH_WARM=1 (`make test`
sets it: the suite synthesizes a dozen configurations), spawning it on first use; it exits after
`idle_seconds` without a request, when asked to (`stop`), and after an app that failed (the next request
starts a fresh one). Its socket is named after the project's path and the template's inputs, so an edit
of infra/ gets a new process, never a stale one, and lies in a directory only its user can enter
(`local_stack.synth.warm_directory`): anyone who can connect can have files written as that user.

Protocol: one JSON line per connection, {"context": {...}, "outdir": "..."} or {"stop": true}; the answer
is one JSON line, {"ok": true, "pid": ...} or {"ok": false, "output": "<traceback>"}.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import socket
import sys
import traceback
from pathlib import Path
from typing import Any


def _read_line(connection: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = connection.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def serve(socket_path: Path, idle_seconds: float) -> None:
    # By name: the app is the project's (infra/ is not part of the local stack's type checks).
    app_type = importlib.import_module("aws_cdk").App
    nag = importlib.import_module("infra.nag")
    build_app = importlib.import_module("infra.cdk_app").build_app

    with contextlib.suppress(FileNotFoundError):
        socket_path.unlink()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # Bound and listening under another name, then put in place: a caller that sees the socket can connect
    # (bound at its own name, a caller could find it between bind and listen and be refused).
    listening = socket_path.with_name(f"{socket_path.name}.{os.getpid()}")
    server.bind(str(listening))
    server.listen(32)
    os.replace(listening, socket_path)
    bound = socket_path.stat().st_ino
    server.settimeout(idle_seconds)
    try:
        while True:
            try:
                connection, _ = server.accept()
            except TimeoutError:
                return
            with connection:
                connection.settimeout(None)
                request: dict[str, Any] = json.loads(_read_line(connection) or b"{}")
                if request.get("stop") or "outdir" not in request:
                    connection.sendall(json.dumps({"ok": True, "pid": os.getpid()}).encode() + b"\n")
                    return
                try:
                    nag.ACKNOWLEDGED.clear()
                    app, _ = build_app(app_type(context=request["context"], outdir=request["outdir"]))
                    app.synth()
                except Exception:
                    answer = {"ok": False, "output": traceback.format_exc(), "pid": os.getpid()}
                    connection.sendall(json.dumps(answer).encode() + b"\n")
                    return  # jsii's state after a failed app is not worth trusting: the next request starts anew
                connection.sendall(json.dumps({"ok": True, "pid": os.getpid()}).encode() + b"\n")
    finally:
        server.close()
        with contextlib.suppress(FileNotFoundError):
            if socket_path.stat().st_ino == bound:  # not a successor's, bound after this one stopped listening
                socket_path.unlink()


if __name__ == "__main__":
    serve(Path(sys.argv[1]), float(sys.argv[2]))
