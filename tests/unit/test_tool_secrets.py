"""`ctx.secret(name)`: a name cdk.json's toolSecrets does not give is the tool author's clear error,
raised before any AWS call (the reads themselves: tests/integration/test_tool_secrets.py)."""

from __future__ import annotations

import pytest

from mcp_runtime.context import Principal, RequestMeta
from mcp_runtime.settings import Settings
from mcp_runtime.tool_secrets import ToolSecrets, UnknownSecret
from mcp_runtime.tools import ToolContext

META = RequestMeta("2026-07-28", {})


def test_a_name_toolsecrets_does_not_give_names_those_it_does() -> None:
    ctx = ToolContext(META, Principal("alice"), secrets=ToolSecrets({"weather": "acme/weather", "db": "prod/db"}))
    with pytest.raises(UnknownSecret) as raised:
        ctx.secret("wether")
    assert str(raised.value) == (
        "ctx.secret('wether'): no tool secret has that name; cdk.json's toolSecrets gives the tools 'db', 'weather'"
    )


def test_without_toolsecrets_every_name_is_unknown() -> None:
    with pytest.raises(UnknownSecret, match=r"cdk.json's toolSecrets gives the tools none$"):
        ToolContext(META, Principal("alice")).secret("weather")


def test_the_functions_read_the_map_the_template_sets_once_into_their_settings() -> None:
    settings = Settings.from_environ({"MCP_TOOL_SECRETS": '{"weather":"acme/weather","db":"arn:aws:secretsmanager:x"}'})
    assert settings.tool_secrets == {"weather": "acme/weather", "db": "arn:aws:secretsmanager:x"}
    assert Settings.from_environ({}).tool_secrets == {}
    with pytest.raises(ValueError, match="MCP_TOOL_SECRETS"):
        Settings.from_environ({"MCP_TOOL_SECRETS": '{"weather": 1}'})
