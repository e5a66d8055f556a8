//! The seed's incident with the seed's own tracers, on Apache Kafka 4.4, each
//! reporting to `streamsight serve`'s agent-compatible intake while streamsight
//! also polls the broker, all at once:
//!
//! - a Java service (`harness/java-clients`' `SeedService`, kafka-clients 4.4)
//!   under the real dd-java-agent with Data Streams Monitoring on: 1.67.1, the
//!   last with the bug (a failed send reported as produce offset -1, partition
//!   -1 where none was assigned), 1.68.0, the first without it, and 1.68.1, the
//!   newest served; and 1.67.1 once more on kafka-clients 3.9.2;
//! - a Go service on confluent-kafka-go under dd-trace-go v2
//!   (`harness/go-tracers`), whose consumers report high watermarks;
//! - a Kafka Streams application (`StreamsRelay`) under dd-java-agent 1.67.1
//!   and 1.68.1, relaying a topic whose sends then fail (records too large),
//!   with a consumer of its output stuck at 500 and committing;
//! - a Node.js service on kafkajs under dd-trace 5 (`harness/js-tracers`).
//!
//! Each service's consumer is stuck at offset 500 of 1000 and keeps committing;
//! then its sends fail for over a minute with the broker up (records over the
//! topic's `max.message.bytes`: the broker refuses them; the Java services
//! also send to a topic deleted under them and to one that never existed, both
//! `max.block.ms` metadata timeouts, since the broker here makes no topic when
//! one is named); then it recovers. Held throughout, for every tracer: lag in
//! messages is the broker's, lag in seconds within a second of the truth and
//! rising, `producer_failing` is raised and clears after the first success, no
//! partition -1 series shows anywhere, and the tracer's cluster id is the
//! polled cluster's name.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

mod support;

use rdkafka::consumer::{BaseConsumer, Consumer};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use streamsight_testkit::ApacheKafka;
use streamsight_testkit::apache_kafka::{TEST_CONFIG, unique};
use streamsight_testkit::http::{get_json, get_text};

/// The Java agents: the last affected, the first fixed, the newest served.
const AGENTS: [&str; 3] = ["1.67.1", "1.68.0", "1.68.1"];

/// Which tracer a service runs under.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Tracer {
    Java(&'static str),
    /// The buggy agent on kafka-clients 3.9 rather than 4.4.
    JavaOnClients3(&'static str),
    /// A Kafka Streams application under the agent (`StreamsRelay`): its
    /// sends to the output fail; the stuck consumer is the test's.
    Streams(&'static str),
    Go,
    Js,
}

impl Tracer {
    fn label(self) -> String {
        match self {
            Tracer::Java(v) => format!("dd-java-agent {v}"),
            Tracer::JavaOnClients3(v) => format!("dd-java-agent {v} on kafka-clients 3.9.2"),
            Tracer::Streams(v) => format!("dd-java-agent {v}, Kafka Streams 4.4.0"),
            Tracer::Go => "dd-trace-go v2.7.1".to_owned(),
            Tracer::Js => "dd-trace (Node.js) 5.132.0".to_owned(),
        }
    }
}
/// How long the sends fail: over the minute after which the buggy tracer's
/// placeholder wiped the offset history in Datadog's backend.
const FAILING: Duration = Duration::from_secs(70);

/// This binary's node: topics are made only when asked for, so a send to a
/// deleted or never-made topic fails as it does in production.
fn kafka() -> &'static ApacheKafka {
    static NODE: std::sync::OnceLock<ApacheKafka> = std::sync::OnceLock::new();
    NODE.get_or_init(|| {
        let mut config = TEST_CONFIG.to_vec();
        config.push(("auto.create.topics.enable", "false"));
        let dir = std::env::temp_dir().join(unique("streamsight-dd-java-agent"));
        ApacheKafka::start_with(&dir, streamsight_testkit::free_port(), &config)
    })
}

async fn create(bootstrap: &str, topic: &str, config: &[(&str, &str)]) {
    let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let mut new = rdkafka::admin::NewTopic::new(topic, 1, rdkafka::admin::TopicReplication::Fixed(1));
    for (k, v) in config {
        new = new.set(k, v);
    }
    let opts = rdkafka::admin::AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    for r in admin.create_topics([&new], &opts).await.unwrap() {
        r.unwrap();
    }
}

async fn delete(bootstrap: &str, topic: &str) {
    let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let opts = rdkafka::admin::AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    for r in admin.delete_topics(&[topic], &opts).await.unwrap() {
        r.unwrap();
    }
}

/// The broker's end offset of `topic`'s partition 0 and the timestamp (ms)
/// of the record at `offset`.
fn truth(bootstrap: &str, topic: &str, offset: i64) -> (i64, i64) {
    let c: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique("truth"))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let (_, end) = c.fetch_watermarks(topic, 0, Duration::from_secs(10)).unwrap();
    let mut at = rdkafka::TopicPartitionList::new();
    at.add_partition_offset(topic, 0, rdkafka::Offset::Offset(offset))
        .unwrap();
    c.assign(&at).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(500)) {
            use rdkafka::Message;
            return (end, m.timestamp().to_millis().unwrap());
        }
        assert!(Instant::now() < deadline, "no record at {topic}[0]@{offset}");
    }
}

/// One service's names.
struct Service {
    tracer: Tracer,
    name: String,
    orders: String,
    gone: String,
    nowhere: String,
    /// A Kafka Streams service's input.
    input: String,
    group: String,
}

/// What one sample of the failure saw for a service.
#[derive(Debug, Default)]
struct Seen {
    samples: usize,
    lag_off: usize,
    worst_seconds_error: f64,
    seconds_not_rising: usize,
    failing_after: Option<Duration>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_incident_under_each_real_tracer_reads_true() {
    let b = kafka().bootstrap.clone();
    let tracers = AGENTS.iter().map(|v| Tracer::Java(v)).chain([
        Tracer::JavaOnClients3(AGENTS[0]),
        Tracer::Streams(AGENTS[0]),
        Tracer::Streams(AGENTS[2]),
        Tracer::Go,
        Tracer::Js,
    ]);
    let services: Vec<Service> = tracers
        .map(|tracer| Service {
            tracer,
            name: match tracer {
                Tracer::Java(v) => format!("seed-java-{}", v.replace('.', "-")),
                Tracer::JavaOnClients3(v) => format!("seed-java-{}-clients-3", v.replace('.', "-")),
                Tracer::Streams(v) => format!("seed-streams-{}", v.replace('.', "-")),
                Tracer::Go => "seed-go".to_owned(),
                Tracer::Js => "seed-js".to_owned(),
            },
            orders: unique("orders"),
            gone: unique("gone"),
            nowhere: unique("nowhere"),
            input: unique("words"),
            group: unique("billing"),
        })
        .collect();
    for s in &services {
        if matches!(s.tracer, Tracer::Streams(_)) {
            // Kafka Streams stamps its output with its input's time: the
            // broker's append time is when the relayed record was written.
            let output = [
                ("max.message.bytes", "65536"),
                ("message.timestamp.type", "LogAppendTime"),
            ];
            create(&b, &s.orders, &output).await;
            create(&b, &s.input, &[]).await;
        } else {
            create(&b, &s.orders, &[("max.message.bytes", "65536")]).await;
        }
        create(&b, &s.gone, &[]).await;
    }
    let toml = format!(
        "[serve]\nhistory_interval = \"1s\"\n\n[[serve.clusters]]\nname = \"apache-kafka\"\nbootstrap = [{b:?}]\npoll_interval = \"500ms\"\n"
    );
    let (_serve, intake, api) = support::serve_with("dd-java-agent", &toml, "memory://");
    let http = reqwest::Client::new();
    let mut members: Vec<support::Member> = services
        .iter()
        .map(|s| match s.tracer {
            Tracer::Java(v) => support::Member::seed_service(
                v,
                None,
                &s.name,
                &intake,
                [&b, &s.orders, &s.gone, &s.nowhere, &s.group],
            ),
            Tracer::JavaOnClients3(v) => support::Member::seed_service(
                v,
                Some("3"),
                &s.name,
                &intake,
                [&b, &s.orders, &s.gone, &s.nowhere, &s.group],
            ),
            Tracer::Streams(v) => {
                support::Member::streams_relay(v, &s.name, &intake, [&b, &unique("relay"), &s.input, &s.orders])
            }
            Tracer::Go => support::Member::go_seed(&s.name, &intake, [&b, &s.orders, &s.group]),
            Tracer::Js => support::Member::js_seed(&s.name, &intake, [&b, &s.orders, &s.group]),
        })
        .collect();
    // The Kafka Streams services: the test writes their input and is their
    // output's stuck consumer (500, committed again every second).
    let relays: Vec<&Service> = services
        .iter()
        .filter(|s| matches!(s.tracer, Tracer::Streams(_)))
        .collect();
    for (s, m) in services.iter().zip(&members) {
        if matches!(s.tracer, Tracer::Streams(_)) {
            m.until("running");
        }
    }
    let mode = std::sync::Arc::new(std::sync::atomic::AtomicU8::new(STEADY));
    let writers: Vec<_> = relays
        .iter()
        .map(|s| relay_writer(&b, &s.input, &s.orders, &s.group, mode.clone()))
        .collect();
    for (s, m) in services.iter().zip(&members) {
        if !matches!(s.tracer, Tracer::Streams(_)) {
            m.until("stuck 500");
        }
    }
    for s in &relays {
        streamsight_testkit::eventually(
            60,
            &format!("{} relayed 1000 and its consumer stuck", s.name),
            async || (truth_end(&b, &s.orders) >= 1000).then_some(()),
        )
        .await;
        support::seed_commits(&b, &s.orders, &s.group, &[500]);
    }
    mode.store(STUCK, std::sync::atomic::Ordering::Relaxed);
    let t500: Vec<i64> = services.iter().map(|s| truth(&b, &s.orders, 500).1).collect();
    // Every service's lag read, from its commits and the tracer's acks.
    for s in &services {
        streamsight_testkit::http::wait_for_json(
            &http,
            &format!("{api}/api/v1/lag?group={}", s.group),
            60,
            &format!("{}'s lag", s.name),
            |v| v["rows"][0]["lag_messages"] == 500,
        )
        .await;
    }

    // Sends fail, three ways, for over a minute.
    for s in &services {
        delete(&b, &s.gone).await;
    }
    for m in &mut members {
        m.send("fail");
    }
    mode.store(FAIL, std::sync::atomic::Ordering::Relaxed);
    for m in &members {
        m.until("failing");
    }
    let failed_at = Instant::now();
    let mut seen: Vec<Seen> = services.iter().map(|_| Seen::default()).collect();
    let mut last_seconds: Vec<Option<f64>> = vec![None; services.len()];
    while failed_at.elapsed() < FAILING {
        for (i, s) in services.iter().enumerate() {
            let rows = get_json(&http, &format!("{api}/api/v1/lag?group={}", s.group)).await;
            let row = &rows["rows"][0];
            let seen = &mut seen[i];
            seen.samples += 1;
            if row["lag_messages"] != 500 || rows["rows"].as_array().is_none_or(|r| r.len() != 1) {
                seen.lag_off += 1;
                eprintln!("{}: lag off at {:?}: {rows}", s.name, failed_at.elapsed());
            }
            if let (Some(seconds), Some(now)) = (row["lag_seconds"].as_f64(), rows["now_ms"].as_i64()) {
                let true_seconds = (now - t500[i]) as f64 / 1000.0;
                seen.worst_seconds_error = seen.worst_seconds_error.max((seconds - true_seconds).abs());
                if last_seconds[i].is_some_and(|last| seconds <= last) {
                    seen.seconds_not_rising += 1;
                }
                last_seconds[i] = Some(seconds);
            }
            if row["producer_failing"] == true && seen.failing_after.is_none() {
                seen.failing_after = Some(failed_at.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // The producer_failing rule fired for each service's topic.
    let alerts = get_json(&http, &format!("{api}/api/v1/alerts")).await;
    let failing: Vec<String> = alerts["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["rule"] == "producer_failing" && a["state"] == "firing")
        .filter_map(|a| a["labels"]["topic"].as_str().map(str::to_owned))
        .collect();
    // Nowhere a partition -1: not in rows, topics, /metrics.
    let metrics = get_text(&http, &format!("{api}/metrics")).await;
    let minus_one: Vec<&str> = metrics.lines().filter(|l| l.contains("partition=\"-1\"")).collect();
    assert!(minus_one.is_empty(), "partition -1 series: {minus_one:#?}");
    for s in &services {
        for topic in [&s.orders, &s.gone, &s.nowhere] {
            let t = get_json(&http, &format!("{api}/api/v1/topics/apache-kafka/{topic}")).await;
            let partitions: Vec<i64> = t["partitions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["partition"].as_i64())
                .collect();
            assert!(partitions.iter().all(|p| *p >= 0), "{topic}: {t}");
        }
    }

    // The dashboard's topic page of the buggy agent's topic: its partition 0
    // failing, no partition -1 row.
    let browser = support::browser::Browser::start(1400, 1000).await;
    browser
        .open(&format!("{api}/topics/apache-kafka/{}", services[0].orders))
        .await;
    browser
        .wait_until(
            "the topic's partitions",
            "return [...document.querySelectorAll('table')].some(t => t.innerText.includes('End confirmed'))",
        )
        .await;
    browser.check_page("seed-tracers-failing-topic").await;
    let rows: Vec<Vec<String>> = serde_json::from_value(
        browser
            .eval(
                "return [...document.querySelectorAll('table')].find(t => t.innerText.includes('End confirmed'))
                   .querySelectorAll('tbody tr').values().map(r => [...r.cells].map(c => c.innerText)).toArray()",
            )
            .await,
    )
    .unwrap();
    assert!(
        rows.len() == 1 && rows[0][0] == "0" && rows[0][5].to_lowercase().contains("failing"),
        "{rows:?}"
    );
    // Failing with no counts by error is said so, never "no failed sends".
    let page = browser.text("main").await;
    assert!(
        page.contains("Sends are failing") && !page.contains("No failed sends reported"),
        "{page}"
    );

    // Recovery: the deleted and never-made topics made, sends succeed again.
    for s in &services {
        create(&b, &s.gone, &[]).await;
        create(&b, &s.nowhere, &[]).await;
    }
    for m in &mut members {
        m.send("recover");
    }
    mode.store(RECOVER, std::sync::atomic::Ordering::Relaxed);
    for (s, m) in services.iter().zip(&members) {
        if matches!(s.tracer, Tracer::Streams(_)) {
            let before = truth_end(&b, &s.orders);
            streamsight_testkit::eventually(60, &format!("{} relaying again", s.name), async || {
                (truth_end(&b, &s.orders) > before).then_some(())
            })
            .await;
        } else {
            m.until("recovered");
        }
    }
    let recovered_at = Instant::now();
    let mut cleared_after = BTreeMap::new();
    for (i, s) in services.iter().enumerate() {
        let rows = streamsight_testkit::http::wait_for_json(
            &http,
            &format!("{api}/api/v1/lag?group={}", s.group),
            60,
            &format!("{}'s producer no longer failing", s.name),
            |v| v["rows"][0]["producer_failing"] == false,
        )
        .await;
        cleared_after.insert(s.tracer.label(), recovered_at.elapsed());
        let (end, _) = truth(&b, &s.orders, 500);
        let row = &rows["rows"][0];
        // After recovery: lag is the broker's, lag seconds the oldest unread's.
        let now = rows["now_ms"].as_i64().unwrap();
        let true_seconds = (now - t500[i]) as f64 / 1000.0;
        let seconds = row["lag_seconds"].as_f64().unwrap_or(f64::NAN);
        assert!(
            row["lag_messages"]
                .as_i64()
                .is_some_and(|l| (end - 500 - 5..=end - 500).contains(&l))
                && (seconds - true_seconds).abs() <= 1.0,
            "{} after recovery: lag {} (broker {}), lag seconds {seconds} (truth {true_seconds:.1}): {row}",
            s.name,
            row["lag_messages"],
            end - 500
        );
        // The tracer's cluster id is the polled cluster's name: one row.
        assert_eq!(
            (rows["rows"].as_array().map(Vec::len), &row["cluster"]),
            (Some(1), &serde_json::json!("apache-kafka")),
            "{rows}"
        );
    }
    for (i, s) in services.iter().enumerate() {
        let seen = &seen[i];
        eprintln!(
            "{}: {} samples over {FAILING:?} of failure: lag off the broker's {} times, \
             lag seconds at most {:.2} s off the truth and not rising {} times; producer_failing after {:?}, \
             cleared {:?} after the first success; alert fired: {}",
            s.tracer.label(),
            seen.samples,
            seen.lag_off,
            seen.worst_seconds_error,
            seen.seconds_not_rising,
            seen.failing_after,
            cleared_after[&s.tracer.label()],
            failing.contains(&s.orders)
        );
    }
    for (i, s) in services.iter().enumerate() {
        let seen = &seen[i];
        assert_eq!(seen.lag_off, 0, "{}: lag left the broker's 500", s.name);
        assert!(seen.worst_seconds_error <= 1.0, "{}: lag seconds {:?}", s.name, seen);
        assert_eq!(seen.seconds_not_rising, 0, "{}: lag seconds stopped rising", s.name);
        assert!(
            seen.failing_after.is_some_and(|t| t <= Duration::from_secs(30)),
            "{}: producer_failing not raised within 30 s: {seen:?}",
            s.name
        );
        assert!(
            failing.contains(&s.orders),
            "{}: producer_failing alert on {}: {alerts}",
            s.name,
            s.orders
        );
    }
    mode.store(DONE, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    for m in members {
        m.close();
    }
}

const STEADY: u8 = 0;
const STUCK: u8 = 1;
const FAIL: u8 = 2;
const RECOVER: u8 = 3;
const DONE: u8 = 4;

/// The end offset of `topic`'s partition 0.
fn truth_end(bootstrap: &str, topic: &str) -> i64 {
    let c: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    c.fetch_watermarks(topic, 0, Duration::from_secs(10)).unwrap().1
}

/// A Kafka Streams service's world: 1000 small records to its `input` at
/// once; then, while stuck, `group` commits 500 on `output` every second;
/// "big" records to `input` every 200 ms while failing (the relay's sends of
/// them fail), small ones while recovering.
fn relay_writer(
    bootstrap: &str,
    input: &str,
    output: &str,
    group: &str,
    mode: std::sync::Arc<std::sync::atomic::AtomicU8>,
) -> std::thread::JoinHandle<()> {
    use rdkafka::producer::{BaseRecord, Producer};
    let (bootstrap, input, output, group) = (
        bootstrap.to_owned(),
        input.to_owned(),
        output.to_owned(),
        group.to_owned(),
    );
    std::thread::spawn(move || {
        let producer: rdkafka::producer::BaseProducer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("linger.ms", "0")
            .create()
            .unwrap();
        for i in 0..1000 {
            let value = format!("word {i}");
            producer
                .send(BaseRecord::<(), _>::to(&input).partition(0).payload(&value))
                .unwrap();
        }
        producer.flush(Duration::from_secs(20)).unwrap();
        let mut last_commit = Instant::now();
        loop {
            let now = mode.load(std::sync::atomic::Ordering::Relaxed);
            if now == DONE {
                return;
            }
            if now >= STUCK && last_commit.elapsed() >= Duration::from_secs(1) {
                support::seed_commits(&bootstrap, &output, &group, &[500]);
                last_commit = Instant::now();
            }
            let value = match now {
                FAIL => Some("big"),
                RECOVER => Some("small"),
                _ => None,
            };
            if let Some(value) = value {
                let _ = producer.send(BaseRecord::<(), _>::to(&input).partition(0).payload(value));
            }
            producer.poll(Duration::from_millis(200));
        }
    })
}
