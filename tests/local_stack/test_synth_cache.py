"""`make run` synthesizes the CDK app once per set of inputs: a second start reads the cached assembly."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from local_stack.synth import (
    TEMPLATE_INPUTS,
    WARM_SWITCH,
    SynthError,
    inputs_digest,
    prune,
    stop_warm,
    synthesize,
    warm_socket,
)

from tests.support import REPO

pytestmark = pytest.mark.infra


def test_processes_that_need_the_same_new_assembly_at_once_synthesize_it_once_and_a_later_start_reads_it(
    tmp_path: Path,
) -> None:
    with ThreadPoolExecutor(2) as pool:
        both = list(pool.map(lambda _: synthesize({"logRetentionDays": 7}, cache_root=tmp_path), range(2)))
    later = synthesize({"logRetentionDays": 7}, cache_root=tmp_path)
    assert sorted(assembly.cached for assembly in both) == [False, True]
    assert later.cached is True
    assert both[0].directory == both[1].directory == later.directory
    assert (later.directory / f"{later.stack_name}.template.json").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("synth-")] == []


def test_the_warm_synthesizer_writes_what_a_new_process_writes_and_serves_the_next_configurations_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LOCAL_SYNTH_WARM=1 (`make test`): one process synthesizes configuration after configuration; an app
    that fails is the caller's SynthError, as in a process of its own, and the next request gets a new one."""
    monkeypatch.delenv(WARM_SWITCH, raising=False)  # `make test` sets it
    cold = synthesize({"logRetentionDays": 30}, cache_root=tmp_path / "cold")
    monkeypatch.setenv(WARM_SWITCH, "1")
    warm = [
        synthesize(context, cache_root=tmp_path / "warm")
        for context in ({"logRetentionDays": 30}, {"workerMemoryMb": 256})
    ]
    with pytest.raises(SynthError, match=r"ValueError: log retention must be one of \[1, 3, 5, 7, .*got 6"):
        synthesize({"logRetentionDays": 6}, cache_root=tmp_path / "warm")
    after = synthesize({"logRetentionDays": 60}, cache_root=tmp_path / "warm")

    assert cold.warm_process is None
    assert warm[0].warm_process is not None and warm[0].warm_process == warm[1].warm_process
    assert after.warm_process not in (None, warm[0].warm_process)
    template = f"{cold.stack_name}.template.json"
    assert (warm[0].directory / template).read_text() == (cold.directory / template).read_text()
    assert sorted(p.name for p in warm[0].directory.iterdir()) == sorted(p.name for p in cold.directory.iterdir())


def test_the_warm_synthesizers_socket_is_in_a_directory_only_its_user_can_enter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    socket_path = warm_socket()
    made = os.lstat(socket_path.parent)
    assert (socket_path.parent.parent, stat.S_IMODE(made.st_mode), made.st_uid) == (tmp_path, 0o700, os.getuid())

    # Made by someone else's hand, open to all: refused, and a synthesis goes to a process of its own.
    os.chmod(socket_path.parent, 0o777)
    with pytest.raises(PermissionError, match="is not a private directory of this user's"):
        warm_socket()
    monkeypatch.setenv(WARM_SWITCH, "1")
    assert stop_warm() is False
    os.rmdir(socket_path.parent)
    os.symlink(tmp_path, socket_path.parent)
    with pytest.raises(PermissionError, match="is not a private directory of this user's"):
        warm_socket()


def test_the_cache_key_changes_with_the_context_and_with_each_input(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    for entry in TEMPLATE_INPUTS:
        source, target = REPO / entry, copy / entry
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, target)
    base = inputs_digest({}, copy)
    assert inputs_digest({"workerTimeoutSeconds": 10}, copy) != base
    edits = [copy / "cdk.json", copy / "infra" / "statemachine" / "task_workflow.asl.json", copy / "infra" / "stack.py"]
    edits.append(copy / "functions" / "mcp_runtime" / "tasks" / "schema.py")
    seen = {base}
    for path in edits:
        path.write_text(path.read_text() + "\n")
        digest = inputs_digest({}, copy)
        assert digest not in seen, path
        seen.add(digest)


def test_pruning_keeps_the_newest_assemblies_and_every_one_a_running_stack_used_lately(tmp_path: Path) -> None:
    now = time.time()
    ages = {f"old{n}": 3 * 3600 + n for n in range(3)} | {f"recent{n}": 60 + n for n in range(9)}
    for name, age in ages.items():
        (tmp_path / name).mkdir()
        os.utime(tmp_path / name, (now - age, now - age))
    keep = tmp_path / "current"
    keep.mkdir()

    prune(tmp_path, keep=keep, limit=8)

    # Seven besides the current one fit the limit; of the five oldest, only those unused for hours go.
    assert {p.name for p in tmp_path.iterdir()} == {"current", *(f"recent{n}" for n in range(9))}
