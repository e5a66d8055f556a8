#!/usr/bin/env python3
"""The soak: `streamsight serve` for --minutes under a realistic mix, sampled
every minute (RSS read every 5 s and its median kept, CPU, p99 intake and API
latency, errors logged), with a PNG plot of each and the goals checked after a
warm-up.

The mix: Data Streams payloads from --services services (each flushing every
10 s, as tracers do), OTLP/HTTP spans and logs (JSON) every second, a tansu
broker with --groups consumer groups polled every 10 s while a producer writes
(40 records a second, a batch a partition every 10 s) and the groups commit, a DLQ monitor on a topic that receives dead letters, an
end-to-end probe, the default alert rules, and a dashboard that refreshes its
pages every 5 s. The broker and its traffic run at niceness 19 (--broker-nice):
they stand in for a cluster on other hosts, and the collector, not they,
should have the machine's turns when both want one.

Goals (issue 28), judged after --warmup minutes: RSS growth <= 5 % an hour (a
least-squares slope over the minutes' medians), p99 intake and API latency within 20 %
of their first value (the median of the last three minutes against the first
three), no error logged. Every run also requires: the collector alive at the
end, every request answered 2xx. With --check a missed goal exits 1; the hard
requirements always do.

    scripts/soak.py --minutes 60 --binary target/release/streamsight
    scripts/soak.py --minutes 3 --warmup 1                # the CI form (crates/cli/tests/soak.rs)
    scripts/soak.py --minutes 20 --hog 2                   # beside two busy processes

Every alert notification is received (a webhook) and kept in soak.json. For
each `produce_rate_drop` that fired, the report gives the longest gap between
the generator's own sends to that topic in the five minutes before: a gap
far beyond the topic's usual period (10 s for a service's Data Streams
payloads and the broker's traffic) means the generator itself fell
silent, and the drop was real; otherwise it is a misreading to look into.

Needs the venv scripts/test installs (confluent-kafka, msgpack, matplotlib) and
Apache Kafka (`scripts/kafka install`), or with --broker tansu, tansu
(STREAMSIGHT_TANSU, else .tools/tansu/bin/tansu).
"""

import argparse
import gzip
import http.client
import http.server
import json
import multiprocessing
import os
import queue
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
import urllib.parse

import msgpack
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPIC, DLQ, PROBE = "orders", "orders.dlq", "streamsight-probe"
PARTITIONS = 8
# How often RSS is read; a minute's record is the median of its readings.
RSS_EVERY_S = 5.0


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


class Latencies:
    """Request latencies and answers since the last take(), thread-safe."""

    def __init__(self):
        self.lock = threading.Lock()
        self.by_path = {}
        self.bad = []

    def record(self, ms, status, what):
        with self.lock:
            self.by_path.setdefault(what.split("?")[0], []).append(ms)
            if not 200 <= status < 300:
                self.bad.append(f"{what}: {status}")

    def take(self):
        """Since the last call: every latency (ms), the answers not 2xx, and the
        p99 of each request line."""
        with self.lock:
            by_path, bad = self.by_path, self.bad
            self.by_path, self.bad = {}, []
        ms = [v for vs in by_path.values() for v in vs]
        return ms, bad, {k: round(p99(v), 2) for k, v in sorted(by_path.items())}


def p99(ms):
    if not ms:
        return None
    ms = sorted(ms)
    return ms[min(len(ms) - 1, int(len(ms) * 0.99))]


# The collector's own timings (streamsight_node::timings): where a write's time
# goes, by stage, by applying service, and the waits for the engine's lock.
TIMINGS = {"streamsight_intake_stage_seconds": "stage", "streamsight_apply_seconds": "service",
           "streamsight_engine_lock_wait_seconds": "by", "streamsight_request_seconds": "listener"}
BUCKET = re.compile(r'^(\w+)_bucket\{(\w+)="([^"]+)",le="([^"]+)"\} (\S+)$')


def histograms(metrics):
    """The timing histograms in a scrape: {(family, label value): [(le, cumulative count)]}."""
    out = {}
    for line in metrics.splitlines():
        m = BUCKET.match(line)
        if m and TIMINGS.get(m.group(1)) == m.group(2):
            le = float("inf") if m.group(4) == "+Inf" else float(m.group(4))
            out.setdefault((m.group(1), m.group(3)), []).append((le, float(m.group(5))))
    return out


def quantile_ms(q, buckets):
    """Prometheus' histogram_quantile over cumulative buckets (linear within
    the bucket; the last finite bound when past every bound), in ms."""
    total = buckets[-1][1] if buckets else 0
    if total <= 0:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for le, n in buckets:
        if n >= rank:
            if le == float("inf"):
                return round(lower * 1000, 2)
            return round((lower + (le - lower) * (rank - below) / max(n - below, 1e-9)) * 1000, 2)
        lower, below = le, n
    return round(lower * 1000, 2)


def timings_p99(now, last):
    """Each timing's p99 (ms) and count over the minute between two scrapes."""
    out = {}
    for (family, label), buckets in sorted(now.items()):
        before = dict(last.get((family, label), []))
        delta = [(le, n - before.get(le, 0.0)) for le, n in buckets]
        name = family.removeprefix("streamsight_").removesuffix("_seconds")
        out.setdefault(name, {})[label] = {"p99_ms": quantile_ms(0.99, delta), "n": int(delta[-1][1])}
    return out


def broker_traffic(bootstrap, groups, produced, sends, stop, niceness):
    """The broker's traffic until `stop`: 40 records a second to the topic and
    a dead letter a second, each sent as one batch a partition every 10 s, and
    a tenth of the groups committing each second, a little behind the end.
    Each send's time goes to `sends` as (topic, unix seconds).

    A batch every 10 s, not every second (kept so on Apache Kafka, for runs
    to compare): tansu's memory engine keeps each
    batch as an object and lists every one of a partition's on each ListOffsets
    and Fetch, so its CPU grows with the batches it holds. A batch a second
    took it from 4 % of a core to 35 % in 25 minutes, taking the collector's
    CPU as it grew (RELIABILITY.md). A commit replaces the group's object: the
    broker's cost of commits does not grow."""
    os.nice(niceness)
    traffic = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    next_batch = next_commit = time.monotonic()
    round_ = 0
    while not stop.is_set():
        now = time.monotonic()
        if now >= next_batch:
            for i in range(400):
                traffic.produce(TOPIC, value=b"order", partition=i % PARTITIONS)
            for p in range(PARTITIONS):
                produced[p] += 400 // PARTITIONS
            for _ in range(10):
                traffic.produce(DLQ, value=b"{}", headers={"streamsight.source.topic": TOPIC,
                                                           "streamsight.error.class": "ValueError"})
            traffic.flush(10)
            sends.put((TOPIC, time.time()))
            sends.put((DLQ, time.time()))
            next_batch += 10.0
        if now >= next_commit:
            for g in groups[round_ % 10::10]:
                offsets = [TopicPartition(TOPIC, p, max(0, end - random.randint(0, 300)))
                           for p, end in enumerate(produced)]
                for f in admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(g, offsets)]).values():
                    f.result(30)
            round_ += 1
            next_commit += 1.0
        stop.wait(max(0.0, min(next_batch, next_commit) - time.monotonic()))


class Ended:
    """A process among the children: stopped, then killed if it lingers."""

    def __init__(self, process, stop):
        self.process, self.stop = process, stop

    def kill(self):
        self.stop.set()
        self.process.join(15)
        if self.process.is_alive():
            self.process.kill()

    def wait(self):
        self.process.join()

    def poll(self):
        return None if self.process.is_alive() else self.process.exitcode


class Client:
    """One keep-alive connection; requests timed, answers recorded."""

    def __init__(self, base, latencies):
        u = urllib.parse.urlparse(base)
        self.host, self.port = u.hostname, u.port
        self.latencies = latencies
        self.conn = None

    def request(self, method, path, body=None, headers=None):
        started = time.monotonic()
        status = 0
        for attempt in range(2):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
                self.conn.request(method, path, body=body, headers=headers or {})
                r = self.conn.getresponse()
                r.read()
                status = r.status
                break
            except (OSError, http.client.HTTPException):
                # A kept-alive connection the server closed: once more, fresh.
                self.conn = None
                if attempt == 1:
                    status = 0
        self.latencies.record((time.monotonic() - started) * 1000, status, f"{method} {path}")
        return status


def dsm_payload(service, now_s, offset):
    start = int(now_s // 10 * 10) * 1_000_000_000
    backlogs = []
    topic = f"{service}-events"
    for p in range(4):
        backlogs.append({"Tags": ["type:kafka_produce", f"topic:{topic}", f"partition:{p}",
                                  "kafka_cluster_id:tracers"], "Value": offset + p})
        backlogs.append({"Tags": ["type:kafka_commit", f"consumer_group:{service}-consumer", f"topic:{topic}",
                                  f"partition:{p}", "kafka_cluster_id:tracers"], "Value": max(0, offset + p - 5)})
    payload = {"Env": "soak", "Service": service, "Lang": "python", "TracerVersion": "4.16.0",
               "Stats": [{"Start": start, "Duration": 10_000_000_000, "Stats": [], "Backlogs": backlogs}]}
    return gzip.compress(msgpack.packb(payload), compresslevel=1)


def spans_body(seq, n=25):
    spans = []
    for i in range(n):
        trace = f"{random.getrandbits(128):032x}"
        t0 = time.time_ns()
        common = [{"key": "messaging.system", "value": {"stringValue": "kafka"}},
                  {"key": "messaging.destination.name", "value": {"stringValue": TOPIC}},
                  {"key": "messaging.destination.partition.id", "value": {"stringValue": str(i % PARTITIONS)}},
                  {"key": "messaging.kafka.offset", "value": {"intValue": str(seq * n + i)}}]
        spans.append({"traceId": trace, "spanId": f"{random.getrandbits(64):016x}", "name": f"{TOPIC} publish",
                      "kind": 4, "startTimeUnixNano": str(t0), "endTimeUnixNano": str(t0 + 500_000),
                      "attributes": common + [{"key": "messaging.operation.type", "value": {"stringValue": "publish"}}]})
        spans.append({"traceId": trace, "spanId": f"{random.getrandbits(64):016x}", "name": f"{TOPIC} process",
                      "kind": 5, "startTimeUnixNano": str(t0 + 2_000_000), "endTimeUnixNano": str(t0 + 3_000_000),
                      "attributes": common + [
                          {"key": "messaging.consumer.group.name", "value": {"stringValue": "billing"}},
                          {"key": "messaging.operation.type", "value": {"stringValue": "process"}}]})
    return json.dumps({"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "checkout"}}]}, "scopeSpans": [{"spans": spans}]}]})


def logs_body(n=20):
    records = [{"timeUnixNano": str(time.time_ns()), "severityText": "INFO",
                "body": {"stringValue": "order handled"}, "traceId": f"{random.getrandbits(128):032x}",
                "spanId": f"{random.getrandbits(64):016x}"} for _ in range(n)]
    return json.dumps({"resourceLogs": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "billing"}}]}, "scopeLogs": [{"logRecords": records}]}]})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=10, help="minutes before the goals are judged")
    ap.add_argument("--binary", default=os.path.join(ROOT, "target/release/streamsight"))
    ap.add_argument("--broker", choices=("kafka", "tansu"), default="kafka",
                    help="the broker polled: Apache Kafka (scripts/kafka, by default) or tansu's memory engine")
    ap.add_argument("--tansu", default=os.environ.get("STREAMSIGHT_TANSU",
                                                      os.path.join(ROOT, ".tools/tansu/bin/tansu")))
    ap.add_argument("--groups", type=int, default=500)
    ap.add_argument("--broker-nice", type=int, default=19,
                    help="niceness of the broker and its traffic (0-19; by default 19): they stand in for a "
                         "cluster on other hosts, and tansu's CPU grows with the batches it holds, so at "
                         "the collector's priority they take its turns on a small machine; 0 runs them alike")
    ap.add_argument("--services", type=int, default=200)
    ap.add_argument("--out", default=os.path.join(ROOT, "target/soak"), help="samples (JSON) and plots (PNG)")
    ap.add_argument("--check", action="store_true", help="exit 1 when a goal is missed")
    ap.add_argument("--hog", type=int, default=0, help="busy processes run beside, as a loaded machine")
    ap.add_argument("--retention", default=None,
                    help='[serve] retention (e.g. "5m"): the store stops growing once it is reached')
    ap.add_argument("--journey-spans", type=int, default=None,
                    help="[serve.journeys] max_spans: the journeys store fills to it (by default 300,000, "
                         "about 16 hours of this mix); a bound reached within the warm-up leaves RSS "
                         "growth that no bounded store explains")
    ap.add_argument("--replot", metavar="DIR", default=None,
                    help="draw DIR/soak.png again from DIR/soak.json (a run's samples) and exit")
    args = ap.parse_args()
    if args.replot is not None:
        return replot(args.replot)
    if not 0 <= args.warmup < args.minutes:
        sys.exit(f"--warmup ({args.warmup:g} min) must be shorter than --minutes ({args.minutes:g}): "
                 "the goals are judged on the minutes after it")
    if args.journey_spans is not None and args.journey_spans < 1:
        sys.exit(f"--journey-spans {args.journey_spans}: the journeys store's bound is a count of spans, at least 1")
    if args.retention is not None and not re.fullmatch(r"(\d+\s*[a-z]+\s*)+", args.retention):
        sys.exit(f"--retention {args.retention!r}: a duration such as 10m or 1h 30m")
    if not 0 <= args.broker_nice <= 19:
        sys.exit(f"--broker-nice {args.broker_nice}: a niceness from 0 to 19")
    if args.hog < 0:
        sys.exit(f"--hog {args.hog}: a count of busy processes, 0 or more")
    executables = [(args.binary, "--binary")] + ([(args.tansu, "--tansu")] if args.broker == "tansu" else [])
    if args.broker == "kafka" and not os.path.isdir(os.path.join(ROOT, ".tools/kafka/libs")):
        sys.exit("--broker kafka: Apache Kafka is not installed (run scripts/kafka install)")
    for path, what in executables:
        if not os.access(path, os.X_OK):
            sys.exit(f"{what} {path}: not an executable (build it, or pass the path)")
    os.makedirs(args.out, exist_ok=True)
    # SIGTERM and SIGINT end the run through the cleanup below: the broker and
    # collector stopped, the work directory removed.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda n, _: sys.exit(128 + n))
    work = tempfile.mkdtemp(prefix="streamsight-soak-")
    children = []
    stop = threading.Event()
    try:
        return run(args, work, children, stop)
    finally:
        stop.set()
        # The last started first: the broker's clients before the broker.
        for c in reversed(children):
            c.kill()
            c.wait()
        shutil.rmtree(work, ignore_errors=True)


def run(args, work, children, stop):
    # The broker, its topics, and the groups' first commits.
    port = free_port()
    if args.broker == "kafka":
        broker = subprocess.Popen(
            [sys.executable, os.path.join(ROOT, "scripts/kafka"), "start", "--port", str(port),
             "--dir", os.path.join(work, "kafka")], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, preexec_fn=lambda: os.nice(args.broker_nice))
        children.append(broker)
        # scripts/kafka prints the bootstrap once the node answers, not when
        # its port first listens.
        line = broker.stdout.readline()
        if not line.startswith("bootstrap="):
            sys.exit(f"scripts/kafka start did not answer (said {line!r}); see its log in {work}/kafka")
        # Nothing reads the rest: a full pipe must not block the script.
        threading.Thread(target=broker.stdout.read, daemon=True).start()
    else:
        url = f"tcp://127.0.0.1:{port}"
        broker = subprocess.Popen(
            [args.tansu, "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"], cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=lambda: os.nice(args.broker_nice))
        children.append(broker)
        wait_listening(port)
    bootstrap = f"127.0.0.1:{port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1), NewTopic(DLQ, 1, 1),
                                  NewTopic(PROBE, 1, 1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for i in range(PARTITIONS * 200):
        producer.produce(TOPIC, value=b"order", partition=i % PARTITIONS)
    producer.flush(30)
    groups = [f"group-{i:04}" for i in range(args.groups)]
    # What each partition holds, kept here: the groups commit a little behind it.
    produced = [200] * PARTITIONS

    def commit(group, behind):
        # AlterConsumerGroupOffsets: a commit for a group with no member, as
        # any client's commit is on the broker, without 500 client instances.
        offsets = [TopicPartition(TOPIC, p, max(0, end - behind)) for p, end in enumerate(produced)]
        for f in admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, offsets)]).values():
            f.result(30)

    started = time.monotonic()
    for g in groups:
        commit(g, random.randint(0, 50))
    print(f"soak: {args.broker} on {bootstrap}, {len(groups)} groups committed in {time.monotonic() - started:.0f} s",
          flush=True)

    # Every notification, received as a receiver would.
    notified = []

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                alert = json.loads(body).get("alert", {})
                notified.append({"at_s": time.time(), "rule": alert.get("rule"), "state": alert.get("state"),
                                 "labels": alert.get("labels", {})})
            except ValueError:
                pass
            self.send_response(200)
            self.end_headers()

        def log_message(self, *_):
            pass
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    # When the generator sent to each topic: to tell a real drop from a misread.
    sends = {}
    sends_lock = threading.Lock()

    def sent(topic):
        with sends_lock:
            sends.setdefault(topic, []).append(time.time())

    # The collector.
    config = os.path.join(work, "streamsight.toml")
    with open(config, "w") as f:
        if args.retention is not None:
            f.write(f'[serve]\nretention = "{args.retention}"\n\n')
        if args.journey_spans is not None:
            f.write(f"[serve.journeys]\nmax_spans = {args.journey_spans}\n\n")
        f.write(f'''[[serve.alerts.notifiers]]
url = "http://127.0.0.1:{receiver.server_address[1]}/hook"

[[serve.clusters]]
name = "soak"
bootstrap = ["{bootstrap}"]
poll_interval = "10s"

[[serve.probes]]
name = "soak"
bootstrap = "{bootstrap}"
topic = "{PROBE}"
group = "streamsight-probe"
# Not the default 1 s: each probe record is a batch tansu keeps and lists on
# every fetch (see broker_traffic).
interval = "10s"

[[serve.dlq]]
name = "soak"
bootstrap = "{bootstrap}"
topics = ["{DLQ}"]
refresh = "10s"
''')
    log_path = os.path.join(args.out, "collector.log")
    log = open(log_path, "w")
    serve = subprocess.Popen(
        [args.binary, "serve", "--intake-listen", "127.0.0.1:0", "--api-listen", "127.0.0.1:0",
         "--otlp-listen", "127.0.0.1:0", "--storage", f"sqlite://{work}/soak.db", "--config", config],
        stdout=subprocess.PIPE, stderr=log, text=True, env={**os.environ, "STREAMSIGHT_LOG": "warn"})
    children.append(serve)
    line = serve.stdout.readline()
    m = re.search(r"intake=(\S+).*api=(\S+).*otlp=(\S+)", line)
    if not m:
        sys.exit(f"the collector did not start: {line!r}; see {log_path}")
    intake, api, otlp = m.groups()
    threading.Thread(target=lambda: [None for _ in serve.stdout], daemon=True).start()
    print(f"soak: collector pid {serve.pid}, api {api}; {args.minutes} min, warm-up {args.warmup} min", flush=True)

    intake_lat, api_lat = Latencies(), Latencies()

    def every(period, f):
        def loop():
            next_at = time.monotonic()
            while not stop.is_set():
                try:
                    f()
                except Exception as e:  # a load generator that dies is a finding, not a hang
                    print(f"soak: load generator failed: {e!r}", flush=True)
                    raise
                next_at += period
                stop.wait(max(0, next_at - time.monotonic()))
        t = threading.Thread(target=loop, daemon=True)
        t.start()
        return t

    # Data Streams: each service flushes every 10 s, spread over the interval.
    services = [f"svc-{i:03}" for i in range(args.services)]
    dsm_clients = [Client(intake, intake_lat) for _ in range(4)]
    tick = {"n": 0}

    def dsm():
        i = tick["n"] % len(services)
        tick["n"] += 1
        body = dsm_payload(services[i], time.time(), int(time.time()) * 10)
        dsm_clients[i % 4].request("POST", "/v0.1/pipeline_stats", body,
                                   {"Content-Type": "application/msgpack", "Content-Encoding": "gzip"})
        sent(f"{services[i]}-events")
    per_client = 10.0 / len(services)
    for k in range(4):
        every(per_client * 4, lambda k=k: dsm())

    otlp_client = Client(otlp, intake_lat)
    seq = {"n": 0}

    def spans_and_logs():
        seq["n"] += 1
        otlp_client.request("POST", "/v1/traces", spans_body(seq["n"]), {"Content-Type": "application/json"})
        otlp_client.request("POST", "/v1/logs", logs_body(), {"Content-Type": "application/json"})
    every(1.0, spans_and_logs)

    # The broker's traffic, in a process of its own: 50 commits a second and a
    # 400-record burst every 10 s on this one's interpreter lock were held
    # against the timed requests (OTLP requests' client-side p99 10-50 ms
    # while the collector answered them within a few).
    spawn = multiprocessing.get_context("spawn")
    traffic_sends, traffic_stop = spawn.Queue(), spawn.Event()
    traffic = spawn.Process(target=broker_traffic, args=(bootstrap, groups, produced, traffic_sends, traffic_stop,
                                                                args.broker_nice),
                            daemon=True)
    traffic.start()
    children.append(Ended(traffic, traffic_stop))

    def drain_sends():
        while True:
            try:
                topic, at = traffic_sends.get_nowait()
            except queue.Empty:
                return
            with sends_lock:
                sends.setdefault(topic, []).append(at)
    every(5.0, drain_sends)

    dash = Client(api, api_lat)

    def dashboard():
        for path in ["/", "/api/v1/overview", "/api/v1/groups", "/api/v1/lag?cluster=soak&group=group-0000",
                     "/api/v1/alerts", "/api/v1/dlq", "/api/v1/probes", "/metrics"]:
            dash.request("GET", path)
    every(5.0, dashboard)

    # Samples, once a minute.
    clk = os.sysconf("SC_CLK_TCK")

    def stat_cpu_s(text):
        """utime + stime of a /proc stat line, in seconds."""
        fields = text.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / clk

    def cpu_s(pid=None):
        with open(f"/proc/{pid or serve.pid}/stat") as f:
            return stat_cpu_s(f.read())

    def peers_cpu_s():
        """CPU seconds so far of what runs beside the collector: the broker,
        this generator and its broker traffic's process (every thread of each)."""
        return {"broker": cpu_s(broker.pid), "generator": cpu_s(os.getpid()), "broker_traffic": cpu_s(traffic.pid)}

    def cpu_by_thread():
        """CPU seconds so far by thread name (tokio workers, the writer, the
        blocking pool, librdkafka's threads): which one's share grows."""
        out = {}
        for tid in os.listdir(f"/proc/{serve.pid}/task"):
            try:
                with open(f"/proc/{serve.pid}/task/{tid}/stat") as f:
                    text = f.read()
            except OSError:
                continue  # a thread that ended meanwhile
            name = text[text.index("(") + 1:text.rindex(")")]
            out[name] = out.get(name, 0) + stat_cpu_s(text)
        return out

    def rss_kinds_mb():
        """(RSS, its anonymous part, its file-backed part) in MB: a step in the
        file-backed part is code and files paged in, not memory held."""
        kinds = {}
        with open(f"/proc/{serve.pid}/status") as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in ("VmRSS", "RssAnon", "RssFile"):
                    kinds[key] = int(line.split()[1]) / 1024
        return kinds.get("VmRSS", 0.0), kinds.get("RssAnon", 0.0), kinds.get("RssFile", 0.0)

    def rss_mb():
        return rss_kinds_mb()[0]

    def huge_pages_mb():
        """Anonymous memory in transparent huge pages (smaps_rollup), in MB."""
        try:
            with open(f"/proc/{serve.pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("AnonHugePages:"):
                        return round(int(line.split()[1]) / 1024, 1)
        except OSError:
            pass
        return None

    def held():
        """What the bounded stores hold by their own accounting: the engine's bytes
        (docs/engine.md's bounds), the groups' histories' bytes and the journeys
        store's spans, beside RSS."""
        try:
            _, body = api_get(api, "/metrics?granularity=group")
        except OSError:
            return None, None, None, None, {}
        lines = body.splitlines()
        engine = [float(line.rsplit(" ", 1)[1]) for line in lines
                  if line.startswith("streamsight_engine_memory_bytes{")]
        history = [float(line.rsplit(" ", 1)[1]) for line in lines
                   if line.startswith("streamsight_group_history_bytes ")]
        spans = [int(float(line.rsplit(" ", 1)[1])) for line in lines
                 if line.startswith('streamsight_journeys_held{what="spans"}')]
        evaluation = [float(line.rsplit(" ", 1)[1]) for line in lines
                      if line.startswith("streamsight_alerts_evaluation_seconds ")]
        return ((round(sum(engine) / 1e6, 1) if engine else None),
                (round(history[0] / 1e6, 1) if history else None), (spans[0] if spans else None),
                (round(evaluation[0] * 1000, 1) if evaluation else None), histograms(body))

    for _ in range(args.hog):
        children.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
    # RSS every 5 s: the dashboard's refreshes allocate and free ~30 MB every
    # 5 s, so one reading a minute swung 105-138 MB and made steps of noise;
    # a minute's median says what it held.
    rss_lock, rss_readings = threading.Lock(), []

    def read_rss():
        with rss_lock:
            rss_readings.append(rss_kinds_mb())
    every(RSS_EVERY_S, read_rss)

    def take_rss():
        with rss_lock:
            readings = rss_readings[:]
            rss_readings.clear()
        return readings or [rss_kinds_mb()]
    samples, bad = [], []
    began, began_wall = time.monotonic(), time.time()
    last_cpu, last_at = cpu_s(), began
    last_threads, last_peers = cpu_by_thread(), peers_cpu_s()
    last_timings = held()[4]
    minutes = int(round(args.minutes))
    for minute in range(1, minutes + 1):
        stop.wait(max(0, began + minute * 60 - time.monotonic()))
        if traffic.exitcode is not None:
            sys.exit(f"soak: the broker's traffic stopped (exit {traffic.exitcode}) in minute {minute}")
        if serve.poll() is not None:
            sys.exit(f"soak: the collector exited with {serve.returncode} in minute {minute}; see {log_path}")
        now, cpu, threads, peers = time.monotonic(), cpu_s(), cpu_by_thread(), peers_cpu_s()
        # Threads that ended took their seconds along: a name's share can only be
        # told while it lives, so a negative difference counts as 0.
        by_thread = {k: round(100 * max(0.0, v - last_threads.get(k, 0.0)) / (now - last_at), 2)
                     for k, v in sorted(threads.items())}
        ims, ibad, ims_by_path = intake_lat.take()
        ams, abad, ams_by_path = api_lat.take()
        bad += ibad + abad
        log.flush()
        with open(log_path) as f:
            text = f.read()
        engine, history, spans, evaluation_ms, timings = held()
        disk = {name: round(os.path.getsize(os.path.join(work, name)) / 1e6, 1)
                for name in ("soak.db", "soak.db-wal") if os.path.exists(os.path.join(work, name))}
        kinds = take_rss()
        rss = [k[0] for k in kinds]
        s = {"minute": minute, "rss_mb": round(statistics.median(rss), 1), "rss_min_mb": round(min(rss), 1),
             "rss_max_mb": round(max(rss), 1), "rss_now_mb": round(rss_mb(), 1),
             "rss_anon_mb": round(statistics.median(k[1] for k in kinds), 1),
             "rss_file_mb": round(statistics.median(k[2] for k in kinds), 1),
             "anon_huge_pages_mb": huge_pages_mb(),
             "engine_mb": engine, "history_mb": history,
             "journey_spans": spans,
             "cpu_percent": round(100 * (cpu - last_cpu) / (now - last_at), 1), "cpu_percent_by_thread": by_thread,
             "peers_cpu_percent": {k: round(100 * (v - last_peers[k]) / (now - last_at), 1) for k, v in peers.items()},
             "alerts_evaluation_ms": evaluation_ms,
             # The collector's own account of where a write's time went this minute.
             "timings": timings_p99(timings, last_timings),
             "intake_requests": len(ims), "intake_p99_ms": p99(ims),
             "intake_p99_ms_by_request": ims_by_path, "storage_mb": disk, "api_requests": len(ams),
             "api_p99_ms": p99(ams), "api_p99_ms_by_request": ams_by_path, "errors_logged": text.count(" ERROR "), "warnings_logged": text.count(" WARN "),
             "non_2xx": len(ibad) + len(abad)}
        last_cpu, last_at, last_threads, last_timings = cpu, now, threads, timings or last_timings
        last_peers = peers
        samples.append(s)
        print("soak: " + json.dumps(s), flush=True)
    stop.set()
    mix = what_it_saw(api)
    print("soak: saw " + json.dumps(mix), flush=True)
    drain_sends()
    drops = explain_drops(notified, sends, began_wall)
    for d in drops:
        print("soak: produce_rate_drop " + json.dumps(d), flush=True)
    return report(args, samples, bad, log_path, serve.poll() is None, mix, notified, drops)


def api_get(api, path):
    """A GET of the collector's API: (status, body as text)."""
    u = urllib.parse.urlparse(api)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def what_it_saw(api):
    """That the mix reached every part: groups polled, probe, DLQ, spans, pathways."""
    def get(path):
        status, body = api_get(api, path)
        return json.loads(body) if status == 200 else {}
    lag = get("/api/v1/lag?cluster=soak")
    polled = {r.get("group") for r in lag.get("rows", []) if r.get("lag_messages") is not None}
    tracers = get("/api/v1/lag?cluster=tracers")
    probes = json.dumps(get("/api/v1/probes"))
    dlq = json.dumps(get("/api/v1/dlq"))
    return {"groups_polled_with_lag": len(polled), "tracer_group_rows": len(tracers.get("rows", [])),
            "probe_reported": PROBE in probes, "dlq_reported": DLQ in dlq,
            "dsm_payloads": get("/api/v1/intake").get("intake", {}).get("payloads", 0)}


def explain_drops(notified, sends, began_wall):
    """Each produce_rate_drop told firing, with the longest gap between the
    generator's sends to its topic in the five minutes before."""
    out = []
    for n in notified:
        if n["rule"] != "produce_rate_drop" or n["state"] != "firing":
            continue
        topic = n["labels"].get("topic", "")
        times = [t for t in sends.get(topic, []) if n["at_s"] - 300 <= t <= n["at_s"]]
        gaps = [b - a for a, b in zip(times, times[1:])]
        out.append({"topic": topic, "cluster": n["labels"].get("cluster"),
                    "minute": round((n["at_s"] - began_wall) / 60, 1), "sends_in_5_min": len(times),
                    "longest_send_gap_s": round(max(gaps), 1) if gaps else None})
    return out


def report(args, samples, bad, log_path, alive, mix, notified, drops):
    judged = [s for s in samples if s["minute"] > args.warmup]
    out = {"minutes": args.minutes, "warmup": args.warmup, "groups": args.groups, "services": args.services,
           "binary": args.binary, "hog": args.hog, "broker_nice": args.broker_nice, "journey_spans": args.journey_spans, "samples": samples, "saw": mix, "notified": notified,
           "produce_rate_drops": drops}
    goals = {}
    if len(judged) >= 2:
        xs = [s["minute"] for s in judged]
        ys = [s["rss_mb"] for s in judged]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        growth = 100 * slope * 60 / ys[0]
        goals["rss_growth_percent_per_hour"] = (round(growth, 2), growth <= 5)
        for key in ["intake_p99_ms", "api_p99_ms"]:
            values = [s[key] for s in judged if s[key] is not None]
            if len(values) >= 2:
                k = min(3, len(values) // 2) or 1
                first, last = statistics.median(values[:k]), statistics.median(values[-k:])
                ratio = last / first if first else float("inf")
                goals[key.replace("_ms", "_last_over_first")] = (round(ratio, 2), ratio <= 1.2)
    errors = sum(1 for line in open(log_path) if " ERROR " in line)
    goals["errors_logged"] = (errors, errors == 0)
    out["goals"] = {k: {"value": v, "met": ok} for k, (v, ok) in goals.items()}
    out["non_2xx"] = bad[:50]
    with open(os.path.join(args.out, "soak.json"), "w") as f:
        json.dump(out, f, indent=1)
    plot(args, samples)
    for k, (v, ok) in goals.items():
        print(f"soak: {k} = {v}: {'met' if ok else 'MISSED'}")
    print(f"soak: samples and plot in {args.out}")
    hard = []
    if not alive:
        hard.append("the collector died")
    if bad:
        hard.append(f"{len(bad)} requests not answered 2xx, e.g. {bad[:5]}")
    if not samples:
        hard.append("no samples")
    if mix["groups_polled_with_lag"] < args.groups:
        hard.append(f"only {mix['groups_polled_with_lag']} of {args.groups} groups polled with a lag")
    if not (mix["probe_reported"] and mix["dlq_reported"] and mix["tracer_group_rows"]):
        hard.append(f"a part of the mix was not seen: {mix}")
    for h in hard:
        print(f"soak: FAILED: {h}")
    missed = [k for k, (_, ok) in goals.items() if not ok]
    if hard or (args.check and missed):
        return 1
    return 0


def replot(out):
    try:
        with open(os.path.join(out, "soak.json")) as f:
            run = json.load(f)
        args = argparse.Namespace(out=out, **{k: run[k] for k in ("minutes", "warmup", "services", "groups")})
        samples = run["samples"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"soak: --replot {out}: no run's samples there ({e})")
    plot(args, samples)
    print(f"soak: plot in {out}")


def plot(args, samples):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    minutes = [s["minute"] for s in samples]
    for ax, key, label in [(axes[0][0], "rss_mb", "RSS, the minute's median (MB)"), (axes[0][1], "cpu_percent", "CPU (% of a core)"),
                           (axes[1][0], "intake_p99_ms", "p99 intake latency (ms)"),
                           (axes[1][1], "api_p99_ms", "p99 API latency (ms)")]:
        ax.plot(minutes, [s[key] if s[key] is not None else float("nan") for s in samples], marker=".")
        if key == "rss_mb":
            ax.fill_between(minutes, [s.get("rss_min_mb", s[key]) for s in samples],
                            [s.get("rss_max_mb", s[key]) for s in samples], alpha=0.2,
                            label=f"least and most of the minute (read every {RSS_EVERY_S:g} s)")
            ax.plot(minutes, [s.get("rss_anon_mb") or float("nan") for s in samples], marker=".",
                    label="of it anonymous (heap), median")
            ax.plot(minutes, [s.get("rss_file_mb") or float("nan") for s in samples], marker=".",
                    label="of it file-backed (code, files), median")
            ax.plot(minutes, [s["anon_huge_pages_mb"] if s.get("anon_huge_pages_mb") is not None
                              else float("nan") for s in samples], marker=".",
                    label="of it in transparent huge pages")
            ax.plot(minutes, [s.get("engine_mb") or float("nan") for s in samples], marker=".",
                    label="engine's own accounting (MB)")
            ax.plot(minutes, [s.get("history_mb") or float("nan") for s in samples], marker=".",
                    label="groups' histories (MB)")
        ax.axvline(args.warmup, color="grey", linestyle=":", label="end of warm-up")
        ax.set_title(label)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("minute")
    axes[0][0].legend(loc="best", fontsize="x-small", framealpha=0.7)
    fig.suptitle(f"streamsight soak: {args.services} services, {args.groups} groups, {args.minutes:g} min")
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "soak.png"), dpi=90)


if __name__ == "__main__":
    sys.exit(main())
