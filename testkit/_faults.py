"""The test side of the fault layer (`_fault_layer/sitecustomize.py`): write scenarios, read the calls."""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LAYER_SOURCE = Path(__file__).resolve().parent / "_fault_layer" / "sitecustomize.py"

THROTTLE = "throttle"
ERROR = "error"
TIMEOUT = "timeout"
LOST = "lost"
CRASH = "crash"


@dataclass(frozen=True)
class Rule:
    """Act on the AWS requests of `function` for `operation` whose body holds every text in `contains`."""

    fault: str
    operation: str
    function: str = ""
    contains: tuple[str, ...] = ()
    skip: int = 0
    times: int = 1
    probability: float | None = None
    seed: int = 0

    def to_json(self, rule_id: str) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": rule_id,
            "fault": self.fault,
            "operation": self.operation,
            "function": self.function,
            "contains": list(self.contains),
            "skip": self.skip,
            "times": self.times,
            "seed": self.seed,
        }
        if self.probability is not None:
            data["probability"] = self.probability
        return data


@dataclass
class FaultLayer:
    directory: Path
    _generation: int = field(default=0)
    armed_at: float = field(default=0.0)

    @classmethod
    def create(cls, directory: Path) -> FaultLayer:
        directory.mkdir(parents=True, exist_ok=True)
        shutil.copy(LAYER_SOURCE, directory / "sitecustomize.py")
        layer = cls(directory)
        layer.arm()
        return layer

    def arm(self, *rules: Rule) -> None:
        """Replace the scenario; counts (and `fired`, `count`) start again from zero for the new rules."""
        self._generation += 1
        self.armed_at = time.time()
        document = {"rules": [rule.to_json(f"g{self._generation}r{n}") for n, rule in enumerate(rules)]}
        scratch = self.directory / "scenario.json.tmp"
        scratch.write_text(json.dumps(document), encoding="utf-8")
        scratch.replace(self.directory / "scenario.json")

    def calls(self, since: float = 0.0) -> list[dict[str, Any]]:
        path = self.directory / "calls.jsonl"
        if not path.exists():
            return []
        found = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
        return [call for call in found if call["at"] >= since]

    def fired(self, since: float | None = None) -> Counter[tuple[str, str]]:
        """How many faults fired since the last `arm` (or `since`), by (operation, fault)."""
        calls = self.calls(self.armed_at if since is None else since)
        return Counter((call["operation"], call["fault"]) for call in calls if call["fault"])

    def count(self, since: float | None = None, function: str = "") -> Counter[str]:
        """AWS requests sent (attempts, faulted ones too) since the last `arm` (or `since`), by operation."""
        calls = self.calls(self.armed_at if since is None else since)
        return Counter(call["operation"] for call in calls if function in call["function"])
