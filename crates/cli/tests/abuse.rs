//! The abuse suite: `streamsight serve` (the real binary, SQLite store, polling
//! librdkafka's mock cluster) attacked as a hostile client would. For every
//! attack: the answer, peak RSS, disk growth, the slowest `/healthz` answer
//! during it, and valid points sent alongside that were lost (must be 0). Then a
//! restart must come back with the valid data. `--nocapture` prints the table
//! RELIABILITY.md records.
#![allow(clippy::unwrap_used)]

mod support;

use rdkafka::mocking::MockCluster;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use streamsight_wire::dsm::payload::{
    Backlog, Bucket, ConsumedCount, Delivery, FailedSends, Payload, ProducedCount, encode,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bounds the whole run must stay under (RELIABILITY.md states them).
const MAX_RSS_MB: u64 = 400;
const MAX_DISK_MB: u64 = 64;
const MAX_HEALTHZ_MS: u128 = 100;

use streamsight_testkit::now_ms;

use streamsight_testkit::process::{dir_bytes, rss_kib};

/// Asks `/healthz` every 20 ms on its own thread and keeps the slowest answer.
struct HealthProbe {
    stop: Arc<AtomicBool>,
    slowest_us: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HealthProbe {
    fn start(api: &str) -> Self {
        let addr = api.trim_start_matches("http://").to_owned();
        let stop = Arc::new(AtomicBool::new(false));
        let slowest_us = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(AtomicU64::new(0));
        let (s, slow, fail) = (stop.clone(), slowest_us.clone(), failures.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let started = Instant::now();
                let ok = (|| {
                    let mut c = TcpStream::connect(&addr).ok()?;
                    c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
                    c.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                        .ok()?;
                    let mut answer = String::new();
                    c.read_to_string(&mut answer).ok()?;
                    answer.starts_with("HTTP/1.1 200").then_some(())
                })();
                let us = started.elapsed().as_micros() as u64;
                slow.fetch_max(us, Ordering::Relaxed);
                if ok.is_none() {
                    fail.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Self {
            stop,
            slowest_us,
            failures,
            thread: Some(thread),
        }
    }

    /// (slowest answer in ms, failed probes) since the last call.
    fn take(&self) -> (f64, u64) {
        (
            self.slowest_us.swap(0, Ordering::Relaxed) as f64 / 1000.0,
            self.failures.swap(0, Ordering::Relaxed),
        )
    }
}

impl Drop for HealthProbe {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Target {
    intake: String,
    api: String,
    pid: u32,
    dir: std::path::PathBuf,
    client: reqwest::Client,
    /// The valid workload's produce offset, raised alongside every attack.
    valid_offset: i64,
}

fn bucket(backlogs: Vec<Backlog>) -> Bucket {
    let ns = (now_ms() as u64) * 1_000_000;
    Bucket {
        start: ns - ns % 10_000_000_000,
        duration: 10_000_000_000,
        stats: vec![],
        backlogs,
    }
}

fn backlog(tags: &[&str], value: i64) -> Backlog {
    Backlog {
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        value,
    }
}

impl Target {
    async fn post(&self, body: Vec<u8>, content_type: Option<&str>) -> u16 {
        let mut req = self
            .client
            .post(format!("{}/v0.1/pipeline_stats", self.intake))
            .header("Content-Encoding", "gzip")
            .body(body);
        if let Some(t) = content_type {
            req = req.header("Content-Type", t);
        }
        match req.send().await {
            Ok(r) => r.status().as_u16(),
            Err(_) => 0,
        }
    }

    async fn send(&self, payload: &Payload) -> u16 {
        self.post(encode(payload), Some("application/msgpack")).await
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let r = self.client.get(format!("{}{path}", self.api)).send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// A valid point on an unpolled cluster, as a real tracer sends it.
    async fn valid(&mut self) {
        self.valid_offset += 10;
        let p = Payload {
            service: "checkout".into(),
            stats: vec![bucket(vec![
                backlog(
                    &[
                        "type:kafka_produce",
                        "topic:orders",
                        "partition:0",
                        "kafka_cluster_id:real",
                    ],
                    self.valid_offset,
                ),
                backlog(
                    &[
                        "type:kafka_commit",
                        "consumer_group:billing",
                        "topic:orders",
                        "partition:0",
                        "kafka_cluster_id:real",
                    ],
                    self.valid_offset / 2,
                ),
            ])],
            ..Payload::default()
        };
        assert_eq!(self.send(&p).await, 202, "a valid payload was refused");
    }

    /// The valid workload's row as the API reports it: (end offset, committed).
    async fn valid_row(&self) -> (Option<i64>, Option<i64>) {
        let (_, lag) = self.get("/api/v1/lag?cluster=real&group=billing").await;
        let row = &lag["rows"][0];
        (row["end_offset"].as_i64(), row["committed_offset"].as_i64())
    }
}

struct Report {
    rows: Vec<String>,
    disk_before: u64,
}

impl Report {
    #[allow(clippy::too_many_arguments)]
    async fn row(&mut self, t: &mut Target, probe: &HealthProbe, attack: &str, sent: &str, answer: String) {
        let during = probe.take();
        // Valid data sent during the attack must all be there.
        t.valid().await;
        let row = t.valid_row().await;
        let lost = if row == (Some(t.valid_offset + 1), Some(t.valid_offset / 2)) {
            0
        } else {
            1
        };
        let (rss, peak) = rss_kib(t.pid);
        let disk = dir_bytes(&t.dir);
        let after = probe.take();
        let (slowest, failed) = (during.0.max(after.0), during.1 + after.1);
        self.rows.push(format!(
            "| {attack} | {sent} | {answer} | {} MB | {} MB | {:+.1} MB | {slowest:.1} ms{} | {lost} |",
            rss / 1024,
            peak / 1024,
            (disk as f64 - self.disk_before as f64) / 1e6,
            if failed > 0 {
                format!(" ({failed} failed)")
            } else {
                String::new()
            },
        ));
        assert_eq!(
            lost, 0,
            "{attack}: valid data lost: {row:?} after offset {}",
            t.valid_offset
        );
        assert!(peak / 1024 < MAX_RSS_MB, "{attack}: peak RSS {} MB", peak / 1024);
        assert!(disk < MAX_DISK_MB << 20, "{attack}: disk {disk} bytes");
        assert_eq!(failed, 0, "{attack}: /healthz failed during the attack");
        assert!(
            (slowest as u128) < MAX_HEALTHZ_MS,
            "{attack}: /healthz took {slowest} ms during the attack"
        );
        self.disk_before = disk;
    }
}

/// Counts answers by status: "413 ×20".
fn tally(codes: &[u16]) -> String {
    let mut counts = std::collections::BTreeMap::new();
    for c in codes {
        *counts.entry(*c).or_insert(0) += 1;
    }
    counts
        .iter()
        .map(|(c, n)| format!("{c} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

use streamsight_testkit::gzip;

/// Opens `n` connections that each send half a request (`partial`) and wait;
/// returns how long until the server had closed every one of them.
async fn half_requests(intake: &str, n: usize, partial: &'static [u8]) -> (Duration, usize) {
    let addr = intake.trim_start_matches("http://").to_owned();
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..n {
        let addr = addr.clone();
        tasks.spawn(async move {
            let Ok(mut s) = tokio::net::TcpStream::connect(&addr).await else {
                return false;
            };
            let _ = s.write_all(partial).await;
            let mut buf = Vec::new();
            // The server ends it: a 503 at once, or 408 / a close at its deadline.
            let answered = tokio::time::timeout(Duration::from_secs(60), s.read_to_end(&mut buf)).await;
            answered.is_ok()
        });
    }
    let mut closed = 0;
    while let Some(r) = tasks.join_next().await {
        closed += usize::from(r.unwrap_or(false));
    }
    (started.elapsed(), closed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_collector_survives_hostile_clients() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("payments", 1, 1).unwrap();
    support::seed_cluster(&cluster.bootstrap_servers(), "payments", &[100], "ledger", &[40]);
    let dir = std::env::temp_dir().join(format!("streamsight-abuse-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let toml = format!(
        r#"[serve]
max_storage_bytes = {cap}
[serve.limits]
header_timeout = "2s"
request_timeout = "3s"
[[serve.clusters]]
name = "prod"
bootstrap = ["{bootstrap}"]
poll_interval = "300ms"
groups = ["ledger"]
"#,
        cap = 32 << 20,
        bootstrap = cluster.bootstrap_servers()
    );
    let storage = format!("sqlite://{}/s.db", dir.display());
    let (guard, intake, api) = support::serve_with("abuse", &toml, &storage);
    let mut t = Target {
        intake,
        api,
        pid: guard.0.id(),
        dir: dir.clone(),
        client: reqwest::Client::builder().pool_max_idle_per_host(64).build().unwrap(),
        valid_offset: 1_000,
    };
    t.valid().await;
    let polled = async |t: &Target| {
        let (_, lag) = t.get("/api/v1/lag?cluster=prod&group=ledger").await;
        lag["rows"][0]["lag_messages"].as_i64()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while polled(&t).await != Some(60) {
        assert!(Instant::now() < deadline, "the poller never reported lag 60");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let probe = HealthProbe::start(&t.api);
    let mut report = Report {
        rows: Vec::new(),
        disk_before: dir_bytes(&dir),
    };
    let started = Instant::now();

    // 1. A million empty stats points in 1 KB, twenty times.
    let raw = streamsight_testkit::dsm::empty_stats_points(1_000_000);
    let body = gzip(&raw);
    let mut codes = Vec::new();
    for _ in 0..20 {
        codes.push(t.post(body.clone(), Some("application/msgpack")).await);
    }
    assert!(codes.iter().all(|&c| c == 413), "{codes:?}");
    report
        .row(
            &mut t,
            &probe,
            "empty-point bomb",
            &format!("20 × {} B gzip, 10⁶ points", body.len()),
            tally(&codes),
        )
        .await;

    // 2. A gzip bomb: 64 MiB of zeros in ~64 KB, ten at once.
    let bomb = gzip(&vec![0u8; 65 << 20]);
    let codes = t.post_all(vec![bomb.clone(); 10]).await;
    // Refused whole either way: over the limit, or (decoded one at a time on a
    // slow machine) past the request deadline.
    assert!(codes.iter().all(|&c| c == 413 || c == 408), "{codes:?}");
    report
        .row(
            &mut t,
            &probe,
            "gzip bomb",
            &format!("10 × {} KB → 65 MiB", bomb.len() / 1024),
            tally(&codes),
        )
        .await;

    // 3. Partition ids that would size arrays, then Burrow's topic handler.
    let mut codes = Vec::new();
    for partition in [100_000_000, 2_147_483_646] {
        let p = Payload {
            stats: vec![bucket(vec![backlog(
                &[
                    "type:kafka_produce",
                    "topic:t",
                    &format!("partition:{partition}"),
                    "kafka_cluster_id:evil",
                ],
                5,
            )])],
            ..Payload::default()
        };
        codes.push(t.send(&p).await);
        let (status, _) = t.get("/v3/kafka/evil/topic/t").await;
        codes.push(status);
    }
    let (_, metrics) = t.get_text("/metrics").await;
    assert!(
        metrics.contains("streamsight_limited_total{what=\"partition_id\"} 2"),
        "{metrics}"
    );
    report
        .row(
            &mut t,
            &probe,
            "huge partition ids",
            "partition 10⁸ and 2³¹−2, then Burrow GET",
            tally(&codes),
        )
        .await;

    // 4. A produce offset of 2^62 on the polled cluster, also as text/plain.
    let wild = Payload {
        stats: vec![bucket(vec![backlog(
            &[
                "type:kafka_produce",
                "topic:payments",
                "partition:0",
                "kafka_cluster_id:prod",
            ],
            1 << 62,
        )])],
        ..Payload::default()
    };
    let codes = vec![
        t.post(encode(&wild), Some("text/plain")).await,
        t.post(encode(&wild), None).await,
        t.send(&wild).await,
    ];
    assert_eq!(codes, [415, 415, 202]);
    assert_eq!(polled(&t).await, Some(60), "lag stays at broker truth");
    report
        .row(
            &mut t,
            &probe,
            "poisoned end offset",
            "offset 2⁶² for a polled partition",
            tally(&codes),
        )
        .await;

    // 5. Counts and windows at the integer limits.
    let extreme = Payload {
        failed_sends: vec![FailedSends {
            topic: "orders".into(),
            partition: 0,
            error: "x".into(),
            count: u64::MAX,
            cluster: "real".into(),
            window_ms: i64::MAX,
            trace_ids: vec![],
            recovered: true,
        }],
        delivery: Delivery {
            cluster: "real".into(),
            produced: vec![ProducedCount {
                topic: "orders".into(),
                partition: 0,
                window_ms: now_ms(),
                count: u64::MAX,
                first_offset: 0,
                last_offset: i64::MAX,
            }],
            consumed: vec![ConsumedCount {
                group: "billing".into(),
                topic: "orders".into(),
                partition: 0,
                window_ms: i64::MIN,
                received: u64::MAX,
                failed: u64::MAX,
                dead_lettered: u64::MAX,
                trace_ids: vec![],
            }],
            ..Delivery::default()
        },
        ..Payload::default()
    };
    let codes = vec![t.send(&extreme).await, t.send(&extreme).await];
    assert!(codes.iter().all(|&c| c == 202), "{codes:?}");
    let (status, _) = t.get("/api/v1/deliveries").await;
    assert_eq!(status, 200);
    report
        .row(
            &mut t,
            &probe,
            "extreme numbers",
            "counts 2⁶⁴−1, windows i64::MIN/MAX",
            tally(&codes),
        )
        .await;

    // 6. 100,000 new topics and 100,000 new groups (built first: the probe
    //    measures the server, not this process encoding).
    let mut bodies = Vec::new();
    for chunk in 0..5 {
        let topics = (0..20_000)
            .map(|i| {
                backlog(
                    &[
                        "type:kafka_produce",
                        &format!("topic:flood-{chunk}-{i}"),
                        "partition:0",
                        "kafka_cluster_id:flood",
                    ],
                    1,
                )
            })
            .collect();
        bodies.push(encode(&Payload {
            stats: vec![bucket(topics)],
            ..Payload::default()
        }));
        let groups = (0..20_000)
            .map(|i| {
                backlog(
                    &[
                        "type:kafka_commit",
                        &format!("consumer_group:flood-{chunk}-{i}"),
                        "topic:orders",
                        "partition:0",
                        "kafka_cluster_id:real",
                    ],
                    1,
                )
            })
            .collect();
        bodies.push(encode(&Payload {
            stats: vec![bucket(groups)],
            ..Payload::default()
        }));
    }
    probe.take();
    let mut codes = Vec::new();
    for body in bodies {
        codes.push(t.post(body, Some("application/msgpack")).await);
    }
    assert!(codes.iter().all(|&c| c == 202), "{codes:?}");
    let (_, metrics) = t.get_text("/metrics").await;
    let limited = |what: &str| {
        streamsight_testkit::http::sample(&metrics, &format!("streamsight_limited_total{{what=\"{what}\"}}"))
            .map_or(0, |v| v as u64)
    };
    assert!(limited("topics") >= 80_000, "{}", limited("topics"));
    assert!(limited("groups") >= 80_000, "{}", limited("groups"));
    report
        .row(
            &mut t,
            &probe,
            "name flood",
            "10⁵ topics + 10⁵ groups in 10 payloads",
            tally(&codes),
        )
        .await;

    // 7. 3,000 connections that send half a request's headers, then 300 that
    //    send headers and half a body.
    let (took, closed) = half_requests(
        &t.intake,
        3_000,
        b"POST /v0.1/pipeline_stats HTTP/1.1\r\nHost: x\r\nContent-Le",
    )
    .await;
    assert_eq!(closed, 3_000);
    assert!(took < Duration::from_secs(10), "held for {took:?}");
    let (took_body, closed_body) = half_requests(
        &t.intake,
        300,
        b"POST /v0.1/pipeline_stats HTTP/1.1\r\nHost: x\r\nContent-Type: application/msgpack\r\nContent-Length: 1000\r\n\r\nabc",
    )
    .await;
    assert_eq!(closed_body, 300);
    report
        .row(
            &mut t,
            &probe,
            "slow clients",
            "3,000 half headers; 300 half bodies",
            format!(
                "all closed in {:.1} s; {:.1} s",
                took.as_secs_f64(),
                took_body.as_secs_f64()
            ),
        )
        .await;

    // 8. A flood of valid-looking payloads, 64 at once.
    let rounds: Vec<Vec<Vec<u8>>> = (0..20)
        .map(|round| {
            (0..64)
                .map(|i| {
                    let backlogs = (0..500)
                        .map(|k| {
                            backlog(
                                &[
                                    "type:kafka_produce",
                                    "topic:busy",
                                    &format!("partition:{}", k % 50),
                                    "kafka_cluster_id:busy",
                                ],
                                (round * 64 + i) * 1_000 + k,
                            )
                        })
                        .collect();
                    encode(&Payload {
                        stats: vec![bucket(backlogs)],
                        ..Payload::default()
                    })
                })
                .collect()
        })
        .collect();
    probe.take();
    let mut codes = Vec::new();
    for bodies in rounds {
        codes.extend(t.post_all(bodies).await);
    }
    assert!(codes.iter().all(|&c| c == 202 || c == 503), "{}", tally(&codes));
    report
        .row(
            &mut t,
            &probe,
            "request flood",
            "1,280 payloads × 500 points, 64 in flight",
            tally(&codes),
        )
        .await;
    let attack_time = started.elapsed();
    drop(probe);

    // A restart comes back with the valid data.
    let before = t.valid_row().await;
    drop(guard);
    let (guard, intake, api) = support::serve_with("abuse", &toml, &storage);
    t.intake = intake;
    t.api = api;
    t.pid = guard.0.id();
    assert_eq!(t.valid_row().await, before, "the restart lost valid data");
    let (rss, _) = rss_kib(t.pid);

    println!("\n| attack | sent | answers | RSS after | peak RSS | disk | slowest /healthz | valid points lost |");
    println!("|---|---|---|---|---|---|---|---|");
    for row in &report.rows {
        println!("{row}");
    }
    println!(
        "\nattacks took {:.1} s; restarted in time for the first query, RSS {} MB after replay; disk {:.1} MB",
        attack_time.as_secs_f64(),
        rss / 1024,
        dir_bytes(&dir) as f64 / 1e6
    );
    drop(guard);
    std::fs::remove_dir_all(&dir).unwrap();
}

impl Target {
    async fn get_text(&self, path: &str) -> (u16, String) {
        let r = self.client.get(format!("{}{path}", self.api)).send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    /// Sends every body at once (msgpack, gzipped); the answers' statuses.
    async fn post_all(&self, bodies: Vec<Vec<u8>>) -> Vec<u16> {
        let mut tasks = tokio::task::JoinSet::new();
        for body in bodies {
            let req = self
                .client
                .post(format!("{}/v0.1/pipeline_stats", self.intake))
                .header("Content-Type", "application/msgpack")
                .header("Content-Encoding", "gzip")
                .body(body);
            tasks.spawn(async move { req.send().await.map_or(0, |r| r.status().as_u16()) });
        }
        let mut codes = Vec::new();
        while let Some(c) = tasks.join_next().await {
            codes.push(c.unwrap_or(0));
        }
        codes
    }
}

/// A store at its size cap answers 503 `storage_failed` (with `Retry-After`)
/// for what does not fit, keeps what it had, and takes writes again as soon as
/// they fit: no restart, no operator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_store_refuses_with_503_and_recovers_by_itself() {
    let dir = std::env::temp_dir().join(format!("streamsight-full-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let storage = format!("sqlite://{}/s.db", dir.display());
    let (guard, intake, api) = support::serve_with("full", "[serve]\nmax_storage_bytes = 1048576\n", &storage);
    let mut t = Target {
        intake,
        api,
        pid: guard.0.id(),
        dir: dir.clone(),
        client: reqwest::Client::new(),
        valid_offset: 1_000,
    };
    t.valid().await;
    // One batch of ~4 MB: more than the store may hold at all.
    let long = "x".repeat(200);
    let huge = Payload {
        stats: vec![bucket(
            (0..20_000)
                .map(|i| {
                    backlog(
                        &[
                            "type:kafka_produce",
                            &format!("topic:{long}-{i}"),
                            "partition:0",
                            "kafka_cluster_id:big",
                        ],
                        1,
                    )
                })
                .collect(),
        )],
        ..Payload::default()
    };
    let resp = t
        .client
        .post(format!("{}/v0.1/pipeline_stats", t.intake))
        .header("Content-Type", "application/msgpack")
        .header("Content-Encoding", "gzip")
        .body(encode(&huge))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 503);
    assert_eq!(resp.headers()["retry-after"], "1");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"], "storage_failed", "{body}");
    // Nothing of it was applied; what was stored stays, and writes go on.
    let (_, topics) = t.get("/v3/kafka/big/topic").await;
    assert_ne!(topics["error"], false, "{topics}");
    let before = t.valid_offset;
    t.valid().await;
    t.valid().await;
    assert_eq!(t.valid_row().await.0, Some(before + 21));
    assert!(dir_bytes(&dir) < 4 << 20, "{} bytes", dir_bytes(&dir));
    drop(guard);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `memory://` keeps nothing it could replay: 16,000 payloads leave RSS where
/// it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_storage_does_not_grow_with_what_it_cannot_replay() {
    let (guard, intake, api) = support::serve_with("memory", "", "memory://");
    let t = Target {
        intake,
        api,
        pid: guard.0.id(),
        dir: std::env::temp_dir(),
        client: reqwest::Client::new(),
        valid_offset: 0,
    };
    let body = |n: i64| {
        encode(&Payload {
            stats: vec![bucket(
                (0..50)
                    .map(|k| {
                        backlog(
                            &["type:kafka_produce", "topic:t", &format!("partition:{k}")],
                            n * 100 + k,
                        )
                    })
                    .collect(),
            )],
            ..Payload::default()
        })
    };
    // 64 in flight at a time, 16,000 in all.
    let mut settled = 0;
    for round in 0..250 {
        let bodies: Vec<_> = (0..64).map(|i| body(64 * round + i)).collect();
        let codes = t.post_all(bodies).await;
        assert!(codes.iter().all(|&c| c == 202), "{}", tally(&codes));
        if round == 15 {
            settled = rss_kib(t.pid).0;
        }
    }
    let (after, _) = rss_kib(t.pid);
    println!(
        "memory:// RSS after 1,000 payloads {} MB, after 16,000 {} MB",
        settled / 1024,
        after / 1024
    );
    assert!(after < settled + 32 * 1024, "RSS grew from {settled} to {after} KiB");
    drop(guard);
}
