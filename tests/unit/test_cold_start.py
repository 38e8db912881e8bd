"""`app/cold_start.py` stands in for pydantic's plugin loader: these pin the pydantic behaviour it relies on."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support import REPO

PROBE_PYDANTIC = """
import json, sys
from pydantic.plugin import _loader
plugins = list(_loader.get_plugins())
print(json.dumps({"plugins": plugins}))
"""
PROBE_STAND_IN = """
import json, sys
from app import cold_start
from pydantic import BaseModel
class Item(BaseModel):
    name: str
ok = Item.model_validate({"name": "x"}).name == "x"
print(json.dumps({"ok": ok, "metadata_imported": "importlib.metadata" in sys.modules,
                  "stand_in": sys.modules["pydantic.plugin._loader"].get_plugins() == ()}))
"""


def run(code: str, **environ: str) -> dict[str, object]:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": f"{REPO / 'functions'}{os.pathsep}{REPO}", **environ}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_pydantic_itself_loads_no_plugins_when_they_are_disabled_as_the_template_sets() -> None:
    assert run(PROBE_PYDANTIC, PYDANTIC_DISABLE_PLUGINS="__all__") == {"plugins": []}


def test_the_stand_in_gives_the_same_answer_without_importing_importlib_metadata() -> None:
    assert run(PROBE_STAND_IN, PYDANTIC_DISABLE_PLUGINS="__all__") == {
        "ok": True,
        "metadata_imported": False,
        "stand_in": True,
    }


def test_without_the_setting_the_stand_in_stays_out_of_pydantics_way() -> None:
    code = (
        "import json, sys\nfrom app import cold_start\n"
        "print(json.dumps({'installed': 'pydantic.plugin._loader' in sys.modules}))"
    )
    assert run(code) == {"installed": False}
