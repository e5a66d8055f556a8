//! One alert evaluation cycle at scale: 1,000 rules over 1 M group-partitions
//! (10,000 groups × 100 partitions over 100 topics), on the calling thread.
//! Goal (issue 18): < 1 s per cycle on one core. `STREAMSIGHT_ALERTS_GROUPS=100000`
//! spreads the same million over 100,000 groups × 10 partitions (1,000 topics;
//! issue 32's estate): ten times the per-group series.
//!
//! `cargo bench -p streamsight-collector --bench alerts`

#![allow(clippy::unwrap_used)] // a bench that cannot set up should fail loudly

use std::time::Instant;
use streamsight_collector::ServeConfig;
use streamsight_collector::alerts::rules::AlertsConfig;
use streamsight_collector::state::Shared;
use streamsight_core::alerts::rule::Rule;
use streamsight_core::{EngineConfig, Millis, Observation, Partition, Record};

/// The allocator the `streamsight` binary uses.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PARTITIONS: i32 = 100;
const GROUP_PARTITIONS: i32 = 1_000_000;
const T0: i64 = 1_800_000_000_000;

/// Groups (10,000 or 100,000), the partitions each commits on, and topics.
fn shape() -> (i32, i32, i32) {
    let groups: i32 = std::env::var("STREAMSIGHT_ALERTS_GROUPS")
        .map(|v| v.parse().expect("STREAMSIGHT_ALERTS_GROUPS is 10000 or 100000"))
        .unwrap_or(10_000);
    assert!(
        groups == 10_000 || groups == 100_000,
        "STREAMSIGHT_ALERTS_GROUPS is 10000 or 100000"
    );
    (groups, GROUP_PARTITIONS / groups, groups / 100)
}

fn load(shared: &Shared) {
    let (groups_n, per_group, topics) = shape();
    let names: Vec<String> = (0..topics).map(|t| format!("topic-{t:03}")).collect();
    // The digit after `group-` is the group's tenth: each rule's scope
    // (`group-3*`) keeps a tenth of the groups. (Until 2026-12-05 the names
    // were `group-00042`, so `group-0*` kept every group and the other nine
    // scopes none: the same rule × series pairs, spread otherwise.)
    let groups: Vec<String> = (0..groups_n)
        .map(|g| format!("group-{}-{:05}", g % 10, g / 10))
        .collect();
    for step in 0..2i64 {
        let at = Millis(T0 + step * 30_000);
        let mut records = Vec::new();
        for t in &names {
            for p in 0..PARTITIONS {
                let partition = Partition {
                    cluster: "prod",
                    topic: t.as_str(),
                    partition: p,
                };
                let observation = Observation::Produced {
                    partition,
                    offset: 10_000 + step * 600,
                };
                records.push(Record::Observation {
                    at,
                    observation: observation.to_owned(),
                });
            }
        }
        shared.apply(&records);
        for (g, group) in groups.iter().enumerate() {
            let topic = names[g % topics as usize].as_str();
            // A block of the topic's partitions: all of them at 100 a group.
            let block = (g as i32 / topics) % (PARTITIONS / per_group);
            let records: Vec<Record> = (block * per_group..(block + 1) * per_group)
                .map(|p| {
                    let behind = i64::from((g as i32 * 7 + p) % 500);
                    let partition = Partition {
                        cluster: "prod",
                        topic,
                        partition: p,
                    };
                    let offset = 10_000 + step * 600 - behind;
                    let observation = Observation::Committed {
                        group: group.as_str(),
                        partition,
                        offset,
                    };
                    Record::Observation {
                        at,
                        observation: observation.to_owned(),
                    }
                })
                .collect();
            shared.apply(&records);
        }
    }
}

/// 1,000 rules: thresholds on every group signal, each scoped to a tenth of the
/// groups (as teams scope rules to theirs), and anomaly rules on the same.
fn rules() -> Vec<Rule> {
    let kinds = [
        ("group_lag_seconds", "above = 300"),
        ("group_lag_messages", "above = 400"),
        ("group_status", "statuses = [\"stall\", \"stop\"]"),
        ("catch_up_seconds", "above = 3600"),
        ("retention_margin_seconds", "below = 3600"),
        ("partitions_not_committing", "above = 0"),
        ("producer_failing", "above = 0"),
        ("group_lag_seconds", "anomaly = \"rise\""),
    ];
    // Rules asking the same anomaly question of a series share its detector;
    // `STREAMSIGHT_ALERTS_DISTINCT=1` gives each anomaly rule a sensitivity of
    // its own, so that none share (1.25 M detectors instead of 100,000).
    let distinct = std::env::var("STREAMSIGHT_ALERTS_DISTINCT").is_ok_and(|v| v == "1");
    (0..1000)
        .map(|i| {
            let (signal, condition) = kinds[i % kinds.len()];
            let condition = if distinct && condition.starts_with("anomaly") {
                format!("{condition}\nsensitivity = {}", 4.0 + i as f64 / 1000.0)
            } else {
                condition.to_owned()
            };
            let scope = if signal == "producer_failing" {
                format!("scope = {{ topic = \"topic-{:02}*\" }}", i % 10)
            } else {
                format!("scope = {{ group = \"group-{}*\" }}", i % 10)
            };
            toml::from_str(&format!("name = \"r{i}\"\nsignal = \"{signal}\"\n{condition}\n{scope}")).unwrap()
        })
        .collect()
}

fn main() {
    let config = ServeConfig {
        alerts: AlertsConfig {
            default_rules: false,
            rules: rules(),
            max_series: 2_000_000,
            max_anomaly_series: 2_000_000,
            ..AlertsConfig::default()
        },
        ..ServeConfig::default()
    };
    let mut engine = EngineConfig::default();
    engine.cardinality.max_group_partitions = 2_000_000;
    engine.cardinality.max_groups_per_cluster = 200_000;
    let shared = std::sync::Arc::new(streamsight_collector::node(config, engine).unwrap());
    let started = Instant::now();
    load(&shared);
    println!(
        "loaded 1 M group-partitions in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // What intake would wait for the engine while cycles run: the longest wait
    // of a thread that takes the engine every millisecond.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let waiter = {
        let (shared, done) = (shared.clone(), done.clone());
        std::thread::spawn(move || {
            let mut longest = std::time::Duration::ZERO;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let t = Instant::now();
                drop(shared.lag.engine());
                longest = longest.max(t.elapsed());
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            longest
        })
    };
    let mut cycles = Vec::new();
    let rounds: i64 = std::env::var("STREAMSIGHT_ALERTS_ROUNDS").map_or(7, |v| v.parse().unwrap());
    for i in 0..rounds {
        let now = Millis(T0 + 60_000 + i * 10_000);
        let t = Instant::now();
        let changed = streamsight_collector::alerts::of(&shared).evaluate(&shared, now);
        let evaluated = t.elapsed().as_secs_f64();
        shared.apply(&changed);
        cycles.push((t.elapsed().as_secs_f64(), evaluated, changed.len()));
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let longest = waiter.join().unwrap();
    let alerts = streamsight_collector::alerts::of(&shared)
        .list(Millis(T0 + 130_000), false)
        .len();
    let (groups, per_group, _) = shape();
    println!("1,000 rules, 1 M group-partitions, {groups} groups of {per_group}; one cycle each 10 s of data:");
    for (i, (s, evaluated, changed)) in cycles.iter().enumerate() {
        println!(
            "  cycle {i}: {s:.3} s ({evaluated:.3} s evaluating, the rest applying the changes), {changed} changes"
        );
    }
    println!("  alerts not ok after 7 cycles: {alerts}");
    println!(
        "  longest wait for the engine by another thread during the cycles: {:.1} ms",
        longest.as_secs_f64() * 1e3
    );
}
