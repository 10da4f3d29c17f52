"""End to end with the official MCP Python SDK: the built `notes` server runs
as a child process over stdio and is driven by `mcp.Client`, no mocks.

NOTES_SERVER must name the server binary (the Rust test `e2e_python_client`
sets it). Every test runs twice, on a fresh server each time: with the SDK's
default negotiation ("auto": `server/discover`, protocol 2026-07-28) and with
the legacy `initialize` handshake.

Besides the SDK's parsed models, each connection records the raw JSON-RPC
messages the server sent, so the tests can check what was on the wire.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_PARAMS, CallToolResult, JSONRPCResponse, TextContent
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

pytestmark = pytest.mark.anyio

HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
HINT_FIELDS = ("read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint")

# name -> (description from the doc comment, hints in HINTS order)
EXPECTED_TOOLS: dict[str, tuple[str, tuple[bool, bool, bool, bool]]] = {
    "add_note": (
        "Add a note once per `request_id`: a resend with the same\n"
        "`request_id` returns the note added the first time.",
        (False, False, True, False),
    ),
    "append_note": ("Add a note; a resend would add it twice.", (False, False, False, False)),
    "delete_note": ("Delete a note by id; deleting twice has no further effect.", (False, True, True, False)),
    "forecast": (
        "The weather forecast for a city, from a weather service on the open\n"
        "internet (simulated here: the answer is derived from the name).",
        (True, False, True, True),
    ),
    "list_notes": ("List every note, oldest first.", (True, False, True, False)),
    "update_note": ("Replace the text of a note; repeating it leaves the same text.", (False, True, True, False)),
}

KEY_CONFLICT = -32070
"""mcp_hints::idempotency::codes::KEY_CONFLICT"""


def expected_meta(tool: str) -> dict[str, Any] | None:
    """A tool's `_meta`: every hint is declared, so no provenance; the argument carrying a keyed tool's key."""
    if tool == "add_note":
        return {"mcp-hints/idempotencyKey": "request_id"}
    return None

TIMEOUT_SECONDS = 30
"""How long one exchange with the server may take."""
SESSION_TIMEOUT_SECONDS = 120
"""How long one whole test's session may take."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def server() -> StdioServerParameters:
    command = os.environ.get("NOTES_SERVER")
    if not command:
        pytest.fail("NOTES_SERVER must name the built `notes` binary (the Rust test e2e_python_client sets it)")
    if not os.access(command, os.X_OK):
        pytest.fail(f"NOTES_SERVER={command!r} is not an executable file")
    return StdioServerParameters(command=command)


@dataclass
class Session:
    client: Client
    wire: list[dict[str, Any]] = field(default_factory=list)
    """Every JSON-RPC message the server sent, as raw JSON objects."""

    def last_result_with(self, key: str) -> dict[str, Any]:
        """The raw `result` of the server's latest response that has `key`."""
        for message in reversed(self.wire):
            result = message.get("result")
            if isinstance(result, dict) and key in result:
                return result
        raise AssertionError(f"no response with {key!r} on the wire: {self.wire}")

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
        with anyio.fail_after(TIMEOUT_SECONDS):
            return await self.client.call_tool(name, arguments)

    async def notes(self) -> list[dict[str, Any]]:
        result = await self.call("list_notes")
        return success(result)["notes"]


@asynccontextmanager
async def recording(params: StdioServerParameters, wire: list[dict[str, Any]]) -> AsyncIterator[Any]:
    """`stdio_client`, with every message from the server also appended to `wire`."""
    async with stdio_client(params) as (read_stream, write_stream):
        forward, tapped = anyio.create_memory_object_stream[Any](0)

        async def pump() -> None:
            async with forward:
                async for item in read_stream:
                    if isinstance(item, SessionMessage):
                        wire.append(item.message.model_dump(mode="json", by_alias=True, exclude_unset=True))
                    await forward.send(item)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(pump)
            try:
                yield tapped, write_stream
            finally:
                tasks.cancel_scope.cancel()


@asynccontextmanager
async def connect(server: StdioServerParameters, mode: str) -> AsyncIterator[Session]:
    """A fresh server and a session with it; a hung server fails the test."""
    wire: list[dict[str, Any]] = []
    with anyio.fail_after(SESSION_TIMEOUT_SECONDS):
        async with Client(recording(server, wire), mode=mode) as client:
            assert client.server_info is not None
            assert client.server_info.name == "notes"
            if mode == "auto":
                assert client.protocol_version in MODERN_PROTOCOL_VERSIONS
            else:
                assert client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
            yield Session(client, wire)


def text(result: CallToolResult) -> str:
    """The only content block of a result, which must be text."""
    assert len(result.content) == 1, result.content
    (block,) = result.content
    assert isinstance(block, TextContent), block
    return block.text


def success(result: CallToolResult) -> Any:
    """A successful result's structured content, checked against its text twin."""
    assert result.is_error is False, result
    assert result.structured_content is not None, result
    assert json.loads(text(result)) == result.structured_content
    return result.structured_content


def success_text(result: CallToolResult) -> str:
    assert result.is_error is False, result
    assert result.structured_content is None, result
    return text(result)


def tool_error(result: CallToolResult) -> str:
    assert result.is_error is True, result
    assert result.structured_content is None, result
    return text(result)


async def test_tools_list_carries_all_four_hints(server: StdioServerParameters, mode: str) -> None:
    async with connect(server, mode) as session:
        with anyio.fail_after(TIMEOUT_SECONDS):
            listed = await session.client.list_tools()
        assert listed.next_cursor is None
        assert sorted(tool.name for tool in listed.tools) == sorted(EXPECTED_TOOLS)

        for tool in listed.tools:
            description, hints = EXPECTED_TOOLS[tool.name]
            assert tool.description == description, tool.name
            annotations = tool.annotations
            assert annotations is not None, f"{tool.name} has no annotations"
            values = tuple(getattr(annotations, name) for name in HINT_FIELDS)
            assert None not in values, f"{tool.name}: a hint is missing: {annotations!r}"
            assert values == hints, tool.name
            # Set from the message, not filled in by a model default.
            assert set(HINT_FIELDS) <= annotations.model_fields_set, tool.name
            assert tool.meta == expected_meta(tool.name), tool.name

        # The same, straight from the JSON the server wrote.
        raw_tools = {tool["name"]: tool for tool in session.last_result_with("tools")["tools"]}
        assert sorted(raw_tools) == sorted(EXPECTED_TOOLS)
        for name, (description, hints) in EXPECTED_TOOLS.items():
            raw = raw_tools[name]
            assert raw["description"] == description, name
            assert raw["annotations"] == dict(zip(HINTS, hints, strict=True)), name
            assert raw.get("_meta") == expected_meta(name), name


async def test_append_note_assigns_ids_from_one_and_list_notes_shows_them_in_order(
    server: StdioServerParameters, mode: str
) -> None:
    async with connect(server, mode) as session:
        assert await session.notes() == []

        assert success(await session.call("append_note", {"text": "buy milk"})) == {"id": 1, "text": "buy milk"}
        assert success(await session.call("append_note", {"text": "call Ana"})) == {"id": 2, "text": "call Ana"}
        assert await session.notes() == [
            {"id": 1, "text": "buy milk"},
            {"id": 2, "text": "call Ana"},
        ]

        # Not idempotent: the same text again is a third note.
        assert success(await session.call("append_note", {"text": "buy milk"})) == {"id": 3, "text": "buy milk"}
        assert len(await session.notes()) == 3

        # What the SDK parsed is what the server sent.
        raw = session.last_result_with("structuredContent")
        assert raw["isError"] is False
        assert raw["structuredContent"] == {
            "notes": [
                {"id": 1, "text": "buy milk"},
                {"id": 2, "text": "call Ana"},
                {"id": 3, "text": "buy milk"},
            ]
        }


async def test_update_note_replaces_the_text_and_repeating_it_changes_nothing(
    server: StdioServerParameters, mode: str
) -> None:
    async with connect(server, mode) as session:
        for note in ("first", "second"):
            await session.call("append_note", {"text": note})

        edit = {"id": 1, "text": "first, revised"}
        assert success(await session.call("update_note", edit)) == edit
        after_once = await session.notes()
        assert after_once == [{"id": 1, "text": "first, revised"}, {"id": 2, "text": "second"}]

        assert success(await session.call("update_note", edit)) == edit
        assert await session.notes() == after_once


async def test_update_note_of_a_missing_id_is_a_tool_error(server: StdioServerParameters, mode: str) -> None:
    async with connect(server, mode) as session:
        await session.call("append_note", {"text": "only"})

        result = await session.call("update_note", {"id": 7, "text": "x"})
        assert tool_error(result) == "no note has id 7"
        assert session.wire[-1]["result"]["isError"] is True
        assert await session.notes() == [{"id": 1, "text": "only"}]


async def test_delete_note_removes_it_and_a_second_delete_reports_it_already_absent(
    server: StdioServerParameters, mode: str
) -> None:
    async with connect(server, mode) as session:
        for note in ("keep", "drop"):
            await session.call("append_note", {"text": note})

        assert success_text(await session.call("delete_note", {"id": 2})) == "deleted note 2"
        assert await session.notes() == [{"id": 1, "text": "keep"}]

        assert success_text(await session.call("delete_note", {"id": 2})) == "note 2 is already absent"
        assert await session.notes() == [{"id": 1, "text": "keep"}]

        # Ids are never reused: the next note is 3, not 2.
        assert success(await session.call("append_note", {"text": "new"})) == {"id": 3, "text": "new"}


async def test_forecast_returns_structured_content(server: StdioServerParameters, mode: str) -> None:
    async with connect(server, mode) as session:
        # Simulated from the name: the byte sum of "Lisbon" is 615, so low =
        # 615 % 15 = 0, high = low + 8, summary = entry 615 % 4 = 3 of
        # ["sunny", "cloudy", "rain", "windy"].
        expected = {"city": "Lisbon", "summary": "windy", "high_celsius": 8, "low_celsius": 0}
        result = await session.call("forecast", {"city": "Lisbon"})
        assert success(result) == expected
        assert session.last_result_with("structuredContent")["structuredContent"] == expected
        assert success(await session.call("forecast", {"city": "Lisbon"})) == expected
        assert await session.notes() == []


async def test_add_note_runs_once_per_request_id(server: StdioServerParameters, mode: str) -> None:
    async with connect(server, mode) as session:
        first = await session.call("add_note", {"request_id": "r-1", "text": "buy milk"})
        assert success(first) == {"id": 1, "text": "buy milk"}
        assert "mcp-hints/replayed" not in (first.meta or {})

        # A resend (key order changed) gets the recorded note, marked as a replay.
        again = await session.call("add_note", {"text": "buy milk", "request_id": "r-1"})
        assert success(again) == {"id": 1, "text": "buy milk"}
        assert again.meta is not None
        assert again.meta["mcp-hints/replayed"]["key"] == "r-1"
        assert await session.notes() == [{"id": 1, "text": "buy milk"}]

        # The key names one operation: other arguments are refused, unrun.
        with pytest.raises(MCPError) as raised:
            await session.call("add_note", {"request_id": "r-1", "text": "call Ana"})
        assert raised.value.code == KEY_CONFLICT
        assert session.wire[-1]["error"]["data"] == {
            "tool": "add_note",
            "idempotencyKey": "r-1",
            "reason": "conflict",
        }

        # No key is a JSON-RPC error naming the field, and nothing is added.
        with pytest.raises(MCPError) as raised:
            await session.call("add_note", {"text": "keyless"})
        assert raised.value.code == INVALID_PARAMS
        assert raised.value.message.startswith("the idempotency key `request_id` of `add_note` is missing")

        assert success(await session.call("add_note", {"request_id": "r-2", "text": "call Ana"})) == {
            "id": 2,
            "text": "call Ana",
        }
        assert await session.notes() == [{"id": 1, "text": "buy milk"}, {"id": 2, "text": "call Ana"}]


async def test_malformed_arguments_get_a_clear_error_and_the_server_keeps_serving(
    server: StdioServerParameters, mode: str
) -> None:
    async with connect(server, mode) as session:
        await session.call("append_note", {"text": "survivor"})

        # rmcp reports arguments that do not deserialize as a tool error
        # (isError: true), not as a JSON-RPC error.
        missing = "failed to deserialize parameters: missing field `text`"
        assert tool_error(await session.call("append_note", {})) == missing
        assert tool_error(await session.call("append_note")) == missing
        assert (
            tool_error(await session.call("update_note", {"id": "seven", "text": "x"}))
            == 'failed to deserialize parameters: invalid type: string "seven", expected u64'
        )
        assert (
            tool_error(await session.call("delete_note", {"id": -1}))
            == "failed to deserialize parameters: invalid value: integer `-1`, expected u64"
        )

        # Empty text passes deserialization; the tool itself refuses it.
        for name, arguments in [
            ("append_note", {"text": ""}),
            ("append_note", {"text": "  \n"}),
            ("update_note", {"id": 1, "text": ""}),
        ]:
            assert tool_error(await session.call(name, arguments)) == "`text` must not be empty", name
        assert tool_error(await session.call("forecast", {"city": ""})) == "`city` must not be empty"

        assert await session.notes() == [{"id": 1, "text": "survivor"}]


async def test_unknown_tool_gets_a_json_rpc_error_and_the_server_keeps_serving(
    server: StdioServerParameters, mode: str
) -> None:
    async with connect(server, mode) as session:
        await session.call("append_note", {"text": "survivor"})

        with pytest.raises(MCPError) as raised:
            await session.call("no_such_tool", {})
        assert raised.value.code == INVALID_PARAMS
        assert raised.value.message == "tool not found"
        assert session.wire[-1]["error"] == {"code": INVALID_PARAMS, "message": "tool not found"}

        assert await session.notes() == [{"id": 1, "text": "survivor"}]
