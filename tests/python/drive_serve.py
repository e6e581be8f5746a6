"""Drives a real `mekara serve` with the official Python MCP SDK client.

Usage: drive_serve.py MEKARA_BINARY PROJECT_DIR EXAMPLES_DIR

Serves the example tool modules of EXAMPLES_DIR, with the current directory PROJECT_DIR,
over stdio and then over Streamable HTTP (`--http 127.0.0.1:0`), and checks on each: the
server's name, the tools and their schemas as the SDK reads them, calls with plain and
structured results, an error result with the Starlark traceback, a refused argument, and an
unknown tool. Exits 1 with a message at the first failed check.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import anyio
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from drive_mekara import PART_TIMEOUT_SECONDS, Failure, check, first_failure, text_of

TOOLS = {
    "stats", "scale", "system_name", "greeting_from_env", "count_files", "word_count", "greet", "tag_lines",
}


async def exercise(session: ClientSession) -> None:
    init = await session.initialize()
    check(init.server_info.name == "mekara", f"server name is {init.server_info.name!r}")
    print(f"ok: initialized {init.server_info.name} {init.server_info.version}, protocol {init.protocol_version}")
    await session.send_ping()
    print("ok: ping")

    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    check(set(tools) == TOOLS, f"tools are {sorted(tools)}, expected {sorted(TOOLS)}")
    greet = tools["greet"].input_schema
    check(greet.get("required") == ["name"], f"`greet` requires {greet.get('required')}, expected ['name']")
    check(greet.get("additionalProperties") is False, "`greet` accepts additional properties")
    check(greet["properties"]["shout"] == {"type": "boolean", "description": "Whether to shout the greeting.",
                                           "default": False}, f"`greet.shout` is {greet['properties']['shout']}")
    check(tools["greet"].description == "Greet someone by name.", f"`greet` description: {tools['greet'].description!r}")
    check(tools["stats"].output_schema is not None, "`stats` has no output schema")
    print(f"ok: {len(tools)} tools with their schemas")

    result = await session.call_tool("greet", {"name": "Ann", "greeting": "Hi"})
    check(not result.is_error and text_of(result) == "Hi, Ann!", f"greet: {result}")
    result = await session.call_tool("stats", {"values": [2, 4]})
    check(not result.is_error, f"stats: {text_of(result)}")
    check(result.structured_content == {"min": 2.0, "max": 4.0, "mean": 3.0},
          f"stats structured content: {result.structured_content}")
    print("ok: greet and stats (structured content)")

    result = await session.call_tool("stats", {"values": []})
    text = text_of(result)
    check(result.is_error and "Traceback" in text and "numbers.star:10" in text, f"stats([]) error: {text}")
    result = await session.call_tool("greet", {"name": "Ann", "volume": 11})
    check(result.is_error and "`volume`" in text_of(result), f"unknown argument: {text_of(result)}")
    print("ok: a runtime error carries the traceback; an unknown argument is refused")

    try:
        await session.call_tool("no_such_tool", {})
    except MCPError as error:
        check("no_such_tool" in str(error), f"the unknown-tool error does not name it: {error}")
        print("ok: an unknown tool is a JSON-RPC error")
    else:
        raise Failure("calling an unknown tool did not raise a JSON-RPC error")


async def part_stdio(binary: str, project: Path, examples: Path) -> None:
    params = StdioServerParameters(command=binary, args=["serve", str(examples)], cwd=str(project),
                                   env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=60) as session:
            await exercise(session)


async def part_http(binary: str, project: Path, examples: Path) -> None:
    process = subprocess.Popen(
        [binary, "serve", str(examples), "--http", "127.0.0.1:0"],
        cwd=project, env=dict(os.environ), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )
    found: list[str] = []
    ready = threading.Event()

    def read_stderr() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            match = re.search(r"mekara serve: listening on (http://127\.0\.0\.1:\d+/mcp)", line)
            if match and not found:
                found.append(match.group(1))
                ready.set()
        ready.set()

    threading.Thread(target=read_stderr, daemon=True).start()
    try:
        ready.wait(timeout=30)
        check(bool(found), "`mekara serve --http` printed no `listening on` line")
        async with streamable_http_client(found[0]) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=60) as session:
                await exercise(session)
    finally:
        process.terminate()
        process.wait(timeout=10)


async def main(binary: str, project: Path, examples: Path) -> None:
    for name, part in (("stdio", part_stdio), ("streamable HTTP", part_http)):
        print(f"== {name}")
        with anyio.fail_after(PART_TIMEOUT_SECONDS):
            await part(binary, project, examples)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: drive_serve.py MEKARA_BINARY PROJECT_DIR EXAMPLES_DIR")
    try:
        anyio.run(main, os.path.abspath(sys.argv[1]), Path(sys.argv[2]).resolve(), Path(sys.argv[3]).resolve())
    except BaseException as error:  # noqa: BLE001 - a check inside a task group arrives wrapped
        failure = first_failure(error)
        if failure is None:
            raise
        print(f"FAIL: {failure}", file=sys.stderr)
        sys.exit(1)
    print("python mcp client: all serve checks passed")
