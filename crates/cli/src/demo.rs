//! `streamsight demo`: a pipeline with something true to show on every page,
//! from one command and nothing installed. It starts librdkafka's mock cluster in
//! process, the collector (memory store, polling the mock, watching its DLQ,
//! probing it) and services written with the SDK:
//!
//! - `checkout` produces orders to `orders` (6 partitions), ~20 a second; every
//!   `incident_every` the broker rejects its sends for `incident_for` (the seed's
//!   incident, through the mock's error injection);
//! - `legacy-importer` sends an order that breaks the schema now and then;
//! - `billing` reads everything, validates it and dead-letters what breaks the
//!   schema to `orders.dlq` with its provenance: healthy;
//! - `shipping` reads slower than orders arrive: its lag grows;
//! - `fraud` reads for a while, then gets stuck: it commits the same offsets
//!   while messages wait.

use anyhow::Context as _;
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{DefaultProducerContext, FutureRecord};
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use streamsight_sdk::dlq::{DeadLetterQueue, Failure};
use streamsight_sdk::validate::Validator;
use streamsight_sdk::{Sdk, SdkConfig};

const TOPIC: &str = "orders";
const DLQ: &str = "orders.dlq";
const PROBE: &str = "streamsight-probe";
const CLUSTER: &str = "demo";
const SCHEMA: &str = r#"{"type":"object","required":["id","amount"],
  "properties":{"id":{"type":"string"},"amount":{"type":"number"}}}"#;

/// What `streamsight demo` runs.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// The dashboard and API.
    pub api_listen: std::net::SocketAddr,
    /// First incident after this long, then one every `incident_every`.
    pub first_incident_after: Duration,
    pub incident_every: Duration,
    pub incident_for: Duration,
    /// `fraud` gets stuck after this long.
    pub fraud_stuck_after: Duration,
    /// Stop after this long (default: until interrupted).
    pub duration: Option<Duration>,
}

impl DemoOptions {
    /// Whether the broker rejects produce requests `elapsed` into the demo.
    pub fn incident_at(&self, elapsed: Duration) -> bool {
        let Some(since) = elapsed.checked_sub(self.first_incident_after) else {
            return false;
        };
        let every = self.incident_every.as_secs_f64().max(1.0);
        since.as_secs_f64() % every < self.incident_for.as_secs_f64()
    }
}

impl Default for DemoOptions {
    fn default() -> Self {
        Self {
            api_listen: ([127, 0, 0, 1], 7411).into(),
            first_incident_after: Duration::from_secs(20),
            incident_every: Duration::from_secs(180),
            incident_for: Duration::from_secs(60),
            fraud_stuck_after: Duration::from_secs(15),
            duration: None,
        }
    }
}

/// The collector's configuration for the demo: the mock polled, its DLQ read,
/// its probe topic probed, samples every 2 s so charts fill within a minute.
fn collector_config(
    bootstrap: &str,
    api: std::net::SocketAddr,
    keys: &std::path::Path,
) -> anyhow::Result<crate::config::Config> {
    let text = format!(
        r#"
[serve]
api_listen = "{api}"
intake_listen = "127.0.0.1:0"
storage = "memory://"
keys_file = "{keys}"
history_interval = "2s"
pathway_window = "2m"

[serve.journeys]
otlp_listen = "127.0.0.1:0"

[[serve.clusters]]
name = "{CLUSTER}"
bootstrap = ["{bootstrap}"]
poll_interval = "2s"

[[serve.probes]]
name = "{CLUSTER}"
bootstrap = "{bootstrap}"
topic = "{PROBE}"
interval = "1s"
sla = "10s"

[[serve.dlq]]
name = "{CLUSTER}"
bootstrap = "{bootstrap}"
topics = ["{DLQ}"]
refresh = "2s"
"#,
        keys = keys.display()
    );
    toml::from_str(&text).context("the demo's own configuration is invalid")
}

/// How long the demo's services and collector get to stop once told to:
/// past it, what is still stopping is left to the process's exit.
const STOP_WITHIN: Duration = Duration::from_millis(1_200);

/// Runs the demo until interrupted (SIGINT or SIGTERM, in any phase) or for
/// `duration`; prints the dashboard's URL. Stops within about 3 s either way (measured 0.7 to 2.4 s)
/// and removes its temp dir.
pub fn run(options: DemoOptions) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let dir = std::env::temp_dir().join(format!("streamsight-demo-{}", std::process::id()));
    let result = runtime.block_on(async {
        let stopped = interrupted()?;
        demo(options, &dir, stopped).await
    });
    // A service stuck in a blocking call (a flush to a broker that rejects
    // every request) must not hold the process.
    runtime.shutdown_timeout(Duration::from_millis(300));
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// A flag set on SIGINT or SIGTERM, listened for from now on.
fn interrupted() -> anyhow::Result<tokio::sync::watch::Receiver<bool>> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let (tx, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        let _ = tx.send(true);
    });
    Ok(rx)
}

async fn demo(
    options: DemoOptions,
    dir: &std::path::Path,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<()> {
    // Not Send: it stays in this future, which injects the incidents.
    let cluster: MockCluster<'static, DefaultProducerContext> =
        MockCluster::new(1).context("cannot start the mock cluster")?;
    cluster.create_topic(TOPIC, 6, 1)?;
    cluster.create_topic(DLQ, 1, 1)?;
    cluster.create_topic(PROBE, 2, 1)?;
    let bootstrap = cluster.bootstrap_servers();

    std::fs::create_dir_all(dir)?;
    let config = collector_config(&bootstrap, options.api_listen, &dir.join("no-keys.toml"))?;
    let running = streamsight_collector::serve(config.serve, config.engine).await?;
    let intake = format!("http://{}", running.intake_addr);
    println!(
        "streamsight demo: dashboard at http://{}/ (Ctrl-C stops it)",
        running.api_addr
    );
    println!("streamsight serving intake={intake} api=http://{}", running.api_addr);

    let schema = dir.join("order.schema.json");
    std::fs::write(&schema, SCHEMA)?;
    let sdk = |service: &str| {
        let mut c = SdkConfig::new(service);
        c.collector_url = intake.clone();
        c.flush_interval = Duration::from_secs(2);
        c.kafka_cluster_id = Some(CLUSTER.to_owned());
        Sdk::start(c)
    };
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(checkout(sdk("checkout"), bootstrap.clone(), stop.clone()));
    tasks.spawn(legacy_importer(sdk("legacy-importer"), bootstrap.clone(), stop.clone()));
    let validator = Arc::new(Validator::new().json_schema(TOPIC, &schema)?);
    tasks.spawn(billing(sdk("billing"), bootstrap.clone(), validator, stop.clone()));
    tasks.spawn(shipping(sdk("shipping"), bootstrap.clone(), stop.clone()));
    tasks.spawn(fraud(
        sdk("fraud"),
        bootstrap.clone(),
        started + options.fraud_stuck_after,
        stop.clone(),
    ));

    let until = async {
        match options.duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(until);
    let mut inject = tokio::time::interval(Duration::from_millis(25));
    let mut was_failing = false;
    let mut failed = None;
    loop {
        // Told to stop while starting: stop now.
        if *stopped.borrow() {
            break;
        }
        tokio::select! {
            () = &mut until => break,
            _ = stopped.changed() => break,
            Some(r) = tasks.join_next() => {
                failed = Some(r);
                break;
            }
            _ = inject.tick() => {
                let failing = options.incident_at(started.elapsed());
                if failing != was_failing {
                    tracing::warn!("demo: the broker {} produce requests", if failing { "rejects" } else { "accepts" });
                    if !failing {
                        cluster.clear_request_errors(RDKafkaApiKey::Produce);
                    }
                    was_failing = failing;
                }
                if failing {
                    // Each error answers one produce request; more are queued
                    // than asked for, and what is left is cleared at the end.
                    cluster.request_errors(
                        RDKafkaApiKey::Produce,
                        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS; 4],
                    );
                }
            }
        }
    }
    // Stopping inside an incident: the broker answers again, so that
    // sends in flight and the SDKs' last flushes end.
    stop.store(true, Ordering::Relaxed);
    cluster.clear_request_errors(RDKafkaApiKey::Produce);
    let failed = &mut failed;
    let stopping = async {
        while let Some(r) = tasks.join_next().await {
            if failed.is_none() && !matches!(r, Ok(Ok(()))) {
                *failed = Some(r);
            }
        }
        running.shutdown().await;
    };
    if tokio::time::timeout(STOP_WITHIN, stopping).await.is_err() {
        tracing::warn!("demo: services still stopping after {STOP_WITHIN:?}; left to the exit");
    }
    match failed.take() {
        Some(r) => r.context("a demo service panicked")?.context("a demo service failed"),
        None => Ok(()),
    }
}

fn client(bootstrap: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap);
    c
}

fn consumer_config(bootstrap: &str, group: &str) -> ClientConfig {
    let mut c = client(bootstrap);
    c.set("group.id", group)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "6000");
    c
}

/// 20 orders a second over 6 partitions.
async fn checkout(sdk: Sdk, bootstrap: String, stop: Arc<AtomicBool>) -> anyhow::Result<()> {
    let producer = sdk.future_producer(
        client(&bootstrap)
            .set("linger.ms", "0")
            .set("message.send.max.retries", "0"),
    )?;
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        n += 1;
        let key = format!("order-{n}");
        let value = format!(r#"{{"id":"{key}","amount":{}.{:02}}}"#, 5 + n % 200, n % 100);
        // The result is the SDK's to count; the demo carries on either way.
        let _ = producer
            .send(
                FutureRecord::to(TOPIC).key(&key).payload(&value),
                Duration::from_secs(5),
                None,
            )
            .await;
    }
    sdk.shutdown();
    Ok(())
}

/// An old service whose orders drift from the schema, one every few seconds.
async fn legacy_importer(sdk: Sdk, bootstrap: String, stop: Arc<AtomicBool>) -> anyhow::Result<()> {
    let producer = sdk.future_producer(&client(&bootstrap))?;
    let bad = [
        r#"{"id":"legacy-1","total":12.5}"#,
        r#"{"id":"legacy-2","amount":"12.50"}"#,
        "<order id=legacy-3/>",
    ];
    let mut tick = tokio::time::interval(Duration::from_secs(4));
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let value = bad[n % bad.len()];
        n += 1;
        let _ = producer
            .send(
                FutureRecord::to(TOPIC).key("legacy").payload(value),
                Duration::from_secs(5),
                None,
            )
            .await;
    }
    sdk.shutdown();
    Ok(())
}

/// Reads everything, validates it, dead-letters what breaks the schema.
async fn billing(sdk: Sdk, bootstrap: String, validator: Arc<Validator>, stop: Arc<AtomicBool>) -> anyhow::Result<()> {
    let consumer = sdk.stream_consumer(&consumer_config(&bootstrap, "billing"))?;
    consumer.subscribe(&[TOPIC])?;
    let dlq = DeadLetterQueue::new(&client(&bootstrap), sdk.telemetry().clone())?.topic(TOPIC, DLQ);
    while !stop.load(Ordering::Relaxed) {
        let Ok(next) = tokio::time::timeout(Duration::from_millis(500), consumer.recv()).await else {
            continue;
        };
        let (msg, _ctx) = next?;
        if let Err(v) = validator.validate(msg.topic(), msg.payload()) {
            // A DLQ that cannot be written is counted by the SDK as a failure.
            let _ = dlq.route(consumer.context(), &msg, &Failure::validation(&v)).await;
        }
        consumer.commit_message(&msg, CommitMode::Async)?;
    }
    sdk.shutdown();
    Ok(())
}

/// Reads 12 orders a second while 20 arrive: its lag grows.
async fn shipping(sdk: Sdk, bootstrap: String, stop: Arc<AtomicBool>) -> anyhow::Result<()> {
    let consumer = sdk.stream_consumer(&consumer_config(&bootstrap, "shipping"))?;
    consumer.subscribe(&[TOPIC])?;
    while !stop.load(Ordering::Relaxed) {
        let Ok(next) = tokio::time::timeout(Duration::from_millis(500), consumer.recv()).await else {
            continue;
        };
        let (msg, _ctx) = next?;
        tokio::time::sleep(Duration::from_millis(80)).await;
        consumer.commit_message(&msg, CommitMode::Async)?;
    }
    sdk.shutdown();
    Ok(())
}

/// Reads normally, then gets stuck on a message: it stops reading but keeps
/// committing the same offsets, so the committed offset stops moving while
/// orders wait.
async fn fraud(sdk: Sdk, bootstrap: String, stuck_at: Instant, stop: Arc<AtomicBool>) -> anyhow::Result<()> {
    let consumer = sdk.stream_consumer(&consumer_config(&bootstrap, "fraud"))?;
    consumer.subscribe(&[TOPIC])?;
    let mut positions = TopicPartitionList::new();
    while !stop.load(Ordering::Relaxed) && Instant::now() < stuck_at {
        let Ok(next) = tokio::time::timeout(Duration::from_millis(500), consumer.recv()).await else {
            continue;
        };
        let (msg, _ctx) = next?;
        consumer.commit_message(&msg, CommitMode::Async)?;
        let next = Offset::Offset(msg.offset() + 1);
        if positions.find_partition(msg.topic(), msg.partition()).is_some() {
            positions.set_partition_offset(msg.topic(), msg.partition(), next)?;
        } else {
            positions.add_partition_offset(msg.topic(), msg.partition(), next)?;
        }
    }
    tracing::warn!("demo: fraud is stuck");
    if let Ok(assignment) = consumer.untracked().assignment() {
        consumer.untracked().pause(&assignment)?;
    }
    let mut tick = tokio::time::interval(Duration::from_secs(3));
    while !stop.load(Ordering::Relaxed) {
        // Polling keeps the member in its group; nothing is read while paused.
        let _ = tokio::time::timeout(tick.period(), async {
            tick.tick().await;
            let _ = tokio::time::timeout(Duration::from_millis(10), consumer.recv()).await;
        })
        .await;
        if positions.count() > 0 {
            consumer.commit(&positions, CommitMode::Async)?;
        }
    }
    sdk.shutdown();
    Ok(())
}
