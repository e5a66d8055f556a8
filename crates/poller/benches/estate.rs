//! The largest estates (issue 32): one poll cycle of G groups, each committed on
//! 10 partitions, over G partitions (G/100 topics of 100), against tansu started
//! here. The estate is seeded with raw OffsetCommit requests (the poller's admin
//! commit, 32 at a time), not G client instances. Then the poller, the tracker
//! and the engine run a few cycles as `serve` runs them, and one line is printed:
//!
//! `poll cycle: G groups, P group-partitions, S s, R requests, RSS M MB`
//!
//! S is the mean of the steady cycles (coordinators cached), R a steady cycle's
//! requests, RSS this process's resident set after the last cycle (the poller's
//! connections and snapshot, the tracker, the engine with every history); the
//! broker is another process and not counted.
//!
//! `STREAMSIGHT_ESTATE_GROUPS=100000 cargo bench -p streamsight-poller --bench estate`
//! (default 10,000; needs tansu: scripts/test installs it at .tools/tansu, or set
//! STREAMSIGHT_TANSU).
//!
//! With `STREAMSIGHT_ESTATE_BROKER=wire` the same estate is answered instead by
//! testkit's `WireBroker` (kafka-protocol's encodings, the estate held in
//! memory, on a thread of its own in this process): what a cycle costs when
//! the broker answers at memory speed, as a real cluster's brokers, each
//! answering its share on cores of its own, come closer to than tansu on the
//! poller's two cores. Its CPU is reported apart from the poller's, and RSS
//! after the estate was built is printed beside the final one (the estate is
//! the broker's, not the collector's).
#![allow(clippy::unwrap_used)]

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use streamsight_core::{Engine, EngineConfig, Millis};
use streamsight_poller::{ClusterClient, ClusterConfig, Tracker};

const PARTITIONS_PER_TOPIC: i32 = 100;
const PARTITIONS_PER_GROUP: i32 = 10;
const TOPICS_PER_CREATE: usize = 100;
const COMMITTERS: usize = 32;
const CYCLES: u64 = 3;

fn topic(t: usize) -> String {
    format!("estate-{t:05}")
}

/// Group `g` commits on 10 partitions of one topic: every partition is
/// committed by 10 groups.
fn commits_of(g: usize, topics: usize) -> Vec<(String, i32, i64)> {
    let block = ((g / topics) % (PARTITIONS_PER_TOPIC / PARTITIONS_PER_GROUP) as usize) as i32;
    (0..PARTITIONS_PER_GROUP)
        .map(|p| (topic(g % topics), block * PARTITIONS_PER_GROUP + p, 0))
        .collect()
}

fn seed(rt: &tokio::runtime::Runtime, bootstrap: &str, groups: usize) -> usize {
    let topics = (groups * PARTITIONS_PER_GROUP as usize / 10 / PARTITIONS_PER_TOPIC as usize).max(1);
    let started = Instant::now();
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(120)));
    let names: Vec<String> = (0..topics).map(topic).collect();
    for chunk in names.chunks(TOPICS_PER_CREATE) {
        let new: Vec<NewTopic> = chunk
            .iter()
            .map(|t| NewTopic::new(t, PARTITIONS_PER_TOPIC, TopicReplication::Fixed(1)))
            .collect();
        for r in rt.block_on(admin.create_topics(&new, &opts)).unwrap() {
            r.unwrap();
        }
    }
    eprintln!("seeded {topics} topics in {:.1} s", started.elapsed().as_secs_f64());
    let started = Instant::now();
    let committers = (0..COMMITTERS).map(|worker| {
        let bootstrap = bootstrap.to_owned();
        async move {
            let mut client = ClusterClient::new(ClusterConfig::new("seed", &bootstrap));
            for g in (worker..groups).step_by(COMMITTERS) {
                let answer = client
                    .commit_offsets(&format!("estate-group-{g:06}"), &commits_of(g, topics))
                    .await;
                let answer = answer.unwrap();
                assert!(answer.iter().all(|(_, code)| *code == 0), "{answer:?}");
            }
        }
    });
    rt.block_on(futures_util::future::join_all(committers));
    eprintln!(
        "seeded {groups} groups' commits in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    topics
}

/// The estate answered by a `WireBroker` on a thread of its own: its
/// bootstrap, the thread's `/proc` path under a PID (`self/task/TID`, for
/// its CPU) and the number of topics. The same shape `seed` writes to tansu:
/// G/100 topics of 100 partitions, each group committed at 0 on 10 of them.
fn wire_broker(groups: usize) -> (String, String, usize) {
    use streamsight_testkit::kafka::{WireBroker, WireCluster, WireGroup, WirePartition};
    let topics = (groups * PARTITIONS_PER_GROUP as usize / 10 / PARTITIONS_PER_TOPIC as usize).max(1);
    let mut cluster = WireCluster::default();
    for t in 0..topics {
        let partition = WirePartition {
            log_start: 0,
            high_watermark: 1_000,
            last_stable: 1_000,
        };
        cluster
            .topics
            .insert(topic(t), vec![partition; PARTITIONS_PER_TOPIC as usize]);
    }
    for g in 0..groups {
        let group = WireGroup {
            state: "Empty".into(),
            group_type: "classic".into(),
            offsets: commits_of(g, topics).into_iter().map(|(t, p, o)| ((t, p), o)).collect(),
            ..WireGroup::default()
        };
        cluster.groups.insert(format!("estate-group-{g:06}"), group);
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("wire-broker".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let broker = WireBroker::start(cluster).await;
                let me = std::fs::read_link("/proc/thread-self").unwrap();
                let tid = me.file_name().unwrap().to_string_lossy().into_owned();
                tx.send((broker.addr.clone(), format!("self/task/{tid}"))).unwrap();
                std::future::pending::<()>().await;
            });
        })
        .unwrap();
    let (addr, thread) = rx.recv().unwrap();
    eprintln!("built the estate of {groups} groups in the in-process broker at {addr}");
    (addr, thread, topics)
}

/// User and system CPU seconds of a process, from /proc/PID/stat.
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are 14 and 15.
    let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// This process's resident set now and at its peak, in MB (/proc/self/status).
fn rss_mb() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn main() {
    // `cargo bench` passes --bench; a filter that names another bench skips this one.
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with('-') && !"estate".contains(a.as_str()))
    {
        return;
    }
    let groups: usize = std::env::var("STREAMSIGHT_ESTATE_GROUPS")
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("STREAMSIGHT_ESTATE_GROUPS is a whole number of groups, not {v:?}"))
        })
        .unwrap_or(10_000);
    assert!(
        (100..=1_000_000).contains(&groups),
        "STREAMSIGHT_ESTATE_GROUPS is 100 to 1,000,000 groups, not {groups}"
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let wire = match std::env::var("STREAMSIGHT_ESTATE_BROKER").as_deref() {
        Ok("wire") => true,
        Ok("tansu") | Err(_) => false,
        Ok(other) => panic!("STREAMSIGHT_ESTATE_BROKER is tansu or wire, not {other:?}"),
    };
    let (_tansu, bootstrap, broker_pid, topics) = if wire {
        let (bootstrap, thread, topics) = wire_broker(groups);
        (None, bootstrap, thread, topics)
    } else {
        let broker = streamsight_testkit::Tansu::start();
        let bootstrap = broker.bootstrap.clone();
        let pid = broker.pid().to_string();
        let topics = seed(&rt, &bootstrap, groups);
        (Some(broker), bootstrap, pid, topics)
    };
    let (estate_rss, _) = rss_mb();

    let mut config = ClusterConfig::new("estate", &bootstrap);
    config.request_timeout = Duration::from_secs(60);
    let mut client = ClusterClient::new(config);
    let mut tracker = Tracker::new("estate", Duration::from_secs(600));
    let mut engine_config = EngineConfig::default();
    let limits = &mut engine_config.cardinality;
    limits.max_groups_per_cluster = limits.max_groups_per_cluster.max(groups);
    let mut engine = Engine::new(engine_config).unwrap();
    let none = BTreeSet::new();
    let (before, _) = rss_mb();
    let mut steady = Vec::new();
    let mut requests = 0;
    let mut apply = Vec::new();
    for cycle in 0..=CYCLES {
        let at = Millis(1_000_000 + cycle as i64 * 10_000);
        let started = Instant::now();
        let cpu = (cpu_seconds("self"), cpu_seconds(&broker_pid));
        let snap = rt.block_on(client.poll(at, &none));
        let took = started.elapsed();
        let cpu = (cpu_seconds("self") - cpu.0, cpu_seconds(&broker_pid) - cpu.1);
        // The in-process broker's thread is part of this process's CPU.
        let cpu = if wire { (cpu.0 - cpu.1, cpu.1) } else { cpu };
        let group_partitions: usize = snap.groups.iter().map(|g| g.offsets.len()).sum();
        assert_eq!(snap.groups.len(), groups, "{:?}", snap.errors.first());
        assert_eq!(
            group_partitions,
            groups * PARTITIONS_PER_GROUP as usize,
            "{:?}",
            snap.errors.first()
        );
        assert_eq!(snap.partition_count(), topics * PARTITIONS_PER_TOPIC as usize);
        let started = Instant::now();
        let update = tracker.update(&snap);
        for r in update.durable.iter().chain(&update.transient) {
            r.apply(&mut engine);
        }
        apply.push(started.elapsed());
        eprintln!(
            "cycle {cycle}: {:.2} s, {} requests, {} errors; CPU: poller {:.2} s, broker {:.2} s; tracker and engine {:.2} s",
            took.as_secs_f64(),
            snap.requests,
            snap.errors.len(),
            cpu.0,
            cpu.1,
            apply[apply.len() - 1].as_secs_f64()
        );
        if cycle > 0 {
            steady.push(took.as_secs_f64());
            requests = snap.requests;
        }
    }
    let (rss, peak) = rss_mb();
    let memory = engine.memory();
    let mean = steady.iter().sum::<f64>() / steady.len() as f64;
    if wire {
        eprintln!("RSS with the in-process broker's estate built, before the poller started: {estate_rss:.0} MB");
    }
    eprintln!(
        "RSS before the first poll {before:.0} MB, peak {peak:.0} MB; engine {:.0} MB; tracker and engine per cycle {:.2} s (mean of the steady)",
        (memory.partition_bytes + memory.group_partition_bytes) as f64 / 1e6,
        apply[1..].iter().map(Duration::as_secs_f64).sum::<f64>() / (apply.len() - 1) as f64,
    );
    println!(
        "poll cycle: {groups} groups, {} group-partitions, {mean:.2} s, {requests} requests, RSS {rss:.0} MB",
        groups * PARTITIONS_PER_GROUP as usize
    );
}
