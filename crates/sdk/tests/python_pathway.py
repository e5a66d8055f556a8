"""Prints, as JSON, what the real ddtrace computes for a few pathway checkpoints,
so that tests/ddtrace_compat.rs can compare streamsight's hashes and headers."""
import json
import sys

from ddtrace.internal.datastreams.processor import DataStreamsCtx, DataStreamsProcessor

processor = DataStreamsProcessor("http://127.0.0.1:1")
cases = json.loads(sys.argv[1])
out = []
for case in cases:
    ctx = DataStreamsCtx(processor, case["parent"], case["pathway_start_ms"] / 1e3, case["edge_start_ms"] / 1e3)
    ctx.service, ctx.env = case["service"], case["env"]
    out.append({"hash": ctx._compute_hash(sorted(case["tags"]), case["parent"]), "header": ctx.encode_b64()})
print(json.dumps(out))
processor.stop() if hasattr(processor, "stop") else None
