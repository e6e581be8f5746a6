"""A stdio MCP server with one read-only tool, `emit`, whose structured content is the JSON
text given as the first argument (or held by the file named after `@`, for text too long
for a command line), sent as written (no SDK can send `1e400`: it would parse the number
first). Standard library only; the tests run it to feed mekara hostile values.
"""

import json
import sys

RAW = open(sys.argv[1][1:]).read() if sys.argv[1].startswith("@") else sys.argv[1]


def send(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    if not line.strip():
        continue
    message = json.loads(line)
    if "id" not in message:
        continue
    id_ = json.dumps(message["id"])
    method = message.get("method")
    if method == "initialize":
        version = message["params"]["protocolVersion"]
        send(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw-structured", "version": "0"},
        }}))
    elif method == "tools/list":
        send(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [{
            "name": "emit",
            "description": "Returns the structured content it was started with",
            "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": True},
        }]}}))
    elif method == "tools/call":
        send('{"jsonrpc": "2.0", "id": %s, "result": {"content": [{"type": "text", '
             '"text": "emitted"}], "structuredContent": %s}}' % (id_, RAW))
    else:
        send(json.dumps({"jsonrpc": "2.0", "id": message["id"],
                         "error": {"code": -32601, "message": "no such method"}}))
