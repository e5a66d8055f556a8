//! The acknowledged-write checker (Jepsen's idea, bounded): clients post
//! numbered points to random nodes while a nemesis `kill -9`s and restarts
//! nodes, pauses them (SIGSTOP) and, on a Kafka log, kills the broker at
//! random. When the nemesis stops and everything is back, every point
//! answered 2xx must be in the final state exactly once, and no point at all
//! more than once. A failing run prints the lost and doubled points.
//!
//! A point is one failed send, counted: point `i` is the failed-send count 1 of
//! topic `chk-{i / 15}` with error `p{i % 15}`, so the final state holds a
//! counter per point (`GET /api/v1/topics/chk/chk-K`, `failures.by_error`):
//! 0 is a lost point, 2 a doubled one. Failed-send counts add up, so a replay
//! or a snapshot that applies a record twice shows, where an offset would not.
//!
//! A third form takes the `kafka://` log's broker away for a whole minute
//! (`STREAMSIGHT_OUTAGE_SECONDS`) under intake: nothing acknowledged while it
//! is down, readiness saying so, recovery without restarting a node.
//!
//! Two random forms: one node on SQLite restarted at random, and three nodes sharding
//! one `kafka://` log on tansu with nodes and the broker killed (not the
//! broker with `STREAMSIGHT_CHECKER_BROKER=0`) and paused (not with
//! `STREAMSIGHT_CHECKER_PAUSE=0`) at random; with
//! `STREAMSIGHT_CHECKER_SKEW` set, one node's clock runs 3 s ahead of the
//! others' (libfaketime). Each
//! runs `STREAMSIGHT_CHECKER_SECONDS` (120 in the test suite; at most 600) of
//! traffic and faults; the seed is printed and `STREAMSIGHT_CHECKER_SEED`
//! replays the nemesis's choices.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

mod support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use streamsight_testkit::{Tansu, Watchdog, eventually, free_port, now_ms};
use support::Guard;
use support::dsm::{Payload, failed_sends};

/// Points per topic: under the 16 error names a topic keeps before "other".
const PER_TOPIC: u64 = 15;
const CLUSTER: &str = "chk";
const CLIENTS: usize = 4;

/// The whole number in variable `name`, if it is set: a value that is not
/// one fails the run naming it, rather than running with the default.
fn number(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    let parsed = value.parse();
    assert!(parsed.is_ok(), "{name} must be a whole number, not {value:?}");
    parsed.ok()
}

/// Seconds in variable `name` (`default` when unset), within `range`: the
/// checker is bounded to 10 minutes.
fn seconds_in(name: &str, default: u64, range: std::ops::RangeInclusive<u64>) -> u64 {
    let secs = number(name).unwrap_or(default);
    assert!(
        range.contains(&secs),
        "{name} must be {} to {}, not {secs}",
        range.start(),
        range.end()
    );
    secs
}

fn seconds() -> u64 {
    seconds_in("STREAMSIGHT_CHECKER_SECONDS", 120, 10..=600)
}

/// xorshift64*: the nemesis's choices, replayable from the printed seed.
struct Rng(u64);

impl Rng {
    fn seeded() -> Rng {
        let seed = number("STREAMSIGHT_CHECKER_SEED").unwrap_or_else(streamsight_testkit::now_ns);
        eprintln!("checker: seed {seed} (STREAMSIGHT_CHECKER_SEED={seed} replays the nemesis's choices)");
        // xorshift never leaves 0.
        Rng(seed | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// In `lo..hi` milliseconds.
    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next() % (hi - lo))
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn topic_of(i: u64) -> String {
    format!("chk-{}", i / PER_TOPIC)
}

fn error_of(i: u64) -> String {
    format!("p{}", i % PER_TOPIC)
}

fn point(i: u64) -> Payload {
    let mut f = failed_sends(&topic_of(i), 0, &error_of(i), 1, now_ms() / 60_000 * 60_000);
    f.cluster = CLUSTER.into();
    Payload {
        env: "prod".into(),
        service: format!("client-{}", i % CLIENTS as u64),
        lang: "rust".into(),
        failed_sends: vec![f],
        ..Default::default()
    }
}

/// What a client was told of a point.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Told {
    /// 2xx: it must be there, once.
    Acknowledged,
    /// An error status: it may be there (a failed append can still have
    /// reached the log), but not twice.
    Refused(u16),
    /// No answer (a node killed mid-request): the same.
    NoAnswer,
}

/// The nodes' addresses as they are now: `None` while a node is down.
#[derive(Default)]
struct Live {
    intakes: Vec<Option<String>>,
    apis: Vec<Option<String>>,
}

/// One node: its process while it runs.
struct Node {
    guard: Option<Guard>,
}

/// One answer a client got, when: what the outage form judges by time.
#[derive(Clone, Debug)]
struct Answer {
    sent: Instant,
    answered: Instant,
    /// `None`: no answer.
    status: Option<u16>,
    retry_after: bool,
}

type Answers = Arc<Mutex<Vec<Answer>>>;

/// Clients posting numbered points to random live nodes until `stop`; every
/// answer is also kept with its times.
fn clients(
    live: Arc<Mutex<Live>>,
    stop: Arc<AtomicBool>,
    told: Arc<Mutex<BTreeMap<u64, Told>>>,
) -> (Vec<tokio::task::JoinHandle<()>>, Answers) {
    let next = Arc::new(AtomicU64::new(0));
    let answers = Answers::default();
    let handles = (0..CLIENTS)
        .map(|c| {
            let (live, stop, told, next) = (live.clone(), stop.clone(), told.clone(), next.clone());
            let answers = answers.clone();
            tokio::spawn(async move {
                let client = reqwest::Client::builder()
                    .timeout(Duration::from_secs(10))
                    .build()
                    .unwrap();
                let mut turn = c;
                while !stop.load(Ordering::Relaxed) {
                    let intake = {
                        let live = live.lock().unwrap();
                        let up: Vec<&String> = live.intakes.iter().flatten().collect();
                        turn += 1;
                        (!up.is_empty()).then(|| up[turn % up.len()].clone())
                    };
                    let Some(intake) = intake else {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    };
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let body = streamsight_wire::dsm::payload::encode(&point(i));
                    let sent = Instant::now();
                    let answer = client
                        .post(format!("{intake}/v0.1/pipeline_stats"))
                        .header("Content-Type", "application/msgpack")
                        .header("Content-Encoding", "gzip")
                        .body(body)
                        .send()
                        .await;
                    let outcome = match &answer {
                        Ok(r) if r.status().is_success() => Told::Acknowledged,
                        Ok(r) => Told::Refused(r.status().as_u16()),
                        Err(_) => Told::NoAnswer,
                    };
                    answers.lock().unwrap().push(Answer {
                        sent,
                        answered: Instant::now(),
                        status: answer.as_ref().ok().map(|r| r.status().as_u16()),
                        retry_after: answer
                            .as_ref()
                            .is_ok_and(|r| r.headers().contains_key(reqwest::header::RETRY_AFTER)),
                    });
                    told.lock().unwrap().insert(i, outcome);
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
            })
        })
        .collect();
    (handles, answers)
}

/// Each point's count in the final state, read through `api`: one request
/// per topic, forwarded to the node holding its shard.
async fn final_counts(client: &reqwest::Client, api: &str, points: u64) -> BTreeMap<u64, u64> {
    let mut counts = BTreeMap::new();
    for k in 0..points.div_ceil(PER_TOPIC) {
        let url = format!("{api}/api/v1/topics/{CLUSTER}/chk-{k}");
        let topic = eventually(60, &format!("{url} to answer"), async || {
            let (status, v) = streamsight_testkit::http::get(client, &url).await;
            match status {
                200 => Some(v),
                404 => Some(Value::Null),
                _ => None,
            }
        })
        .await;
        for (error, n) in topic["failures"]["by_error"].as_object().into_iter().flatten() {
            let Some(e) = error.strip_prefix('p').and_then(|e| e.parse::<u64>().ok()) else {
                panic!("chk-{k} holds an error no client sent: {error} ({n})");
            };
            counts.insert(k * PER_TOPIC + e, n.as_u64().unwrap());
        }
    }
    counts
}

/// Every acknowledged point once, no point twice: panics naming the lost and
/// doubled points.
fn check(form: &str, told: &BTreeMap<u64, Told>, counts: &BTreeMap<u64, u64>, faults: &[String]) {
    let acknowledged = told.values().filter(|t| **t == Told::Acknowledged).count();
    let refused = told.values().filter(|t| matches!(t, Told::Refused(_))).count();
    let unanswered = told.values().filter(|t| **t == Told::NoAnswer).count();
    let lost: Vec<u64> = told
        .iter()
        .filter(|(i, t)| **t == Told::Acknowledged && counts.get(i).copied().unwrap_or(0) == 0)
        .map(|(i, _)| *i)
        .collect();
    let doubled: Vec<(u64, u64)> = counts.iter().filter(|(_, n)| **n > 1).map(|(i, n)| (*i, *n)).collect();
    let stray: Vec<u64> = counts.keys().filter(|i| !told.contains_key(i)).copied().collect();
    let kept_unacknowledged = told
        .iter()
        .filter(|(i, t)| **t != Told::Acknowledged && counts.contains_key(i))
        .count();
    eprintln!(
        "checker ({form}): {} points, {acknowledged} acknowledged, {refused} refused, {unanswered} unanswered \
         ({kept_unacknowledged} of those two in the final state); faults: {}; lost {}, doubled {}",
        told.len(),
        faults.len(),
        lost.len(),
        doubled.len()
    );
    let refusals: BTreeMap<u16, usize> = told.values().fold(BTreeMap::new(), |mut m, t| {
        if let Told::Refused(s) = t {
            *m.entry(*s).or_default() += 1;
        }
        m
    });
    eprintln!("checker ({form}): refusals by status {refusals:?}; faults in order: {faults:?}");
    assert!(
        acknowledged > 0,
        "no point was acknowledged: the checker checked nothing"
    );
    assert!(
        lost.is_empty() && doubled.is_empty() && stray.is_empty(),
        "checker ({form}): acknowledged points lost: {} {:?}{}; points counted more than once (point, count): {} \
         {:?}{}; points nobody sent: {stray:?}",
        lost.len(),
        &lost[..lost.len().min(50)],
        if lost.len() > 50 { " …" } else { "" },
        doubled.len(),
        &doubled[..doubled.len().min(50)],
        if doubled.len() > 50 { " …" } else { "" },
    );
}

/// libfaketime (Debian's `faketime`).
const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// The node whose clock can run 3 s ahead of the others' in the sharded form
/// (NTP keeps clocks within a second; a node that lost it drifts).
const SKEWED: usize = 2;

fn start_node(storage: &str, live: &Mutex<Live>, n: usize) -> Node {
    start_node_with(storage, live, n, &[])
}

/// Whether node [`SKEWED`]'s clock runs ahead: with `STREAMSIGHT_CHECKER_SKEW`
/// set. Not in the suite: with it, whole topics of one shard were counted
/// twice (RELIABILITY.md, "Faults").
fn skewed() -> bool {
    std::env::var_os("STREAMSIGHT_CHECKER_SKEW").is_some()
}

/// Node `n` of the sharded form: node [`SKEWED`]'s clock 3 s ahead when [`skewed`].
fn start_sharded_node(storage: &str, live: &Mutex<Live>, n: usize) -> Node {
    if !(skewed() && n == SKEWED) {
        return start_node(storage, live, n);
    }
    assert!(
        std::path::Path::new(FAKETIME).exists(),
        "{FAKETIME} is missing: install Debian's faketime"
    );
    start_node_with(storage, live, n, &[("LD_PRELOAD", FAKETIME), ("FAKETIME", "+3")])
}

fn start_node_with(storage: &str, live: &Mutex<Live>, n: usize, env: &[(&str, &str)]) -> Node {
    let (guard, intake, api) = support::serve_env(storage, env);
    let mut live = live.lock().unwrap();
    live.intakes[n] = Some(intake);
    live.apis[n] = Some(api);
    Node { guard: Some(guard) }
}

fn kill_node(node: &mut Node, live: &Mutex<Live>, n: usize) {
    {
        let mut live = live.lock().unwrap();
        live.intakes[n] = None;
        live.apis[n] = None;
    }
    if let Some(mut guard) = node.guard.take() {
        let _ = guard.0.kill(); // SIGKILL: no shutdown path runs
        let _ = guard.0.wait();
    }
}

/// tansu on `port` and the data in `dir`, started again until it answers a
/// fresh client's Metadata; how many starts that took. tansu 0.6.0 started
/// after a `kill -9` under load has been seen to close every connection, a
/// fresh confluent-kafka client's too, until it is started again (while
/// another tansu on a copy of its files answered at once): the broker's
/// fault, not the collector's, so the nemesis heals it as an operator would.
fn start_serving_broker(port: u16, dir: &std::path::Path) -> (Tansu, u32) {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    for tries in 1..=5 {
        let mut broker = Tansu::start_on(port, "sqlite://tansu.db", dir, &[]);
        let client: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &broker.bootstrap)
            .create()
            .unwrap();
        if client.fetch_metadata(None, Duration::from_secs(10)).is_ok() {
            return (broker, tries);
        }
        eprintln!("checker: the broker started again closes every connection: starting it once more");
        broker.kill();
    }
    panic!("tansu answered no Metadata after 5 starts on {}", dir.display());
}

/// How far ahead of this process's clock node `n` dates its announcements,
/// as node 0 reads them from the log (ms).
async fn skew_of(client: &reqwest::Client, live: &Mutex<Live>, n: usize) -> i64 {
    let (reader, api) = {
        let live = live.lock().unwrap();
        (live.apis[0].clone().unwrap(), live.apis[n].clone().unwrap())
    };
    eventually(60, &format!("{reader} to read node {n}'s announcement"), async || {
        let nodes = streamsight_testkit::http::get_json(client, &format!("{reader}/api/v1/nodes")).await;
        let peer = nodes["peers"]
            .as_array()?
            .iter()
            .find(|p| p["api"] == api.as_str())?
            .clone();
        Some(peer["at_ms"].as_i64()? - now_ms())
    })
    .await
}

/// Sends `SIG{name}` to the node's process.
fn signal(node: &Node, name: &str) {
    if let Some(guard) = &node.guard {
        guard.signal(name);
    }
}

async fn ready(client: &reqwest::Client, api: &str) {
    let url = format!("{api}/readyz");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let (status, body) = streamsight_testkit::http::get(client, &url).await;
        if status == 200 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{url} not ready within 90 s: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Once everything is back: every node ready and answering for every shard
/// (within 120 s), then the check, then every node answering alike.
async fn check_sharded(
    form: &str,
    client: &reqwest::Client,
    live: &Mutex<Live>,
    told: &Mutex<BTreeMap<u64, Told>>,
    faults: &[String],
) {
    let apis: Vec<String> = live.lock().unwrap().apis.iter().flatten().cloned().collect();
    for api in &apis {
        ready(client, api).await;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let (status, lag) = streamsight_testkit::http::get(client, &format!("{api}/api/v1/lag")).await;
            if status == 200 && lag["shards"]["missing"].as_array().is_some_and(Vec::is_empty) {
                break;
            }
            if Instant::now() > deadline {
                let mut directories = Vec::new();
                for a in &apis {
                    directories.push(streamsight_testkit::http::get_json(client, &format!("{a}/api/v1/nodes")).await);
                }
                panic!(
                    "{api} does not reach every shard within 120 s of the last fault ({faults:?}): {status} {}; \
                     the nodes' directories: {}",
                    lag["shards"],
                    serde_json::to_string(&directories).unwrap()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let told = told.lock().unwrap().clone();
    // A point acknowledged last is in the log, and in a shard's state once
    // its holder has read that far: read until none is missing, for 30 s at
    // most (then the check names what is).
    let deadline = Instant::now() + Duration::from_secs(30);
    let counts = loop {
        let counts = final_counts(client, &apis[0], told.len() as u64).await;
        let missing = told
            .iter()
            .any(|(i, t)| *t == Told::Acknowledged && !counts.contains_key(i));
        if !missing || Instant::now() > deadline {
            break counts;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    check(form, &told, &counts, faults);
    // Every node answers alike.
    for api in &apis[1..] {
        let other = final_counts(client, api, told.len() as u64).await;
        assert_eq!(counts, other, "{api} answered another final state than {}", apis[0]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_on_sqlite_killed_at_random_keeps_every_acknowledged_point_once() {
    let secs = seconds();
    let _watchdog = Watchdog::arm("the SQLite checker", Duration::from_secs(secs + 300));
    let dir = std::env::temp_dir().join(format!(
        "streamsight-checker-sqlite-{}-{}",
        std::process::id(),
        now_ms()
    ));
    let storage = format!("sqlite://{}/streamsight.db", dir.display());
    let live = Arc::new(Mutex::new(Live {
        intakes: vec![None],
        apis: vec![None],
    }));
    let mut node = start_node(&storage, &live, 0);
    let (stop, told) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(BTreeMap::new())));
    let (posting, _) = clients(live.clone(), stop.clone(), told.clone());

    // The nemesis: up for 2-8 s, killed, down for 0.2-3 s, restarted.
    let mut rng = Rng::seeded();
    let mut faults = Vec::new();
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        tokio::time::sleep(rng.millis(2_000, 8_000)).await;
        kill_node(&mut node, &live, 0);
        faults.push("kill -9 node".to_owned());
        tokio::time::sleep(rng.millis(200, 3_000)).await;
        let storage = storage.clone();
        let l = live.clone();
        node = tokio::task::spawn_blocking(move || start_node(&storage, &l, 0))
            .await
            .unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for p in posting {
        p.await.unwrap();
    }

    // The final state is what a restart reads back.
    kill_node(&mut node, &live, 0);
    let _node = start_node(&storage, &live, 0);
    let api = live.lock().unwrap().apis[0].clone().unwrap();
    let client = reqwest::Client::new();
    ready(&client, &api).await;
    let told = told.lock().unwrap().clone();
    let counts = final_counts(&client, &api, told.len() as u64).await;
    check("one node, SQLite", &told, &counts, &faults);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_sharding_a_kafka_log_killed_at_random_keep_every_acknowledged_point_once() {
    const NODES: usize = 3;
    let secs = seconds();
    let _watchdog = Watchdog::arm("the sharded checker", Duration::from_secs(secs + 400));
    let dir = std::env::temp_dir().join(format!("streamsight-checker-kafka-{}-{}", std::process::id(), now_ms()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let mut broker = Some(Tansu::start_on(port, "sqlite://tansu.db", &dir, &[]));
    let log = format!(
        "kafka://127.0.0.1:{port}/checker-log?partitions=6&create=true&timeout_ms=5000&mode=sharded&snapshot_ms=5000"
    );
    let live = Arc::new(Mutex::new(Live {
        intakes: vec![None; NODES],
        apis: vec![None; NODES],
    }));
    let mut nodes: Vec<Node> = (0..NODES).map(|n| start_sharded_node(&log, &live, n)).collect();
    let client = reqwest::Client::new();
    let ahead = skew_of(&client, &live, SKEWED).await;
    eprintln!("checker: node {SKEWED} announces itself {ahead} ms ahead of this clock");
    assert!(
        !skewed() || (1_000..4_500).contains(&ahead),
        "node {SKEWED}'s clock is not 3 s ahead: {ahead} ms"
    );
    let (stop, told) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(BTreeMap::new())));
    let (posting, _) = clients(live.clone(), stop.clone(), told.clone());

    // The nemesis, one fault at a time, 3-10 s apart: a node or the broker
    // killed for 0.5-6 s and started again (the broker on its port and data,
    // until it answers: see start_serving_broker); with
    // STREAMSIGHT_CHECKER_BROKER=0 only nodes. A node is also paused
    // (SIGSTOP) for 5-30 s and resumed, a third of the time (its shards move
    // once its 6 s session is over, and it lets its leases go); not with
    // STREAMSIGHT_CHECKER_PAUSE=0. In the suite since 2026-12-05
    // (RELIABILITY.md, "Faults").
    let mut rng = Rng::seeded();
    let kill_broker = std::env::var("STREAMSIGHT_CHECKER_BROKER").map_or(true, |v| v != "0");
    let pause = std::env::var("STREAMSIGHT_CHECKER_PAUSE").map_or(true, |v| v != "0");
    let mut faults = Vec::new();
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        tokio::time::sleep(rng.millis(3_000, 10_000)).await;
        let victim = rng.below(NODES + usize::from(kill_broker));
        if victim == NODES {
            if let Some(mut b) = broker.take() {
                b.kill();
            }
            faults.push("kill -9 broker".to_owned());
            eprintln!("checker: kill -9 broker");
            tokio::time::sleep(rng.millis(500, 6_000)).await;
            let dir = dir.clone();
            let (started, tries) = tokio::task::spawn_blocking(move || start_serving_broker(port, &dir))
                .await
                .unwrap();
            if tries > 1 {
                faults.push(format!("the broker closed every connection: started {tries} times"));
            }
            broker = Some(started);
        } else if pause && rng.below(3) == 0 {
            // Paused, as a long GC or a VM's steal would: its session and
            // its lease run out while it believes it holds its shards.
            let pause = rng.millis(5_000, 30_000);
            signal(&nodes[victim], "STOP");
            faults.push(format!("SIGSTOP node {victim} for {pause:?}"));
            eprintln!("checker: SIGSTOP node {victim} for {pause:?}");
            tokio::time::sleep(pause).await;
            signal(&nodes[victim], "CONT");
        } else {
            kill_node(&mut nodes[victim], &live, victim);
            faults.push(format!("kill -9 node {victim}"));
            eprintln!("checker: kill -9 node {victim}");
            tokio::time::sleep(rng.millis(500, 6_000)).await;
            let (log, l) = (log.clone(), live.clone());
            nodes[victim] = tokio::task::spawn_blocking(move || start_sharded_node(&log, &l, victim))
                .await
                .unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for p in posting {
        p.await.unwrap();
    }

    // A node that ended on its own (a task's panic or error ends `serve`,
    // which logs how) is a finding, named here rather than as a node that
    // never got ready.
    for (n, node) in nodes.iter_mut().enumerate() {
        if let Some(status) = node.guard.as_mut().and_then(|g| g.0.try_wait().ok().flatten()) {
            panic!("node {n} ended by itself ({status}) during faults {faults:?}: its log above says how");
        }
    }
    check_sharded("three nodes, sharded kafka:// log", &client, &live, &told, &faults).await;
    drop(nodes);
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}

/// How long the outage form keeps the broker down: `STREAMSIGHT_OUTAGE_SECONDS`
/// (60 in the test suite, as the issue asks; 20 to 600).
fn outage_seconds() -> u64 {
    seconds_in("STREAMSIGHT_OUTAGE_SECONDS", 60, 20..=600)
}

/// The `kafka://` log's broker down a whole minute under intake: while it is
/// down every node says so (`/readyz` 503 naming the log) and acknowledges
/// nothing (503 with `Retry-After`); once it is back the same processes,
/// never restarted, are ready and take intake again, and every point
/// acknowledged before, during and after is in the final state once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_sharding_a_kafka_log_whose_broker_is_down_a_minute_refuse_then_recover_losing_nothing() {
    const NODES: usize = 2;
    /// After the kill, what a node may take to find out: an append under
    /// way waits out `timeout_ms` (5 s), an idle node misses its own
    /// announcements for a few periods.
    const GRACE: Duration = Duration::from_secs(15);
    let outage = Duration::from_secs(outage_seconds());
    let _watchdog = Watchdog::arm("the outage checker", outage + Duration::from_secs(400));
    let dir = std::env::temp_dir().join(format!(
        "streamsight-checker-outage-{}-{}",
        std::process::id(),
        now_ms()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let mut broker = Tansu::start_on(port, "sqlite://tansu.db", &dir, &[]);
    let log = format!(
        "kafka://127.0.0.1:{port}/outage-log?partitions=4&create=true&timeout_ms=5000&mode=sharded&snapshot_ms=5000"
    );
    let live = Arc::new(Mutex::new(Live {
        intakes: vec![None; NODES],
        apis: vec![None; NODES],
    }));
    let _nodes: Vec<Node> = (0..NODES).map(|n| start_node(&log, &live, n)).collect();
    let apis: Vec<String> = live.lock().unwrap().apis.iter().flatten().cloned().collect();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    for api in &apis {
        ready(&client, api).await;
    }
    let (stop, told) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(BTreeMap::new())));
    let (posting, answers) = clients(live.clone(), stop.clone(), told.clone());
    tokio::time::sleep(Duration::from_secs(10)).await;

    // Down for the whole outage: every node's readiness read every second.
    broker.kill();
    let killed = Instant::now();
    eprintln!("checker (outage): kill -9 broker for {outage:?}");
    let mut readiness = Vec::new();
    while killed.elapsed() < outage {
        for (n, api) in apis.iter().enumerate() {
            let (status, why) = streamsight_testkit::http::get(&client, &format!("{api}/readyz")).await;
            readiness.push((
                killed.elapsed(),
                n,
                status,
                why["error"].as_str().unwrap_or("").to_owned(),
            ));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let data = dir.clone();
    let (_broker, starts) = tokio::task::spawn_blocking(move || start_serving_broker(port, &data))
        .await
        .unwrap();
    let back = Instant::now();

    // Back without restarting a node: each ready again, and intake taken.
    let mut ready_after = Vec::new();
    for api in &apis {
        ready(&client, api).await;
        ready_after.push(back.elapsed());
    }
    let acknowledged_after = eventually(120, "a point acknowledged after the broker is back", async || {
        let answers = answers.lock().unwrap();
        let first = answers
            .iter()
            .find(|a| a.sent > back && a.status.is_some_and(|s| (200..300).contains(&s)))?;
        Some(first.answered - back)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    stop.store(true, Ordering::Relaxed);
    for p in posting {
        p.await.unwrap();
    }

    let answers = answers.lock().unwrap().clone();
    let during: Vec<&Answer> = answers
        .iter()
        .filter(|a| a.sent > killed && a.answered < back)
        .collect();
    let acknowledged_during = during
        .iter()
        .filter(|a| a.status.is_some_and(|s| (200..300).contains(&s)))
        .count();
    let refused_during = during.iter().filter(|a| a.status == Some(503)).count();
    let without_retry_after = during
        .iter()
        .filter(|a| a.status == Some(503) && !a.retry_after)
        .count();
    let not_unready: Vec<_> = readiness
        .iter()
        .filter(|(at, _, status, error)| {
            *at > GRACE && !(*status == 503 && (error == "storage_unavailable" || error == "log_unreachable"))
        })
        .collect();
    let mut errors: Vec<&str> = readiness.iter().map(|(.., e)| e.as_str()).collect();
    errors.dedup();
    eprintln!(
        "checker (outage): while down {outage:?}: {} answers, {refused_during} refused 503 \
         ({without_retry_after} without Retry-After), {acknowledged_during} acknowledged; readiness read \
         {} times, {} not 503 after the first {GRACE:?}, errors in order {errors:?}; back: broker started \
         {starts} time(s), nodes ready after {ready_after:?}, first acknowledgement after {acknowledged_after:?}",
        during.len(),
        readiness.len(),
        not_unready.len(),
    );
    assert_eq!(acknowledged_during, 0, "points acknowledged with the log's broker down");
    assert!(refused_during > 0, "no point was refused while the broker was down");
    assert_eq!(without_retry_after, 0, "503s without Retry-After");
    assert!(
        not_unready.is_empty(),
        "readiness did not say the log is out of reach (elapsed, node, status, error): {not_unready:?}"
    );
    let faults = [format!("kill -9 broker for {outage:?}")];
    check_sharded("two nodes, kafka:// log, broker down", &client, &live, &told, &faults).await;
    let _ = std::fs::remove_dir_all(&dir);
}
