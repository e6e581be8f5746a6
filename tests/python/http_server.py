"""A Streamable HTTP MCP server made with the official Python SDK (`MCPServer` under uvicorn),
for the tests of mekara's MCP client (tests/it/mcp_client.rs): requests in origin form, HTTPS,
and which calls are retried.

Usage: python http_server.py PORT STATE_DIR [CERT KEY]
  With CERT and KEY (PEM files) it serves HTTPS. It serves at /mcp on 127.0.0.1:PORT.

Tools (each call of `note` and `lookup` appends a line to STATE_DIR/calls):
  add(a, b)     read-only: the sum
  note(text)    may write: the first call ever (STATE_DIR/note-hung absent) never answers
  lookup(key)   read-only: the first call ever (STATE_DIR/lookup-hung absent) never answers
"""

import sys
from pathlib import Path

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

port = int(sys.argv[1])
state = Path(sys.argv[2])
tls = sys.argv[3:5]

server = MCPServer("python-sdk-test")


def record(line: str) -> None:
    with open(state / "calls", "a") as calls:
        calls.write(line + "\n")


async def hang_the_first_time(name: str) -> None:
    marker = state / f"{name}-hung"
    if not marker.exists():
        marker.write_text("hung once\n")
        await anyio.sleep(3600)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def add(a: int, b: int) -> str:
    """Adds two numbers."""
    return str(a + b)


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, idempotentHint=False))
async def note(text: str) -> str:
    """Writes a note."""
    record(f"note {text}")
    await hang_the_first_time("note")
    return f"noted {text}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def lookup(key: str) -> str:
    """Looks a key up."""
    record(f"lookup {key}")
    await hang_the_first_time("lookup")
    return f"value of {key}"


app = server.streamable_http_app()
ssl = {"ssl_certfile": tls[0], "ssl_keyfile": tls[1]} if len(tls) == 2 else {}
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", **ssl)
