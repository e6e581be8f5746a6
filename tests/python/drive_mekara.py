"""Drives a real `mekara mcp` server with the official Python MCP SDK client.

Usage: drive_mekara.py MEKARA_BINARY PROJECT_DIR

PROJECT_DIR must hold a `.mekara/` folder; this script adds the `slow` test script to it.
The server runs with the current directory PROJECT_DIR and this process's environment, so the
caller chooses HOME. Part one talks to `mekara mcp` over stdio, part two to
`mekara mcp --http 127.0.0.1:0` over Streamable HTTP. Exits 1 with a message at the first
failed check.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

TOOLS = {"list_scripts", "start", "continue_compiled_script", "finish_nl_script", "status", "resume", "eject_script"}
READ_ONLY_TOOLS = {"list_scripts", "status"}
# A limit on each whole part, so a hung server fails the test instead of hanging it.
PART_TIMEOUT_SECONDS = 120

SLOW_NL = """---
description: Print three lines slowly, then ask for a word (a test of progress notifications)
---

# Slow

1. Run `for i in 1 2 3; do echo line $i; sleep 0.3; done`.
2. Say "done".
"""

SLOW_STAR = """def execute(request):
    auto("for i in 1 2 3; do echo line $i; sleep 0.3; done")
    llm("say done")
"""


class Failure(Exception):
    """A check that did not hold."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise Failure(message)


def text_of(result: Any) -> str:
    """The text of a tool result's content blocks, joined."""
    return "\n".join(block.text for block in result.content if getattr(block, "type", None) == "text")


async def call(session: ClientSession, tool: str, arguments: dict[str, Any], **kwargs: Any) -> str:
    """Calls `tool` and returns its text; fails on `isError`."""
    result = await session.call_tool(tool, arguments, **kwargs)
    text = text_of(result)
    check(not result.is_error, f"`{tool}({arguments})` returned isError:\n{text}")
    check(text.strip() != "", f"`{tool}({arguments})` returned no text")
    return text


async def call_error(session: ClientSession, tool: str, arguments: dict[str, Any]) -> str:
    """Calls `tool`, which must fail with an `isError` result, and returns its text."""
    result = await session.call_tool(tool, arguments)
    text = text_of(result)
    check(result.is_error, f"`{tool}({arguments})` should have returned isError, got:\n{text}")
    check(text.strip() != "", f"`{tool}({arguments})` returned isError with no text")
    return text


async def check_server(session: ClientSession) -> None:
    """initialize, server name, the tools and their read-only annotations."""
    init = await session.initialize()
    check(init.server_info.name == "mekara", f"server name is {init.server_info.name!r}, expected 'mekara'")
    check(bool(init.server_info.version), "server version is empty")
    print(f"ok: initialized {init.server_info.name} {init.server_info.version}, protocol {init.protocol_version}")

    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    check(set(tools) == TOOLS, f"tools are {sorted(tools)}, expected {sorted(TOOLS)}")
    for name, tool in tools.items():
        read_only = tool.annotations is not None and tool.annotations.read_only_hint is True
        if name in READ_ONLY_TOOLS:
            check(read_only, f"tool `{name}` is not annotated readOnlyHint: true ({tool.annotations})")
        else:
            check(not read_only, f"tool `{name}` changes runs but is annotated readOnlyHint: true")
        check(bool(tool.description), f"tool `{name}` has no description")
    check("name" in (tools["start"].input_schema.get("required") or []), "`start` does not require `name`")
    print(f"ok: tools {sorted(tools)}; read-only: {sorted(READ_ONLY_TOOLS)}")


async def drive_random(session: ClientSession) -> None:
    """test/random from start to end, with a wrong call while its llm step is pending."""
    reply = await call(session, "start", {"name": "test/random"})
    check("shuf -i 1-100 -n 1" in reply, f"`start` reply does not show the auto step's command:\n{reply}")
    check("continue_compiled_script" in reply, f"`start` reply does not name the next call:\n{reply}")
    check("guess" in reply, f"`start` reply does not name the expected output `guess`:\n{reply}")
    print("ok: start test/random pends the llm step expecting `guess`")

    # The wrong tool for a pending llm step: an isError result naming the right call, and the
    # run is unchanged.
    wrong = await call_error(session, "finish_nl_script", {})
    check("continue_compiled_script" in wrong, f"the wrong-call error does not name the right call:\n{wrong}")
    status = await call(session, "status", {})
    check("test:random[1]" in status, f"`status` does not show the llm step `test:random[1]`:\n{status}")
    check("continue_compiled_script" in status, f"`status` does not show the llm step pending:\n{status}")
    check("guess" in status, f"`status` does not show the pending step's output `guess`:\n{status}")
    print("ok: finish_nl_script while an llm step is pending is an error; the step stays pending")

    reply = await call(session, "continue_compiled_script", {"outputs": {"guess": 50}})
    check("verdict" in reply, f"the reply does not show the function step `verdict`:\n{reply}")
    check("continue_compiled_script" in reply, f"the reply does not name the next call:\n{reply}")
    print("ok: continue with the guess runs `verdict` and pends the last llm step")

    reply = await call(session, "continue_compiled_script", {"outputs": {}})
    check("complete" in reply.lower(), f"the last reply does not say the script completed:\n{reply}")
    print("ok: continue with {} ends the run")

    # Nothing is pending any more: a continue is now a wrong call.
    await call_error(session, "continue_compiled_script", {"outputs": {}})
    print("ok: continue with nothing pending is an error")


async def exercise(session: ClientSession) -> None:
    """Everything, on one session: the same for both transports."""
    await check_server(session)
    await check_listings_and_errors(session)
    await drive_slow(session)
    await drive_random(session)


async def check_listings_and_errors(session: ClientSession) -> None:
    """Prompts, list_scripts, an unknown script name, an unknown tool."""
    prompts = {prompt.name: prompt for prompt in (await session.list_prompts()).prompts}
    check("slow" in prompts, f"the project's NL script `slow` is not a prompt; prompts: {sorted(prompts)}")
    argument_names = [argument.name for argument in prompts["slow"].arguments or []]
    check("arguments" in argument_names, f"prompt `slow` has no `arguments` argument: {argument_names}")
    # The bundled demos are never listed as prompts, and can still be had by name.
    name = "test:imagine-object"
    check(name not in prompts, f"the bundled demo `{name}` is listed as a prompt: {sorted(prompts)}")
    marker = " shaped like a teapot (marker 7f3a)"
    got = await session.get_prompt(name, {"arguments": marker})
    texts = [message.content.text for message in got.messages if getattr(message.content, "type", None) == "text"]
    check(any(marker in text for text in texts), f"prompt `{name}` does not contain its arguments:\n{texts}")
    check(not any("$ARGUMENTS" in text for text in texts), f"prompt `{name}` still holds `$ARGUMENTS`:\n{texts}")
    print(f"ok: {len(prompts)} prompts; `{name}` substitutes its arguments")

    listing = await call(session, "list_scripts", {})
    check("slow" in listing and "compile" in listing, f"`list_scripts` misses a script:\n{listing}")
    check("test:random" not in listing, f"`list_scripts` lists the bundled demos unasked:\n{listing}")
    listing = await call(session, "list_scripts", {"all": True})
    for script in ("test:random", "test:nested", "slow"):
        check(script in listing, f"`list_scripts` with `all` does not list `{script}`:\n{listing}")
    check("Guess a random number" in listing, f"`list_scripts` does not show descriptions:\n{listing}")
    print("ok: list_scripts lists bundled and project scripts with descriptions, the demos with `all`")

    wrong = await call_error(session, "start", {"name": "test/randm"})
    check(re.search(r"test[:/]random", wrong) is not None, f"the unknown-name error names no close script:\n{wrong}")
    print("ok: start of an unknown name is an error naming `test:random`")

    try:
        result = await session.call_tool("no_such_tool", {})
    except MCPError as error:
        # JSON-RPC's "invalid params", which the MCP spec names for an unknown tool.
        check(error.code == -32602, f"the unknown-tool error has code {error.code}, expected -32602")
        check("no_such_tool" in error.message, f"the unknown-tool error does not name the tool: {error.message}")
        print(f"ok: an unknown tool is a JSON-RPC error {error.code}: {error.message}")
    else:
        text = text_of(result)
        check(result.is_error, f"calling an unknown tool succeeded:\n{text}")
        check("no_such_tool" in text, f"the unknown-tool error does not name the tool:\n{text}")
        print("ok: an unknown tool is an isError result")
    await call(session, "status", {})
    print("ok: the server still serves after the unknown tool")


async def drive_slow(session: ClientSession) -> None:
    """A `start` with a progress token: the slow auto step reports progress as it runs."""
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    reply = await call(session, "start", {"name": "slow"}, progress_callback=on_progress)
    for i in (1, 2, 3):
        check(f"line {i}" in reply, f"the `slow` reply does not show `line {i}`:\n{reply}")
    check("continue_compiled_script" in reply, f"the `slow` reply does not name the next call:\n{reply}")
    check(progress != [], "no progress notifications arrived for a `start` with a progress token")
    values = [value for value, _, _ in progress]
    check(
        all(a < b for a, b in zip(values, values[1:])),
        f"progress values do not increase: {values}",
    )
    messages = [message or "" for _, _, message in progress]
    check(
        any(re.search(r"line [123]", message) for message in messages),
        f"no progress message shows an output line: {messages}",
    )
    print(f"ok: {len(progress)} progress notifications for `slow`: {messages}")
    reply = await call(session, "continue_compiled_script", {"outputs": {}})
    check("complete" in reply.lower(), f"the last `slow` reply does not say the script completed:\n{reply}")


def server_env() -> dict[str, str]:
    return dict(os.environ)


async def part_stdio(binary: str, project: Path) -> None:
    params = StdioServerParameters(command=binary, args=["mcp"], cwd=str(project), env=server_env())
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=60) as session:
            await exercise(session)


class HttpServer:
    """`mekara mcp --http 127.0.0.1:0`, with its stderr read on a thread for the URL line."""

    def __init__(self, binary: str, project: Path) -> None:
        self.process = subprocess.Popen(
            [binary, "mcp", "--http", "127.0.0.1:0"],
            cwd=project,
            env=server_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr: list[str] = []
        self.url: str | None = None
        self.ready = threading.Event()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)
            found = re.search(r"mekara mcp: listening on (http://127\.0\.0\.1:\d+/mcp)", line)
            if found and self.url is None:
                self.url = found.group(1)
                self.ready.set()
        self.ready.set()

    def wait_url(self) -> str:
        self.ready.wait(timeout=30)
        check(
            self.url is not None,
            "`mekara mcp --http 127.0.0.1:0` printed no `listening on` line; stderr:\n" + "".join(self.stderr),
        )
        return self.url

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        # stdout is not the protocol here: nothing should be written to it.
        assert self.process.stdout is not None
        out = self.process.stdout.read()
        check(out == "", f"`mekara mcp --http` wrote to stdout: {out!r}")


async def part_http(binary: str, project: Path) -> None:
    server = HttpServer(binary, project)
    try:
        url = server.wait_url()
        print(f"ok: HTTP server listening on {url}")
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=60) as session:
                await exercise(session)
    finally:
        server.stop()


def first_failure(error: BaseException) -> Failure | None:
    """The `Failure` inside `error`, which task groups may have wrapped in exception groups."""
    if isinstance(error, Failure):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = first_failure(inner)
            if found is not None:
                return found
    return None


async def main(binary: str, project: Path) -> None:
    (project / ".mekara/scripts/nl").mkdir(parents=True, exist_ok=True)
    (project / ".mekara/scripts/compiled").mkdir(parents=True, exist_ok=True)
    (project / ".mekara/scripts/nl/slow.md").write_text(SLOW_NL)
    (project / ".mekara/scripts/compiled/slow.star").write_text(SLOW_STAR)

    for name, part in (("stdio", part_stdio), ("streamable HTTP", part_http)):
        print(f"== {name}")
        with anyio.fail_after(PART_TIMEOUT_SECONDS):
            await part(binary, project)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: drive_mekara.py MEKARA_BINARY PROJECT_DIR")
    binary, project = os.path.abspath(sys.argv[1]), Path(sys.argv[2]).resolve()
    check_dir = project / ".mekara"
    if not check_dir.is_dir():
        sys.exit(f"FAIL: {check_dir} is not a folder")
    try:
        anyio.run(main, binary, project)
    except BaseException as error:  # noqa: BLE001 - a check inside a task group arrives wrapped
        failure = first_failure(error)
        if failure is None:
            raise
        print(f"FAIL: {failure}", file=sys.stderr)
        sys.exit(1)
    print("python mcp client: all checks passed")
