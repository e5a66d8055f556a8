//! What the collector's benchmarks share.

/// User and system CPU seconds of this process's collector threads (Linux; clock
/// ticks of 10 ms): its runtime, the writer, and librdkafka's threads when the
/// log is in Kafka.
pub(crate) fn collector_cpu_seconds() -> f64 {
    let mut total = 0.0;
    for task in std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten() {
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let name = head.split_once('(').map_or("", |(_, n)| n);
        let ours = [
            "collector",
            "streamsight-wri",
            "streamsight-sha",
            "streamsight-dir",
            "rdk:",
            "producer pollin",
        ];
        if !ours.iter().any(|prefix| name.starts_with(prefix)) {
            continue;
        }
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
        total += (ticks(11) + ticks(12)) / 100.0;
    }
    total
}

/// The collector's runtime and the load generator's, apart, so that their
/// threads' CPU time can be told apart.
pub(crate) fn runtimes() -> (tokio::runtime::Runtime, tokio::runtime::Runtime) {
    let runtime = |name: &str| {
        tokio::runtime::Builder::new_multi_thread()
            .thread_name(name)
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("cannot build the {name} runtime: {e}"))
    };
    (runtime("collector"), runtime("loadgen"))
}
