#!/usr/bin/env python3
"""Writes the golden scenario (reference.md section 2) twice.

golden-correct.jsonl: what an honest client reports. golden-buggy.jsonl: the same
pipeline as dd-trace-java 1.8.0-1.67.1 reports it, every fact a raw Data Streams
backlog and every failed send a kafka_produce backlog of -1, on the real partition
and on partition -1. Both must replay to the same lag.

Run from this folder: python3 generate_golden.py
"""
import json

TOPIC, GROUP = "orders", "billing"


def line(at, **event):
    return json.dumps({"at": round(at, 3), **event}, separators=(",", ":"))


def timeline():
    """(at, kind, fields) in time order."""
    out = []
    # Offsets 0..=1000 at 10 records/s: offset 500 at t=50, 1000 at t=100.
    for o in range(0, 1001):
        out.append((o / 10, 0, "produce", {"offset": o}))
    # The group follows the producer to 500, then stays there, committing every 5 s.
    for t in range(0, 301, 5):
        out.append((float(t), 2, "commit", {"offset": min(t * 10, 500)}))
    # Sends fail from t=110 to t=209, then the producer recovers at t=210.
    for t in range(110, 210):
        out.append((float(t), 1, "failed", {"partition": 0 if t % 2 == 0 else -1}))
    for i, o in enumerate(range(1001, 1101)):
        out.append((210 + i / 10, 0, "produce", {"offset": o}))
    out.sort(key=lambda e: (e[0], e[1]))
    return out


def correct(at, kind, f):
    if kind == "produce":
        return line(at, event="produce", topic=TOPIC, partition=0, offset=f["offset"])
    if kind == "commit":
        return line(at, event="commit", group=GROUP, topic=TOPIC, partition=0, offset=f["offset"])
    return line(at, event="produce_failed", topic=TOPIC, partition=f["partition"], offset=-1,
                error="MSG_SIZE_TOO_LARGE")


def buggy(at, kind, f):
    if kind == "produce":
        tags = ["type:kafka_produce", f"topic:{TOPIC}", "partition:0"]
        return line(at, event="backlog", tags=tags, value=f["offset"])
    if kind == "commit":
        tags = ["type:kafka_commit", f"consumer_group:{GROUP}", f"topic:{TOPIC}", "partition:0"]
        return line(at, event="backlog", tags=tags, value=f["offset"])
    tags = ["type:kafka_produce", f"topic:{TOPIC}", f"partition:{f['partition']}"]
    return line(at, event="backlog", tags=tags, value=-1)


for name, render in (("golden-correct.jsonl", correct), ("golden-buggy.jsonl", buggy)):
    with open(name, "w") as f:
        for at, _, kind, fields in timeline():
            f.write(render(at, kind, fields) + "\n")
