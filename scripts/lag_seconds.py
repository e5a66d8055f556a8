#!/usr/bin/env python3
"""Poller-only lag seconds against the truth, side by side with klag-exporter.

A tansu broker (memory engine, one record a batch: its high watermark is then
exact, and its SQLite engine fails the ListGroups klag-exporter sends), a producer of
bursty traffic (stretches of 10 to 60 s, each idle, trickling at 1 record a
second, steady at 30 a second or bursting at 200 a second, over PARTITIONS
partitions), and a real confluent-kafka consumer in group `lagging` that
processes each record 20 s after it was written, at most 80 a second (so it
falls further behind in bursts and catches up when the producer rests), commits
every second, and is stuck for a quarter of its stretches of 10 to 60 s (lag
seconds then grow a second a second). Nobody is instrumented: every
answer comes from polling the broker every 10 s.

Polling it, side by side, all on the same broker:
  - `streamsight serve` on defaults (poll every 10 s, lagging groups refreshed
    every 1 s between polls);
  - `streamsight serve` with `lagging_refresh = "0s"` (the poll alone);
  - klag-exporter in "message" mode (reads the record at the committed offset);
  - klag-exporter in its default "rate" mode.

Every second each is asked for the group's lag seconds per partition and
compared with the truth at that moment: the age of the record at the group's
committed offset (its CreateTime, as both tools read it), or 0 when the group
has read everything produced. The first --warmup seconds are not judged.

    scripts/lag_seconds.py --minutes 10
    scripts/lag_seconds.py --minutes 3 --check   # exit 1 when streamsight's mean error is over 1 s

Needs the venv scripts/test installs (confluent-kafka), tansu
(STREAMSIGHT_TANSU, else .tools/tansu/bin/tansu), a release build of
streamsight, and klag-exporter (`cargo install klag-exporter --locked --root
.tools/klag-exporter`, or --klag PATH).
"""

import argparse
import bisect
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPIC, GROUP = "events", "lagging"
PARTITIONS = 2
CONSUME_PER_S = 80
# The group processes each record this long after it was written (a consumer
# that is behind), and is stuck (reads and commits nothing) for a STALLED
# share of its stretches of 10 to 60 s.
BEHIND_S = 20
STALLED = 0.25
# (weight, records a second): idle, trickle, steady, burst.
STRETCHES = [(0.3, 0), (0.2, 1), (0.3, 30), (0.2, 200)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, deadline_s=30):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on {port} after {deadline_s} s")


def now_ms():
    return time.time() * 1000.0


class Truth:
    """What was produced (offset -> CreateTime, per partition) and committed
    (when, per partition), as the clients saw it: thread-safe."""

    def __init__(self):
        self.lock = threading.Lock()
        self.produced = [{} for _ in range(PARTITIONS)]
        # Per partition, offsets acknowledged in order and when (ends over time).
        self.ends = [([], []) for _ in range(PARTITIONS)]
        self.commits = [([], []) for _ in range(PARTITIONS)]

    def delivered(self, partition, offset, ts):
        with self.lock:
            self.produced[partition][offset] = ts
            at, end = self.ends[partition]
            if not end or offset + 1 > end[-1]:
                at.append(now_ms())
                end.append(offset + 1)

    def committed(self, partition, offset, at):
        with self.lock:
            ats, offs = self.commits[partition]
            ats.append(at)
            offs.append(offset)

    def lag_seconds(self, partition, at):
        """The true lag seconds of the group on `partition` at `at`, or None
        before its first commit."""
        with self.lock:
            ats, offs = self.commits[partition]
            i = bisect.bisect_right(ats, at) - 1
            if i < 0:
                return None
            committed = offs[i]
            eats, ends = self.ends[partition]
            j = bisect.bisect_right(eats, at) - 1
            end = ends[j] if j >= 0 else 0
            if committed >= end:
                return 0.0
            ts = self.produced[partition].get(committed)
            if ts is None:
                return None
            return max(0.0, (at - ts) / 1000.0)


def produce(bootstrap, truth, stop, seed):
    rng = random.Random(seed)
    # One record a batch: tansu's memory engine answers a high watermark of the
    # last batch's base offset + 1.
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1, "acks": "all"})

    def report(err, msg):
        if err is None:
            truth.delivered(msg.partition(), msg.offset(), msg.timestamp()[1])

    while not stop.is_set():
        pick = rng.random()
        for weight, rate in STRETCHES:
            pick -= weight
            if pick <= 0:
                break
        stretch_ends = time.monotonic() + rng.uniform(10, 60)
        while time.monotonic() < stretch_ends and not stop.is_set():
            if rate == 0:
                stop.wait(0.1)
                producer.poll(0)
                continue
            producer.produce(TOPIC, value=b"x" * 100, partition=rng.randrange(PARTITIONS), on_delivery=report)
            producer.poll(0)
            stop.wait(1.0 / rate)
    producer.flush(30)


def consume(bootstrap, truth, stop, seed):
    rng = random.Random(seed + 1)
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
    })
    consumer.subscribe([TOPIC])
    position = {}
    last_commit = time.monotonic()
    next_read = time.monotonic()
    stretch_ends, stalled = 0.0, False
    while not stop.is_set():
        if time.monotonic() >= stretch_ends:
            stalled = rng.random() < STALLED
            stretch_ends = time.monotonic() + rng.uniform(10, 60)
        if stalled:
            # Stuck on a record: no reading, no commit.
            stop.wait(0.1)
            continue
        wait = next_read - time.monotonic()
        if wait > 0:
            stop.wait(wait)
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            # Processed BEHIND_S after it was written, at most CONSUME_PER_S a second.
            due = msg.timestamp()[1] / 1000.0 + BEHIND_S - time.time()
            if due > 0:
                stop.wait(due)
            position[msg.partition()] = msg.offset() + 1
            next_read = max(next_read + 1.0 / CONSUME_PER_S, time.monotonic() - 1)
        if time.monotonic() - last_commit >= 1.0 and position:
            offsets = [TopicPartition(TOPIC, p, o) for p, o in position.items()]
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
                at = now_ms()
                for p, o in position.items():
                    truth.committed(p, o, at)
            except Exception as e:  # a failed commit is not the truth
                print(f"lag_seconds: commit failed: {e}", flush=True)
            last_commit = time.monotonic()
    consumer.close()


def start_streamsight(args, work, bootstrap, name, refresh, children):
    config = os.path.join(work, f"{name}.toml")
    with open(config, "w") as f:
        f.write(f'''[[serve.clusters]]
name = "bench"
bootstrap = ["{bootstrap}"]
poll_interval = "{args.poll}s"
lagging_refresh = "{refresh}"
''')
    proc = subprocess.Popen(
        [args.binary, "serve", "--intake-listen", "127.0.0.1:0", "--api-listen", "127.0.0.1:0",
         "--otlp-listen", "127.0.0.1:0", "--storage", "memory://", "--config", config],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, "STREAMSIGHT_LOG": "warn"})
    children.append(proc)
    line = proc.stdout.readline()
    m = re.search(r"api=(\S+)", line)
    if not m:
        sys.exit(f"streamsight ({name}) did not start: {line!r}")
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
    api = m.group(1)

    def ask():
        with urllib.request.urlopen(f"{api}/api/v1/lag?group={GROUP}", timeout=5) as r:
            rows = json.load(r)["rows"]
        return {row["partition"]: row["lag_seconds"] for row in rows if row["topic"] == TOPIC}
    return ask


def start_klag(args, work, bootstrap, mode, children):
    port = free_port()
    config = os.path.join(work, f"klag-{mode}.toml")
    with open(config, "w") as f:
        f.write(f'''[exporter]
poll_interval = "{args.poll}s"
http_port = {port}
http_host = "127.0.0.1"
granularity = "partition"

[exporter.timestamp_sampling]
enabled = true
mode = "{mode}"

[[clusters]]
name = "bench"
bootstrap_servers = "{bootstrap}"
group_whitelist = ["^{GROUP}$"]
topic_whitelist = ["^{TOPIC}$"]
''')
    children.append(subprocess.Popen([args.klag, "--config", config, "--log-level", "warn"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    wait_listening(port)
    sample = re.compile(r'^kafka_consumergroup_group_lag_seconds\{([^}]*)\} (\S+)$')

    def ask():
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            m = sample.match(line)
            if not m:
                continue
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            if labels.get("group") == GROUP and labels.get("topic") == TOPIC and "partition" in labels:
                out[int(labels["partition"])] = float(m.group(2))
        return out
    return ask


def summary(errors, missing):
    if not errors:
        return {"answers": 0, "missing": missing}
    errors = sorted(errors)
    return {
        "answers": len(errors),
        "missing": missing,
        "mean": statistics.fmean(errors),
        "p99": errors[min(len(errors) - 1, int(len(errors) * 0.99))],
        "max": errors[-1],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=60, help="seconds not judged at the start")
    ap.add_argument("--poll", type=int, default=10, help="every tool's poll interval, seconds")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--binary", default=os.path.join(ROOT, "target/release/streamsight"))
    ap.add_argument("--tansu", default=os.environ.get("STREAMSIGHT_TANSU",
                                                      os.path.join(ROOT, ".tools/tansu/bin/tansu")))
    ap.add_argument("--klag", default=os.path.join(ROOT, ".tools/klag-exporter/bin/klag-exporter"))
    ap.add_argument("--out", default=os.path.join(ROOT, "target/lag_seconds.json"))
    ap.add_argument("--check", action="store_true", help="exit 1 when streamsight's mean error is over 1 s")
    args = ap.parse_args()
    for path, what in [(args.binary, "--binary"), (args.tansu, "--tansu"), (args.klag, "--klag")]:
        if not os.access(path, os.X_OK):
            sys.exit(f"{what} {path}: not an executable (build or install it, or pass the path)")
    if args.warmup >= args.minutes * 60:
        sys.exit(f"--warmup ({args.warmup:g} s) must be shorter than the run ({args.minutes:g} min)")
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda n, _: sys.exit(128 + n))
    work = tempfile.mkdtemp(prefix="streamsight-lag-seconds-")
    children = []
    stop = threading.Event()
    try:
        return run(args, work, children, stop)
    finally:
        stop.set()
        for c in children:
            c.kill()
            c.wait()
        shutil.rmtree(work, ignore_errors=True)


def run(args, work, children, stop):
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    children.append(subprocess.Popen(
        [args.tansu, "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/"], cwd=work,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    wait_listening(port)
    bootstrap = f"127.0.0.1:{port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
        f.result(30)

    truth = Truth()
    threads = [threading.Thread(target=produce, args=(bootstrap, truth, stop, args.seed), daemon=True),
               threading.Thread(target=consume, args=(bootstrap, truth, stop, args.seed), daemon=True)]
    for t in threads:
        t.start()
    tools = {
        "streamsight (refresh 1 s)": start_streamsight(args, work, bootstrap, "refresh", "1s", children),
        "streamsight (poll only)": start_streamsight(args, work, bootstrap, "poll", "0s", children),
        "klag-exporter (message)": start_klag(args, work, bootstrap, "message", children),
        "klag-exporter (rate)": start_klag(args, work, bootstrap, "rate", children),
    }
    print(f"lag_seconds: tansu on {bootstrap}; {args.minutes:g} min, every tool polling every {args.poll} s",
          flush=True)
    errors = {name: [] for name in tools}
    missing = {name: 0 for name in tools}
    worst = {name: [] for name in tools}
    started = time.monotonic()
    ends = started + args.minutes * 60
    next_at = started
    while time.monotonic() < ends:
        next_at += 1
        stop.wait(max(0, next_at - time.monotonic()))
        judged = time.monotonic() - started >= args.warmup
        for name, ask in tools.items():
            try:
                answers = ask()
            except Exception:
                answers = {}
            at = now_ms()
            for p in range(PARTITIONS):
                true = truth.lag_seconds(p, at)
                if true is None or not judged:
                    continue
                said = answers.get(p)
                if said is None:
                    missing[name] += 1
                else:
                    errors[name].append(abs(said - true))
                    worst[name].append((abs(said - true), round(time.monotonic() - started, 1), p, true, said))
                    worst[name] = sorted(worst[name], reverse=True)[:10]
    results = {name: {**summary(errors[name], missing[name]),
                      "worst (error, s into the run, partition, truth, answer)": worst[name]} for name in tools}
    with open(args.out, "w") as f:
        json.dump({"args": vars(args), "results": results}, f, indent=2)
    print(f"{'tool':<28} {'answers':>8} {'missing':>8} {'mean error':>11} {'p99':>8} {'max':>8}")
    for name, r in results.items():
        if r["answers"]:
            print(f"{name:<28} {r['answers']:>8} {r['missing']:>8} {r['mean']:>10.2f}s {r['p99']:>7.1f}s "
                  f"{r['max']:>7.1f}s")
        else:
            print(f"{name:<28} {0:>8} {r['missing']:>8}")
    ours = results["streamsight (refresh 1 s)"]
    if args.check and (not ours["answers"] or ours["mean"] > 1.0):
        print("lag_seconds: streamsight's mean error is over 1 s", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
