"""Cold-start settings that must take effect before pydantic is first imported (bench/README.md).

The template sets `PYDANTIC_DISABLE_PLUGINS=__all__` for both functions: no pydantic plugin ships in
the asset, so pydantic's entry-point scan of every installed distribution is skipped. With plugins
disabled pydantic's loader answers "no plugins", but importing it still imports `importlib.metadata`;
the stand-in below gives the same answer without that import. `tests/unit/test_cold_start.py` pins
the pydantic behaviour this relies on.
"""

import os
import sys
import types

PLUGINS_DISABLED_VALUES = ("__all__", "1", "true")


def install_plugin_loader_stand_in() -> bool:
    """Put the no-plugins loader in place when plugins are disabled; True if it was installed."""
    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") not in PLUGINS_DISABLED_VALUES:
        return False
    if "pydantic.plugin._loader" in sys.modules:
        return False
    stand_in = types.ModuleType("pydantic.plugin._loader")
    stand_in.get_plugins = lambda: ()  # type: ignore[attr-defined]
    sys.modules["pydantic.plugin._loader"] = stand_in
    return True


install_plugin_loader_stand_in()
