"""`mcp_runtime.fastmcp`: modules written for FastMCP 4.1.4 (and mcp 2.3.0's MCPServer) served with one import
line changed. Parity: the same source is registered under the real libraries (dev dependencies) and what they
publish and answer is compared with what the runtime publishes and answers."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from testkit import api_event, rpc

from mcp_runtime import ToolContext, wire
from mcp_runtime import tool as native_tool
from mcp_runtime.fastmcp import FastMCP
from mcp_runtime.transport import McpHttpTransport, sse_messages
from tests.support import REPO
from tests.unit.conftest import Client, error_of, make_server, result_of

FACADE_IMPORT = "from mcp_runtime.fastmcp import"
SHAPES = REPO / "fixtures" / "fastmcp_shapes.py"
# What each library calls the names the facade exports, for the import line of a module ported back.
FASTMCP_IMPORTS = {
    "Context": "from fastmcp import Context",
    "FastMCP": "from fastmcp import FastMCP",
    "ToolError": "from fastmcp.exceptions import ToolError",
    "Image": "from fastmcp.utilities.types import Image",
}
MCPSERVER_IMPORTS = {
    "Context": "from mcp.server.mcpserver import Context",
    "MCPServer": "from mcp.server.mcpserver import MCPServer",
}


def load(source: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    sys.modules[name] = module  # pydantic resolves postponed annotations through the module
    exec(compile(source, name, "exec"), module.__dict__)
    return module


def ported_back(path: Path, imports: dict[str, str]) -> str:
    """The module's source with its one facade import line written for the library again."""
    lines = path.read_text().splitlines()
    (index,) = [i for i, line in enumerate(lines) if line.startswith(FACADE_IMPORT)]
    names = [name.strip() for name in lines[index][len(FACADE_IMPORT) :].split(",")]
    lines[index] = "\n".join(imports[name] for name in names)
    return "\n".join(lines) + "\n"


def without_titles(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            key: (
                {name: without_titles(prop) for name, prop in value.items()}
                if key in ("properties", "$defs")
                else without_titles(value)
            )
            for key, value in node.items()
            if not (key == "title" and isinstance(value, str))
        }
    if isinstance(node, list):
        return [without_titles(item) for item in node]
    return node


def inlined(node: Any, definitions: dict[str, Any] | None = None) -> Any:
    """A schema with its `$ref`s inlined and without `$defs` (mcp 2.3.0 publishes them uninlined)."""
    if definitions is None and isinstance(node, dict):
        definitions = node.get("$defs") or {}
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and definitions is not None:
            target = definitions[ref.rsplit("/", 1)[1]]
            return {
                **inlined(target, definitions),
                **{k: inlined(v, definitions) for k, v in node.items() if k != "$ref"},
            }
        return {k: inlined(v, definitions) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [inlined(item, definitions) for item in node]
    return node


def served(module: types.ModuleType) -> Client:
    server = make_server(fixtures=False, patterns=False)
    server.tools.include(module)
    return Client(McpHttpTransport(server))


def listed(client: Client) -> dict[str, dict[str, Any]]:
    return {tool["name"]: tool for tool in result_of(client.request("tools/list"))["tools"]}


def fastmcp_listed(module: types.ModuleType) -> dict[str, dict[str, Any]]:
    """What the real FastMCP serves for the module: its tools, with the `$ref`s its serve-time middleware
    (`dereference_schemas=True`, the default) inlines inlined by the same function."""
    from fastmcp.utilities.json_schema import dereference_refs

    served_tools = {}
    for tool in asyncio.run(module.mcp.list_tools()):
        wire_tool = tool.to_mcp_tool().model_dump(mode="json", by_alias=True, exclude_none=True)
        for key in ("inputSchema", "outputSchema"):
            if key in wire_tool:
                wire_tool[key] = dereference_refs(wire_tool[key])
        served_tools[tool.name] = wire_tool
    return served_tools


def fastmcp_results(module: types.ModuleType, calls: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    async def run() -> dict[str, dict[str, Any]]:
        answers = {}
        for name, arguments in calls.items():
            result = await module.mcp.call_tool(name, arguments)
            answers[name] = {
                "content": [
                    block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content
                ],
                "structuredContent": result.structured_content,
            }
        return answers

    return asyncio.run(run())


@pytest.fixture(scope="module")
def shapes() -> Iterator[tuple[types.ModuleType, types.ModuleType]]:
    ours = load(SHAPES.read_text(), "facade_shapes")
    theirs = load(ported_back(SHAPES, FASTMCP_IMPORTS), "fastmcp_shapes_real")
    yield ours, theirs
    sys.modules.pop("facade_shapes", None)
    sys.modules.pop("fastmcp_shapes_real", None)


# ---- schema parity -------------------------------------------------------------------------------------------------
def test_every_published_input_and_output_schema_is_the_one_fastmcp_4_1_4_publishes_modulo_titles() -> None:
    assert_fastmcp_parity(SHAPES)


def assert_fastmcp_parity(path: Path) -> None:
    """The module at `path`, served by the facade and by the real FastMCP 4.1.4: the same schemas modulo titles."""
    ours = listed(served(load(path.read_text(), f"ours_{path.stem}")))
    theirs = fastmcp_listed(load(ported_back(path, FASTMCP_IMPORTS), f"theirs_{path.stem}"))

    assert sorted(ours) == sorted(theirs)
    for name, tool in ours.items():
        assert without_titles(tool["inputSchema"]) == without_titles(theirs[name]["inputSchema"]), name
        assert without_titles(tool.get("outputSchema")) == without_titles(theirs[name].get("outputSchema")), name


def test_descriptions_come_from_docstrings_and_parameter_descriptions_from_their_args_section(
    shapes: tuple[types.ModuleType, types.ModuleType],
) -> None:
    tools = listed(served(shapes[0]))

    assert tools["collections"]["description"] == "Lists and dicts, the context first."
    assert tools["collections"]["inputSchema"]["properties"]["tags"]["description"] == "Tags to echo."
    assert tools["renamed"] | {"inputSchema": None, "outputSchema": None} == {
        "name": "renamed",
        "title": "Renamed tool",
        "description": "Explicit description.",
        "inputSchema": None,
        "outputSchema": None,
        "_meta": {"team": "shapes"},
    }


# ---- result parity -------------------------------------------------------------------------------------------------
RESULT_CALLS: dict[str, dict[str, Any]] = {
    "scalars": {"count": 3, "label": "x", "color": "blue"},
    "collections": {"tags": ["b", "a"]},
    "structures": {"item": {"name": "bolt"}, "point": {"x": 1}, "pair": {"left": 1, "right": "r"}},
    "returns_point": {},
    "returns_pair": {},
    "returns_dict": {},
    "returns_typed_dict": {},
    "returns_int": {},
    "returns_float": {},
    "returns_bool": {},
    "returns_list": {},
    "returns_optional": {},
    "returns_unannotated": {},
    "returns_image": {},
    "returns_content_list": {},
    "returns_async": {"n": 7},
    "renamed": {"value": "v"},
    "explicit_output": {},
}


def test_every_result_has_the_content_and_structured_content_fastmcp_4_1_4_answers(
    shapes: tuple[types.ModuleType, types.ModuleType],
) -> None:
    client = served(shapes[0])
    theirs = fastmcp_results(shapes[1], RESULT_CALLS)

    for name, arguments in RESULT_CALLS.items():
        result = result_of(client.call_tool(name, arguments))
        assert result["content"] == [
            {("mimeType" if k == "mime_type" else k): v for k, v in block.items()} for block in theirs[name]["content"]
        ], name
        assert result.get("structuredContent") == theirs[name]["structuredContent"], name


def test_a_wrapped_result_carries_fastmcps_wrap_mark_so_its_client_unwraps_it(
    shapes: tuple[types.ModuleType, types.ModuleType],
) -> None:
    result = result_of(served(shapes[0]).call_tool("returns_int", {}))

    assert result["structuredContent"] == {"result": 42}
    assert result["_meta"]["fastmcp"] == {"wrap_result": True}


def test_a_tool_error_is_an_error_result_with_its_text(shapes: tuple[types.ModuleType, types.ModuleType]) -> None:
    result = result_of(served(shapes[0]).call_tool("fails", {"reason": "disk full"}))

    assert (result["isError"], result["content"]) == (True, [{"type": "text", "text": "failed: disk full"}])


def test_any_other_exception_is_a_generic_internal_error_and_the_log_gets_everything(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mcp = FastMCP("breaks")

    @mcp.tool
    def breaks() -> str:
        raise RuntimeError("secret connection string postgres://u:p@db")

    module = types.ModuleType("breaking")
    module.mcp = mcp  # type: ignore[attr-defined]
    with caplog.at_level(logging.ERROR):
        response = served(module).call_tool("breaks", {})

    assert error_of(response) == {"code": wire.INTERNAL_ERROR, "message": "Internal error"}
    assert "postgres" not in response.body
    assert "postgres://u:p@db" in caplog.text


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"count": 0}, "Invalid arguments: 'count' is too small (at least 1)"),
        ({"count": 11}, "Invalid arguments: 'count' is too large (at most 10)"),
        ({"count": "many"}, "Invalid arguments: 'count' must be an integer"),
        (
            {"count": 1, "mode": "medium"},
            "Invalid arguments: 'mode' is not one of the allowed values: 'fast' or 'slow'",
        ),
        ({"count": 1, "other": 1}, "Invalid arguments: 'other' is not allowed"),
        ({}, "Invalid arguments: 'count' is required"),
    ],
)
def test_bad_argument_values_are_the_readable_tool_error_a_native_tool_gets(
    shapes: tuple[types.ModuleType, types.ModuleType], arguments: dict[str, Any], expected: str
) -> None:
    result = result_of(served(shapes[0]).call_tool("scalars", arguments))

    assert (result["isError"], result["content"][0]["text"]) == (True, expected)


def test_malformed_arguments_are_invalid_params(shapes: tuple[types.ModuleType, types.ModuleType]) -> None:
    response = served(shapes[0]).request("tools/call", {"name": "scalars", "arguments": ["not", "an", "object"]})

    assert error_of(response)["code"] == wire.INVALID_PARAMS


# ---- the context ---------------------------------------------------------------------------------------------------
def test_ctx_elicit_is_an_mrtr_round_and_the_retry_with_the_answer_finishes_the_call(
    shapes: tuple[types.ModuleType, types.ModuleType],
) -> None:
    client = served(shapes[0])
    elicitation = {"elicitation": {}}

    first = result_of(client.call_tool("confirm", {"question": "Close #101?"}, capabilities=elicitation))
    assert first["resultType"] == wire.RESULT_INPUT_REQUIRED
    assert first["inputRequests"] == {
        "elicit-1": {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": "Close #101?",
                "requestedSchema": {
                    "type": "object",
                    "properties": {"value": {"type": "boolean"}},
                    "required": ["value"],
                },
            },
        }
    }

    def answered(answer: dict[str, Any]) -> dict[str, Any]:
        return result_of(
            client.call_tool(
                "confirm",
                {"question": "Close #101?"},
                capabilities=elicitation,
                inputResponses={"elicit-1": answer},
                requestState=first["requestState"],
            )
        )

    assert answered({"action": "accept", "content": {"value": True}})["content"][0]["text"] == "yes"
    assert answered({"action": "decline"})["content"][0]["text"] == "declined"


def test_ctx_elicit_for_a_client_without_elicitation_is_minus_32021_naming_it(
    shapes: tuple[types.ModuleType, types.ModuleType],
) -> None:
    error = error_of(served(shapes[0]).call_tool("confirm", {"question": "Close?"}))

    assert error["code"] == wire.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert error["message"] == "This request needs the elicitation capability"


def test_an_elicited_model_comes_back_as_that_model(shapes: tuple[types.ModuleType, types.ModuleType]) -> None:
    client = served(shapes[0])
    first = result_of(client.call_tool("pick_item", {}, capabilities={"elicitation": {}}))
    answered = result_of(
        client.call_tool(
            "pick_item",
            {},
            capabilities={"elicitation": {}},
            inputResponses={"elicit-1": {"action": "accept", "content": {"name": "bolt", "quantity": 3}}},
            requestState=first["requestState"],
        )
    )
    assert answered["content"] == [{"type": "text", "text": "bolt x3"}]


def test_progress_and_logs_of_a_call_reach_the_clients_stream(
    shapes: tuple[types.ModuleType, types.ModuleType],
) -> None:
    message = rpc("tools/call", {"name": "report_work", "arguments": {"parts": ["a", "b"]}}, "p")
    message["params"]["_meta"].update({"progressToken": "tok", wire.META_LOG_LEVEL: "info"})
    response = served(shapes[0]).post(message)
    *notifications, final = sse_messages(response.body)

    assert [(n["method"], n["params"].get("message") or n["params"].get("data")) for n in notifications] == [
        ("notifications/progress", "did a"),
        ("notifications/progress", "did b"),
        ("notifications/message", "did 2 parts"),
    ]
    assert final["result"]["structuredContent"] == {"result": 2}


# ---- registration --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("mcp = FastMCP('x', middleware=[object()])", "FastMCP(middleware=...): middleware does not port"),
        ("mcp = FastMCP('x', auth=object())", "FastMCP(auth=...): per-server auth= does not port"),
        ("mcp = FastMCP('x')\nmcp.mount(FastMCP('y'))", "FastMCP.mount: mounting does not port"),
        (
            "mcp = FastMCP('x')\n@mcp.tool(tags={'a'})\ndef f() -> str:\n    return ''",
            "@mcp.tool(tags=...): tags do not port",
        ),
        (
            "mcp = FastMCP('x')\n@mcp.tool(auth=object())\ndef f() -> str:\n    return ''",
            "per-component auth= does not port",
        ),
        ("mcp = FastMCP('x')\n@mcp.tool(version=2)\ndef f() -> str:\n    return ''", "versions do not port"),
        ("mcp = FastMCP('x', transforms=[object()])", "transforms do not port"),
        (
            "mcp = FastMCP('x')\n@mcp.tool\nasync def f(ctx: Context) -> str:\n    return await ctx.sample('hi')",
            "f: ctx.sample (asking the client's model) does not port",
        ),
        (
            "import asyncio\nmcp = FastMCP('x')\n@mcp.tool\nasync def f() -> str:\n"
            "    asyncio.create_task(asyncio.sleep(1))\n    return ''",
            "f: background work (asyncio.create_task, ensure_future) does not port",
        ),
    ],
)
def test_what_does_not_port_fails_at_import_naming_the_feature_and_what_to_do(source: str, message: str) -> None:
    with pytest.raises(NotImplementedError) as raised:
        load(f"from mcp_runtime.fastmcp import Context, FastMCP\n{source}\n", "unsupported")

    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("task", "support"),
    [(True, "optional"), ("optional", "optional"), ("required", "required"), (False, "forbidden"), (None, "forbidden")],
)
def test_task_options_are_the_one_switch_for_task_behaviour(task: Any, support: str) -> None:
    mcp = FastMCP("t")

    @mcp.tool(task=task)
    def job() -> str:
        return "done"

    ((spec, _),) = mcp.__mcp_register__()
    assert spec.task_support == support  # type: ignore[union-attr]


def test_a_ported_module_is_served_by_the_project_registry_with_its_resources_and_prompts() -> None:
    module = load(
        "from mcp_runtime.fastmcp import FastMCP\n"
        "mcp = FastMCP('x')\n"
        "@mcp.resource('config://app')\ndef config() -> dict:\n    return {'debug': False}\n"
        "@mcp.resource('users://{user_id}/profile')\n"
        "async def profile(user_id: str) -> str:\n    return f'user {user_id}'\n"
        "@mcp.prompt\ndef review(code: str, style: str = 'terse') -> str:\n"
        "    '''Review code.\n\n    Args:\n        code: The code.\n    '''\n    return f'Review {code} ({style})'\n",
        "with_resources",
    )
    from mcp_runtime.catalog import Catalog

    catalog = Catalog()
    catalog.tools.add_loader(lambda: catalog.tools.include(module))
    server = make_server(fixtures=False, patterns=False)
    server.tools, server.prompts, server.resources = catalog.tools, catalog.prompts, catalog.resources
    client = Client(McpHttpTransport(server))

    read = result_of(client.request("resources/read", {"uri": "users://7/profile"}))
    assert read["contents"] == [{"uri": "users://7/profile", "mimeType": "text/plain", "text": "user 7"}]
    assert (
        result_of(client.request("resources/read", {"uri": "config://app"}))["contents"][0]["text"]
        == '{"debug": false}'
    )
    prompts = result_of(client.request("prompts/list"))["prompts"]
    assert prompts == [
        {
            "name": "review",
            "description": "Review code.",
            "arguments": [
                {"name": "code", "required": True, "description": "The code."},
                {"name": "style", "required": False},
            ],
        }
    ]
    got = result_of(client.request("prompts/get", {"name": "review", "arguments": {"code": "x = 1"}}))
    assert got["messages"] == [{"role": "user", "content": {"type": "text", "text": "Review x = 1 (terse)"}}]


# ---- async tools and the one event loop ----------------------------------------------------------------------------
def test_an_async_tool_holding_a_module_level_lock_answers_three_warm_calls_through_the_lambda_handler(
    configure_app: Callable[..., None],
) -> None:
    from app import handlers

    configure_app(DEV_AUTH="1", MCP_TOOL_PACKAGES="fixtures.fastmcp_shapes")
    answers = []
    for call in range(3):
        event = api_event(
            rpc("tools/call", {"name": "locked_lookup", "arguments": {"email": "ada@example.com"}}, call),
            headers={"authorization": "Bearer dev:alice"},
        )
        proxy = handlers.api_handler(event)
        answers.append((proxy["statusCode"], json.loads(proxy["body"])["result"].get("structuredContent")))

    assert answers == [(200, {"x": 15, "y": 0.0})] * 3


def test_a_tool_that_leaves_tasks_pending_on_the_loop_is_warned_about_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def forever() -> None:
        await asyncio.Event().wait()

    @native_tool(description="Leaves work behind.")
    async def leaves_work(ctx: ToolContext) -> str:
        asyncio.get_running_loop().create_task(forever(), name="left-behind")
        return "done"

    module = types.ModuleType("leaving")
    leaves_work.__module__ = "leaving"
    module.leaves_work = leaves_work  # type: ignore[attr-defined]
    with caplog.at_level(logging.WARNING):
        result = result_of(served(module).call_tool("leaves_work", {}))

    assert result["content"] == [{"type": "text", "text": "done"}]
    assert "tool leaves_work left 1 asyncio task(s) pending when it returned (left-behind)" in caplog.text


# ---- the README ---------------------------------------------------------------------------------------------------
def test_the_readmes_count_words_answers_and_publishes_as_the_native_fixture_of_the_same_tool() -> None:
    """The README's block written FastMCP's way (a team's README, 1.0.0's among them, may also show the
    native form: it is the same tool)."""
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(encoding="utf-8"), re.DOTALL)
    (readme_source,) = [block for block in blocks if "def count_words(" in block and "mcp_runtime.fastmcp" in block]
    import fixtures.patterns as native_patterns

    readme = served(load(readme_source, "readme_count_words"))
    native = served(native_patterns)

    answers = [result_of(client.call_tool("count_words", {"text": "two words"})) for client in (readme, native)]
    assert [answer["structuredContent"] for answer in answers] == [{"words": 2, "characters": 9}] * 2
    schemas = [listed(client)["count_words"] for client in (readme, native)]
    # FastMCP closes the arguments object; the native model leaves that to its own config.
    assert without_titles(schemas[0]["inputSchema"]) == {
        **without_titles(schemas[1]["inputSchema"]),
        "additionalProperties": False,
    }
    assert without_titles(schemas[0]["outputSchema"]) == without_titles(schemas[1]["outputSchema"])
    assert (schemas[0]["description"], schemas[0]["annotations"]) == (
        schemas[1]["description"],
        schemas[1]["annotations"],
    )


def test_the_same_names_used_on_other_objects_port() -> None:
    module = load(
        "import asyncio, random\nfrom mcp_runtime.fastmcp import Context, FastMCP\nmcp = FastMCP('x')\n"
        "@mcp.tool\nasync def pick(items: list[str], ctx: Context) -> list[str]:\n"
        "    async with asyncio.TaskGroup() as group:\n        group.create_task(asyncio.sleep(0))\n"
        "    return random.sample(items, 1)\n",
        "ports",
    )

    assert result_of(served(module).call_tool("pick", {"items": ["only"]}))["structuredContent"] == {"result": ["only"]}
