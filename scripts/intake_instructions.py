#!/usr/bin/env python3
"""Instructions per Data Streams payload on the durable (SQLite) intake path,
counted by valgrind's callgrind: a figure this noisy 2-core machine cannot
blur, where wall time on an fsync-bound path moves +-20 % between runs.

For each checkout given, writes a throwaway example beside the collector's
intake bench (its own `payload`, `router` and `send`, so the same load runs
against each tree's API), builds it in release, runs N1 and N2 payloads
(16 in flight, SQLite on /dev/shm) under callgrind, and prints the marginal
instructions per payload: (I(N2) - I(N1)) / (N2 - N1), setup cancelled out.

    scripts/intake_instructions.py /work/main /tmp/before   # needs Debian's valgrind

Used for issue 29's before/after (BENCHMARKS.md). The example is removed
again; the build lands in each checkout's own target/release.
"""
import os
import re
import shutil
import subprocess
import sys

N1, N2 = 2000, 4000

MAIN = '''
fn main() {
    let n: u64 = std::env::var("N").map(|v| v.parse().unwrap()).unwrap_or(2000);
    let dir = std::path::PathBuf::from(std::env::var("DIR").unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let r = router(&format!("sqlite://{}/bench.db", dir.display()));
    let mut seq = 0;
    let _ = send(&rt, &r, 200, 16, &mut seq, false);
    let t = send(&rt, &r, n, 16, &mut seq, false);
    println!("{n} payloads in {:?}", t);
    let _ = std::fs::remove_dir_all(&dir);
}
'''


def example(tree):
    path = os.path.join(tree, "crates/collector/benches/intake.rs")
    if not os.path.exists(path):
        sys.exit(f"{tree} is not a streamsight checkout: {path} is missing")
    bench = open(path).read()
    helpers = bench[: bench.index("fn intake_bench(")]
    helpers = helpers.replace(
        "mod support;", '#[path = "../benches/support/mod.rs"]\n#[allow(dead_code)]\nmod support;'
    )
    return "#![allow(unused_imports, dead_code, clippy::unwrap_used)]\n" + helpers + MAIN


def instructions(binary, n, tag):
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file=/tmp/intake-instructions.{tag}.{n}", binary],
        env={**os.environ, "N": str(n), "DIR": f"/dev/shm/intake-instructions-{tag}-{n}"},
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    return int(re.search(r"I\s+refs:\s+([\d,]+)", out).group(1).replace(",", ""))


def main():
    trees = sys.argv[1:]
    if not trees:
        sys.exit(__doc__)
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is missing: install Debian's valgrind")
    figures = {}
    for i, tree in enumerate(trees):
        path = os.path.join(tree, "crates/collector/examples/intake_instructions.rs")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "w").write(example(tree))
        try:
            subprocess.run(
                ["cargo", "build", "--release", "--quiet", "--example", "intake_instructions", "-p", "streamsight-collector"],
                cwd=tree,
                check=True,
            )
        finally:
            os.remove(path)
        binary = os.path.join(tree, "target/release/examples/intake_instructions")
        a, b = instructions(binary, N1, i), instructions(binary, N2, i)
        figures[tree] = (b - a) / (N2 - N1)
        print(f"{tree}: {a:,} instructions at {N1} payloads, {b:,} at {N2}: {figures[tree]:,.0f} a payload")
    first = figures[trees[0]]
    for tree in trees[1:]:
        print(f"{trees[0]} does {figures[tree] / first:.4f}x the payloads per instruction of {tree}")


if __name__ == "__main__":
    main()
