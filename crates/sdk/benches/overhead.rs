//! What the SDK costs an application, against librdkafka's mock cluster:
//! produce and consume throughput with and without the wrappers, measured in
//! alternating rounds within one run (the order flips every round), the extra CPU
//! per message (process CPU time, librdkafka's threads included) and the extra
//! heap allocations per message.
//!
//! `cargo bench -p streamsight-sdk --bench overhead`; figures in BENCHMARKS.md.

#![allow(clippy::unwrap_used)] // a bench that cannot set up should fail loudly

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, DefaultProducerContext, Producer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use std::alloc::System;
use std::time::{Duration, Instant};
use streamsight_sdk::{Sdk, SdkConfig, Telemetry};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const ROUNDS: usize = 12;
const BATCH: usize = 20_000;
const PAYLOAD: [u8; 100] = [b'x'; 100];
const WARMUP: usize = 1_000;

/// Process CPU time (user + system, all threads) in seconds, from /proc.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
    // After the command: state is field 3, utime 14, stime 15 (1-based, whole line).
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

#[derive(Default)]
struct Tally {
    seconds: Vec<f64>,
    cpu: f64,
    allocations: usize,
}

impl Tally {
    fn run(&mut self, f: impl FnOnce()) {
        let region = Region::new(GLOBAL);
        let (cpu, start) = (cpu_seconds(), Instant::now());
        f();
        self.seconds.push(start.elapsed().as_secs_f64());
        self.cpu += cpu_seconds() - cpu;
        self.allocations += region.change().allocations;
    }

    fn median_rate(&self) -> f64 {
        let mut s = self.seconds.clone();
        s.sort_by(f64::total_cmp);
        BATCH as f64 / s[s.len() / 2]
    }
}

fn report(what: &str, bare: &Tally, traced: &Tally) {
    report_as(what, "bare", bare, traced);
}

fn report_as(what: &str, baseline: &str, bare: &Tally, traced: &Tally) {
    let mut ratios: Vec<f64> = bare.seconds.iter().zip(&traced.seconds).map(|(b, t)| b / t).collect();
    ratios.sort_by(f64::total_cmp);
    let n = (ROUNDS * BATCH) as f64;
    println!(
        "{what}: {baseline} {:.0} msg/s, traced {:.0} msg/s; per-round throughput ratio traced/{baseline} median {:.3} (range {:.3}..{:.3})",
        bare.median_rate(),
        traced.median_rate(),
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1],
    );
    println!(
        "{what}: CPU per message {baseline} {:.2} µs, traced {:.2} µs (+{:.2} µs); allocations per message {baseline} {:.2}, traced {:.2} (+{:.2})",
        bare.cpu / n * 1e6,
        traced.cpu / n * 1e6,
        (traced.cpu - bare.cpu) / n * 1e6,
        bare.allocations as f64 / n,
        traced.allocations as f64 / n,
        (traced.allocations as f64 - bare.allocations as f64) / n,
    );
}

fn producer_config(cluster: &MockCluster<'static, DefaultProducerContext>) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", cluster.bootstrap_servers())
        .set("linger.ms", "5")
        .set("queue.buffering.max.messages", "1000000");
    c
}

fn produce(cluster: &MockCluster<'static, DefaultProducerContext>) {
    let bare: BaseProducer = producer_config(cluster).create().unwrap();
    let sdk = Sdk::with_telemetry(Telemetry::unshipped(SdkConfig::new("bench")));
    let traced = sdk
        .base_producer(&producer_config(cluster), DefaultProducerContext)
        .unwrap();
    let (mut b, mut h, mut t) = (Tally::default(), Tally::default(), Tally::default());
    // Headers of the same size as the SDK's, fixed: what carrying context costs
    // librdkafka and the broker, apart from the SDK's own work.
    let traceparent = [b'0'; 55];
    let pathway = [b'A'; 24];
    let record = || BaseRecord::<[u8], [u8]>::to("produce").payload(&PAYLOAD[..]);
    let run_bare = |tally: &mut Tally| {
        tally.run(|| {
            for _ in 0..BATCH {
                bare.send(record()).unwrap();
                bare.poll(Duration::ZERO);
            }
            bare.flush(Duration::from_secs(30)).unwrap();
        });
    };
    let run_headers = |tally: &mut Tally| {
        tally.run(|| {
            for _ in 0..BATCH {
                let headers = OwnedHeaders::new_with_capacity(2)
                    .insert(Header {
                        key: "traceparent",
                        value: Some(&traceparent[..]),
                    })
                    .insert(Header {
                        key: "dd-pathway-ctx-base64",
                        value: Some(&pathway[..]),
                    });
                bare.send(record().headers(headers)).unwrap();
                bare.poll(Duration::ZERO);
            }
            bare.flush(Duration::from_secs(30)).unwrap();
        });
    };
    let run_traced = |tally: &mut Tally| {
        tally.run(|| {
            for _ in 0..BATCH {
                traced.send(record(), None).unwrap();
                traced.poll(Duration::ZERO);
            }
            traced.flush(Duration::from_secs(30)).unwrap();
        });
    };
    for round in 0..ROUNDS {
        if round % 2 == 0 {
            run_bare(&mut b);
            run_headers(&mut h);
            run_traced(&mut t);
        } else {
            run_traced(&mut t);
            run_headers(&mut h);
            run_bare(&mut b);
        }
        // What the shipper would take every 10 s.
        sdk.telemetry().take_payload();
    }
    report("produce", &b, &t);
    report_as("produce", "bare+headers", &h, &t);
    // What carrying the headers costs with no SDK code at all ("traced" here is
    // the bare producer sending the fixed headers).
    report_as("produce (headers only)", "bare", &b, &h);
}

fn consume(cluster: &MockCluster<'static, DefaultProducerContext>) {
    let filler: BaseProducer = producer_config(cluster).create().unwrap();
    for _ in 0..BATCH + WARMUP {
        filler
            .send(BaseRecord::<[u8], [u8]>::to("consume").payload(&PAYLOAD[..]))
            .unwrap();
        filler.poll(Duration::ZERO);
    }
    filler.flush(Duration::from_secs(30)).unwrap();
    let config = |group: String| {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", cluster.bootstrap_servers())
            .set("group.id", group)
            .set("enable.auto.commit", "false");
        c
    };
    let assignment = || {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("consume", 0, Offset::Beginning).unwrap();
        tpl
    };
    let sdk = Sdk::with_telemetry(Telemetry::unshipped(SdkConfig::new("bench")));
    // The same wrapper with drop accounting off: what counting costs on its own.
    let uncounted = Sdk::with_telemetry(Telemetry::unshipped(SdkConfig {
        count_deliveries: false,
        ..SdkConfig::new("bench")
    }));
    let (mut b, mut t, mut u) = (Tally::default(), Tally::default(), Tally::default());
    for round in 0..ROUNDS {
        let bare: BaseConsumer = config(format!("bare-{round}")).create().unwrap();
        bare.assign(&assignment()).unwrap();
        let traced = sdk.base_consumer(&config(format!("traced-{round}"))).unwrap();
        traced.assign(&assignment()).unwrap();
        let plain = uncounted.base_consumer(&config(format!("uncounted-{round}"))).unwrap();
        plain.assign(&assignment()).unwrap();
        // Connecting and the first fetches are not what is measured.
        let mut warm = 0;
        while warm < WARMUP {
            warm += usize::from(matches!(bare.poll(Duration::from_millis(100)), Some(Ok(_))));
        }
        for c in [&traced, &plain] {
            let mut warm = 0;
            while warm < WARMUP {
                warm += usize::from(matches!(c.poll(Duration::from_millis(100)), Some(Ok(_))));
            }
        }
        let run_bare = |tally: &mut Tally| {
            tally.run(|| {
                let mut n = 0;
                while n < BATCH {
                    if let Some(Ok(_)) = bare.poll(Duration::from_millis(100)) {
                        n += 1;
                    }
                }
            });
        };
        let run_traced = |c: &streamsight_sdk::TracedBaseConsumer, tally: &mut Tally| {
            tally.run(|| {
                let mut n = 0;
                while n < BATCH {
                    if let Some(Ok(_)) = c.poll(Duration::from_millis(100)) {
                        n += 1;
                    }
                }
            });
        };
        // The order rotates every round.
        for step in 0..3 {
            match (round + step) % 3 {
                0 => run_bare(&mut b),
                1 => run_traced(&traced, &mut t),
                _ => run_traced(&plain, &mut u),
            }
        }
        sdk.telemetry().take_payload();
        uncounted.telemetry().take_payload();
    }
    report("consume", &b, &t);
    report_as("consume (drop accounting)", "traced without counting", &u, &t);
}

fn main() {
    // `cargo test --benches` runs benches with --test (or nothing): keep that quick.
    if std::env::args().any(|a| a == "--test") {
        return;
    }
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("produce", 1, 1).unwrap();
    cluster.create_topic("consume", 1, 1).unwrap();
    produce(&cluster);
    consume(&cluster);
}
