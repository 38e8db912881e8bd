"""The tool authoring API: what the decorator publishes, how results and errors map, what registration refuses."""

from __future__ import annotations

import json
import re
import types
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field
from testkit import meta

from mcp_runtime import tool, wire
from mcp_runtime.fastmcp import Context
from mcp_runtime.tools import (
    EMPTY_INPUT_SCHEMA,
    SPEC_ATTRIBUTE,
    Registry,
    ToolContext,
    ToolError,
    ToolResult,
    ToolSpec,
    text,
)
from mcp_runtime.transport import McpHttpTransport
from tests.unit.conftest import ALICE, Client, error_of, make_server, result_of

REPO = Path(__file__).resolve().parents[2]


# Input models live at module level: the decorator resolves annotations through the function's globals.
class SearchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(description="What to look for.", min_length=1)
    limit: int = Field(10, ge=1, le=50)


class Hit(BaseModel):
    title: str
    score: float


class Hits(BaseModel):
    hits: list[Hit]


class Regional(BaseModel):
    region: str = Field(json_schema_extra={"x-mcp-header": "Region"})
    other: str = "x"


class Outer(BaseModel):
    hit: Hit


class Many(BaseModel):
    a: int
    b: int
    c: int
    d: int
    e: int
    f: int
    g: int


def spec_of(fn: Any) -> ToolSpec:
    spec = getattr(fn, SPEC_ATTRIBUTE)
    assert isinstance(spec, ToolSpec)
    return spec


def module_with(*functions: Any, name: str = "authoring_fixture") -> types.ModuleType:
    module = types.ModuleType(name)
    for fn in functions:
        fn.__module__ = name
        setattr(module, fn.__name__, fn)
    return module


def client_for(*functions: Any) -> Client:
    server = make_server(fixtures=False, patterns=False)
    server.tools.include(module_with(*functions))
    return Client(McpHttpTransport(server))


# ---- what the decorator publishes -----------------------------------------------------------------------------------
def test_the_decorator_publishes_the_pydantic_schema_of_the_first_parameter_as_input_schema() -> None:
    @tool(description="Search.")
    def search(args: SearchArgs, ctx: ToolContext) -> str:
        return args.query

    spec = spec_of(search)
    assert spec.name == "search"
    assert spec.input_model is SearchArgs
    assert spec.input_schema == SearchArgs.model_json_schema()
    assert spec.input_schema["type"] == "object"
    assert spec.input_schema["required"] == ["query"]
    assert spec.input_schema["additionalProperties"] is False


def test_tools_list_serves_the_published_schema_and_description() -> None:
    @tool(description="Search the index.", title="Search", annotations={"readOnlyHint": True})
    def search(args: SearchArgs, ctx: ToolContext) -> str:
        return args.query

    listed = result_of(client_for(search).request("tools/list"))["tools"]
    assert listed == [
        {
            "name": "search",
            "description": "Search the index.",
            "inputSchema": SearchArgs.model_json_schema(),
            "title": "Search",
            "annotations": {"readOnlyHint": True},
        }
    ]


def test_a_tool_without_arguments_gets_the_empty_closed_object_schema() -> None:
    @tool(description="No arguments.")
    def ping_like(args: None, ctx: ToolContext) -> str:
        return "pong"

    assert spec_of(ping_like).input_schema == {"type": "object", "additionalProperties": False}
    assert spec_of(ping_like).input_schema == EMPTY_INPUT_SCHEMA
    assert spec_of(ping_like).input_schema is not EMPTY_INPUT_SCHEMA  # a copy, so no tool can mutate the shared one


def test_an_explicit_input_schema_is_published_verbatim() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "if": {"required": ["n"]}, "then": {}}

    @tool(description="Raw schema.", input_schema=schema)
    def raw(args: dict[str, Any], ctx: ToolContext) -> str:
        return "ok"

    assert spec_of(raw).input_schema == schema


def test_a_name_can_override_the_function_name() -> None:
    @tool(description="Renamed.", name="search.v2")
    def search(args: SearchArgs, ctx: ToolContext) -> str:
        return "ok"

    assert spec_of(search).name == "search.v2"


def test_an_x_mcp_header_property_is_mapped_to_its_lower_cased_header_name() -> None:
    @tool(description="Regional.")
    def regional(args: Regional, ctx: ToolContext) -> str:
        return args.region

    assert spec_of(regional).header_params == {"region": "region"}


# ---- results and errors ---------------------------------------------------------------------------------------------
def test_an_output_model_gives_structured_content_and_the_same_json_as_text() -> None:
    @tool(description="Search with structured output.", output=Hits)
    def search(args: SearchArgs, ctx: ToolContext) -> Hits:
        return Hits(hits=[Hit(title=args.query, score=0.5)])

    client = client_for(search)
    listed = result_of(client.request("tools/list"))["tools"][0]
    assert listed["outputSchema"] == Hits.model_json_schema()
    result = result_of(client.call_tool("search", {"query": "mcp"}))
    assert result["structuredContent"] == {"hits": [{"title": "mcp", "score": 0.5}]}
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    assert "isError" not in result


def test_a_tool_error_becomes_an_is_error_result_with_its_text() -> None:
    @tool(description="Fails.")
    def fails(args: None, ctx: ToolContext) -> str:
        raise ToolError("The index is offline; try again later.")

    result = result_of(client_for(fails).call_tool("fails", {}))
    assert result == {
        "resultType": wire.RESULT_COMPLETE,
        "content": [{"type": "text", "text": "The index is offline; try again later."}],
        "isError": True,
        "_meta": {wire.META_SERVER_INFO: {"name": "serverless-mcp-tasks", "version": "0.1.0"}},
    }


@pytest.mark.parametrize(
    ("produced", "content"),
    [
        ("plain", [{"type": "text", "text": "plain"}]),
        ([text("a"), text("b")], [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
        (ToolResult([text("r")]), [{"type": "text", "text": "r"}]),
    ],
)
def test_strings_content_lists_and_tool_results_map_to_content(produced: Any, content: list[dict[str, Any]]) -> None:
    @tool(description="Returns something.")
    def returns(args: None, ctx: ToolContext) -> Any:
        return produced

    result = result_of(client_for(returns).call_tool("returns", {}))
    assert result["content"] == content
    assert result["resultType"] == wire.RESULT_COMPLETE


def test_an_unexpected_exception_is_an_internal_error_that_leaks_no_detail() -> None:
    @tool(description="Breaks.")
    def breaks(args: None, ctx: ToolContext) -> Any:
        raise RuntimeError("secret connection string postgres://u:p@db")

    response = client_for(breaks).call_tool("breaks", {})
    error = error_of(response)
    assert error["code"] == wire.INTERNAL_ERROR
    assert "secret" not in response.body and "postgres" not in response.body


def test_a_tool_returning_an_unsupported_type_is_an_internal_error() -> None:
    @tool(description="Returns a number.")
    def number(args: None, ctx: ToolContext) -> Any:
        return 42

    assert error_of(client_for(number).call_tool("number", {}))["code"] == wire.INTERNAL_ERROR


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"query": "x", "limit": 0}, "Invalid arguments: 'limit' is too small (at least 1)"),
        ({"query": "x", "limit": 51}, "Invalid arguments: 'limit' is too large (at most 50)"),
        ({"query": "x", "limit": "many"}, "Invalid arguments: 'limit' must be an integer"),
        ({"query": ""}, "Invalid arguments: 'query' is too short (at least 1 character)"),
        ({"query": "x", "extra": 1}, "Invalid arguments: 'extra' is not allowed"),
        ({}, "Invalid arguments: 'query' is required"),
    ],
)
def test_argument_problems_are_described_in_our_own_words(arguments: dict[str, Any], expected: str) -> None:
    @tool(description="Search.")
    def search(args: SearchArgs, ctx: ToolContext) -> str:
        return "ok"

    result = result_of(client_for(search).call_tool("search", arguments))
    assert result["isError"] is True
    assert result["content"][0]["text"] == expected


def test_nested_argument_problems_name_the_path() -> None:
    @tool(description="Nested.")
    def nested(args: Outer, ctx: ToolContext) -> str:
        return "ok"

    result = result_of(client_for(nested).call_tool("nested", {"hit": {"title": "t", "score": "high"}}))
    assert result["content"][0]["text"] == "Invalid arguments: 'hit.score' must be a number"


def test_at_most_five_argument_problems_are_reported() -> None:
    @tool(description="Many.")
    def many(args: Many, ctx: ToolContext) -> str:
        return "ok"

    said = result_of(client_for(many).call_tool("many", {}))["content"][0]["text"]
    assert said.count("is required") == 5


# ---- registration ---------------------------------------------------------------------------------------------------
def _spec(name: str, **overrides: Any) -> ToolSpec:
    values: dict[str, Any] = {
        "name": name,
        "description": "d",
        "fn": lambda args, ctx: "ok",
        "input_model": None,
        "input_schema": dict(EMPTY_INPUT_SCHEMA),
    }
    values.update(overrides)
    return ToolSpec(**values)


def test_a_second_tool_with_the_same_name_is_refused() -> None:
    registry = Registry()
    registry.add(_spec("twice"))
    with pytest.raises(ValueError):
        registry.add(_spec("twice"))
    assert len(registry) == 1


@pytest.mark.parametrize("name", ["", "has space", "a" * 65, "slash/name", "caf\u00e9", "semi;colon", "new\nline"])
def test_a_tool_name_outside_the_allowed_alphabet_or_length_is_refused(name: str) -> None:
    with pytest.raises(ValueError):
        Registry().add(_spec(name))


@pytest.mark.parametrize("name", ["a", "a" * 64, "Search.v2-beta_1", "0"])
def test_tool_names_from_the_allowed_alphabet_are_accepted(name: str) -> None:
    registry = Registry()
    registry.add(_spec(name))
    assert registry.get(name) is not None


def test_only_task_tools_take_a_prepare_step() -> None:
    with pytest.raises(ValueError, match="only task tools take a prepare step"):
        Registry().add(_spec("t", prepare=lambda args, ctx: None))
    registry = Registry()
    registry.add(_spec("t", task_support="optional", prepare=lambda args, ctx: None))
    assert registry.get("t") is not None


# ---- one registry, one builder (release 1.0.0's forms under their old names: test_deprecated_authoring.py) -----
def test_the_runtime_has_one_registry_and_one_builder() -> None:
    runtime = REPO / "functions" / "mcp_runtime"
    sources = {path: path.read_text(encoding="utf-8") for path in runtime.rglob("*.py")}
    registries = sorted(
        f"{path.relative_to(runtime)}:{name}"
        for path, source in sources.items()
        for name in re.findall(r"^class (\w*Registry)\b", source, re.MULTILINE)
    )
    builders = sorted(
        f"{path.relative_to(runtime)}:{name}"
        for path, source in sources.items()
        for name in re.findall(r"^def (\w+_from_function)\(", source, re.MULTILINE)
    )
    assert registries == ["tools.py:Registry"]
    assert builders == [
        "components.py:prompt_from_function",
        "components.py:resource_from_function",
        "components.py:tool_from_function",
    ]


def test_a_module_written_with_the_native_keyword_form_and_task_still_works() -> None:
    @tool(description="Long job.", task="required")
    def long_job(args: None, ctx: ToolContext) -> str:
        return "done"

    assert spec_of(long_job).task_support == "required"


def test_a_task_required_tool_called_by_a_client_without_the_tasks_extension_needs_that_capability() -> None:
    @tool(description="Long job.", task="required")
    def long_job(args: None, ctx: ToolContext) -> str:
        return "done"

    response = client_for(long_job).call_tool("long_job", {})
    assert response.status == 400
    error = error_of(response)
    assert error["code"] == wire.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert error["data"] == {"requiredCapabilities": {"extensions": {wire.TASKS_EXTENSION: {}}}}


def test_an_optional_task_tool_runs_inline_for_a_client_without_the_tasks_extension() -> None:
    @tool(description="Maybe long.", task=True)
    def maybe_long(args: None, ctx: ToolContext) -> str:
        return "inline"

    assert result_of(client_for(maybe_long).call_tool("maybe_long", {}))["content"][0]["text"] == "inline"


def test_include_serves_only_the_tools_defined_in_that_module_in_name_order() -> None:
    @tool(description="B.")
    def bravo(args: None, ctx: ToolContext) -> str:
        return "b"

    @tool(description="A.")
    def alpha(args: None, ctx: ToolContext) -> str:
        return "a"

    @tool(description="Imported from elsewhere.")
    def foreign(args: None, ctx: ToolContext) -> str:
        return "f"

    module = module_with(bravo, alpha)
    setattr(module, "foreign", foreign)  # noqa: B010 - defined in another module: only re-exported here
    registry = Registry()
    registry.include(module)
    assert [spec.name for spec in registry] == ["alpha", "bravo"]


# ---- progress: one rule for a synchronous call and a task (issue 15, defect 3) ----------------------------------
def test_a_progress_report_that_does_not_increase_is_dropped_not_raised_in_a_synchronous_call() -> None:
    from mcp_runtime import wire as wire_names
    from mcp_runtime.context import RequestContext, RequestMeta

    meta = RequestMeta(wire_names.PROTOCOL_VERSION, {}, progress_token="p1")
    ctx = RequestContext(1, "tools/call", meta, ALICE, {})
    ctx.send_progress(0.99, 4)
    ctx.send_progress(0.99, 4)  # the same value again: not an increase
    ctx.send_progress(0.5, 4)  # lower: not an increase either
    ctx.send_progress(1.0, 4)
    assert [n["params"]["progress"] for n in ctx.notifications] == [0.99, 1.0]


def test_deploy_release_with_a_stage_length_that_repeats_a_progress_value_runs_synchronously(client: Client) -> None:
    """seconds_per_stage=1.505 caps two reports of a stage at the same 0.99: that used to be a -32603."""
    response = client.call_tool(
        "deploy_release",
        {"service": "web", "version": "1", "seconds_per_stage": 1.505},
        _meta=meta({"elicitation": {}}, **{wire.META_PROGRESS_TOKEN: "deploy-1"}),
    )
    body = response.json()
    assert "error" not in body, body
    assert body["result"]["resultType"] == wire.RESULT_INPUT_REQUIRED


# ---- keyword signatures, async tools and dict results ------------------------------------------------------------
def test_a_keyword_signature_async_tool_gets_a_model_made_from_its_parameters_and_may_return_a_dict() -> None:
    @tool(description="Scale a vector.")
    async def scale(vector: list[float], ctx: Context, factor: float = Field(2.0, gt=0)) -> dict[str, Any]:
        await ctx.report_progress(1, 1, "scaled")
        doubled = await ctx.step("scale", lambda: [value * factor for value in vector])
        return {"vector": doubled}

    client = client_for(scale)
    (listed,) = result_of(client.request("tools/list"))["tools"]
    result = result_of(client.call_tool("scale", {"vector": [1, 2.5]}))
    refused = result_of(client.call_tool("scale", {"vector": [1], "factor": 0}))

    assert listed["inputSchema"] == {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "vector": {"items": {"type": "number"}, "type": "array"},
            "factor": {"default": 2.0, "exclusiveMinimum": 0, "type": "number"},
        },
        "required": ["vector"],
    }
    assert (result["structuredContent"], json.loads(result["content"][0]["text"])) == ({"vector": [2.0, 5.0]},) * 2
    assert (refused["isError"], refused["content"][0]["text"]) == (
        True,
        "Invalid arguments: 'factor' is too small (must be more than 0.0)",
    )
