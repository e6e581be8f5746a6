"""An OTLP/HTTP trace receiver for tests/it/otel.rs.

Decodes each `POST /v1/traces` (protobuf, or OTLP JSON) into the official
`ExportTraceServiceRequest` of the `opentelemetry-proto` package, as a collector does, and
appends one JSON line per span to `DIR/spans.jsonl` and every request's raw body to
`DIR/raw.bin`. Prints its port on the first line of stdout once it listens.

Usage: receiver.py DIR
"""

import base64
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

OUT = sys.argv[1]


def value(v):
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    got = getattr(v, kind)
    if kind == "array_value":
        return [value(x) for x in got.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in got.values}
    if kind == "bytes_value":
        return got.hex()
    return got


def attributes(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


def hex_ids_to_base64(node):
    """OTLP JSON writes ids in hex; protobuf's JSON mapping wants base64."""
    if isinstance(node, dict):
        for key, v in node.items():
            if key in ("traceId", "spanId", "parentSpanId") and isinstance(v, str):
                node[key] = base64.b64encode(bytes.fromhex(v)).decode()
            else:
                hex_ids_to_base64(v)
    elif isinstance(node, list):
        for v in node:
            hex_ids_to_base64(v)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with open(os.path.join(OUT, "raw.bin"), "ab") as raw:
            raw.write(body)
        request = ExportTraceServiceRequest()
        json_body = self.headers.get("Content-Type", "").startswith("application/json")
        if json_body:
            parsed = json.loads(body)
            hex_ids_to_base64(parsed)
            json_format.ParseDict(parsed, request)
        else:
            request.ParseFromString(body)
        lines = []
        for rs in request.resource_spans:
            resource = attributes(rs.resource.attributes)
            for ss in rs.scope_spans:
                for span in ss.spans:
                    lines.append(json.dumps({
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "name": span.name,
                        "kind": span.kind,
                        "start_ns": span.start_time_unix_nano,
                        "end_ns": span.end_time_unix_nano,
                        "attributes": attributes(span.attributes),
                        "status": {"code": span.status.code, "message": span.status.message},
                        "events": [
                            {"name": e.name, "attributes": attributes(e.attributes)}
                            for e in span.events
                        ],
                        "resource": resource,
                        "content_type": "json" if json_body else "protobuf",
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                    }))
        with open(os.path.join(OUT, "spans.jsonl"), "a") as out:
            for line in lines:
                out.write(line + "\n")
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
