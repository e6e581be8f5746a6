"""A Python MCP echo server (the official SDK's `MCPServer`, formerly FastMCP), measured by
benches/serve.rs beside `mekara serve`. Runs with the test virtualenv's Python
(`bash tests/python/install.sh`)."""

from mcp.server.mcpserver import MCPServer

app = MCPServer("echo")


@app.tool()
def echo(message: str) -> str:
    """Echo the message back."""
    return f"Echo: {message}"


if __name__ == "__main__":
    app.run()
