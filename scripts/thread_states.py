#!/usr/bin/env python3
"""Where one thread of a running process spends the time it is not idle.

    scripts/thread_states.py PID --thread streamsight-wri --seconds 120

Reads the thread's state and wait channel (/proc/PID/task/TID/stat and
wchan) every --every-ms milliseconds and prints how many readings fell in
each (state, wait channel), then the longest stretches spent in one of them
other than waiting on a futex (idle: a tokio or writer thread waiting for
work). A writer held in `D submit_bio_wait` for tens of milliseconds is
waiting on the disk's flush, and every request queued behind it waits too
(RELIABILITY.md, "Intake p99 follows the disk's flushes"). Costs a few % of a core; nothing is
written to the process.
"""

import argparse
import collections
import os
import sys
import time

IDLE_WAITS = ("futex_wait_queue", "futex_do_wait")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pid", type=int)
    ap.add_argument("--thread", default="streamsight-wri", help="the thread's name (comm), as /proc shows it")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--every-ms", type=float, default=2)
    ap.add_argument("--longest", type=int, default=15, help="how many of the longest stretches to print")
    args = ap.parse_args()
    if args.seconds <= 0 or args.every_ms <= 0:
        sys.exit("--seconds and --every-ms must be positive")
    if args.longest < 0:
        sys.exit(f"--longest {args.longest}: a count of stretches, 0 or more")
    tasks = f"/proc/{args.pid}/task"
    def name(tid):
        try:
            with open(f"{tasks}/{tid}/comm") as f:
                return f.read().strip()
        except OSError:
            return None  # a thread that ended meanwhile
    try:
        tids = [t for t in os.listdir(tasks) if name(t) == args.thread]
    except OSError as e:
        sys.exit(f"no process {args.pid} to read ({e})")
    if not tids:
        sys.exit(f"process {args.pid} has no thread named {args.thread!r}")
    tid = tids[0]
    counts, stretches = collections.Counter(), []
    current, since = None, time.monotonic()
    end = since + args.seconds
    while time.monotonic() < end:
        try:
            with open(f"{tasks}/{tid}/stat") as f:
                stat = f.read()
            with open(f"{tasks}/{tid}/wchan") as f:
                wchan = f.read().strip()
        except OSError:
            print("the thread ended", file=sys.stderr)
            break
        state = stat[stat.rindex(")") + 2]
        key = ("idle", "") if state == "S" and wchan in IDLE_WAITS else (state, wchan)
        now = time.monotonic()
        counts[key] += 1
        if key != current:
            if current is not None and current[0] != "idle":
                stretches.append((now - since, current))
            current, since = key, now
        time.sleep(args.every_ms / 1000)
    if current is not None and current[0] != "idle":
        stretches.append((time.monotonic() - since, current))
    total = sum(counts.values()) or 1
    print(f"{total} readings of thread {tid} ({args.thread}) every {args.every_ms:g} ms:")
    for (state, wchan), n in counts.most_common(12):
        print(f"  {state} {wchan or '-'}: {n} ({100 * n / total:.2f} %)")
    print("longest stretches out of idle:")
    for seconds, (state, wchan) in sorted(stretches, reverse=True)[:args.longest]:
        print(f"  {seconds * 1000:.1f} ms {state} {wchan or '-'}")


if __name__ == "__main__":
    main()
