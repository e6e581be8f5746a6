"""A stdio MCP server with one read-only tool, `emit`, whose structured content is the JSON
text given as the first argument (or held by the file named after `@`, for text too long
for a command line), sent as written (no SDK can send `1e400`: it would parse the number
first). Standard library only; the tests run it to feed mekara hostile values.

With `--http` as the second argument it answers over HTTP instead (streamable HTTP, each
answer a JSON body; with `--http-events`, each an event stream of one event), on a free
port of 127.0.0.1 that it prints as its first line.
"""

import json
import sys

RAW = open(sys.argv[1][1:]).read() if sys.argv[1].startswith("@") else sys.argv[1]


def send(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def answer(message):
    """The answer to `message` as JSON text, or None for a notification."""
    if "id" not in message:
        return None
    id_ = json.dumps(message["id"])
    method = message.get("method")
    if method == "initialize":
        version = message["params"]["protocolVersion"]
        return (json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw-structured", "version": "0"},
        }}))
    elif method == "tools/list":
        return (json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [{
            "name": "emit",
            "description": "Returns the structured content it was started with",
            "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": True},
        }]}}))
    elif method == "tools/call":
        return ('{"jsonrpc": "2.0", "id": %s, "result": {"content": [{"type": "text", '
             '"text": "emitted"}], "structuredContent": %s}}' % (id_, RAW))
    else:
        return (json.dumps({"jsonrpc": "2.0", "id": message["id"],
                         "error": {"code": -32601, "message": "no such method"}}))


if sys.argv[2:3] in (["--http"], ["--http-events"]):
    EVENTS = sys.argv[2] == "--http-events"
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            text = answer(json.loads(body))
            if text is None:
                self.send_response(202)
                self.end_headers()
                return
            data = (f"event: message\ndata: {text}\n\n" if EVENTS else text).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream" if EVENTS else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.send_response(405)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    send(str(server.server_address[1]))
    server.serve_forever()
else:
    for line in sys.stdin:
        if line.strip():
            text = answer(json.loads(line))
            if text is not None:
                send(text)
