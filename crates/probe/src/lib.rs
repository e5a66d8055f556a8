//! The end-to-end probe (KMinion's end-to-end metrics, Xinfra Monitor's
//! sequence gaps): every `interval` a small record with a sequence number and
//! its creation time goes to every partition of the probe topic; a consumer in
//! the probe's own group reads them back. The accounting is the core's
//! [`ProbeTracker`]; this crate is the part that talks to Kafka.

use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use streamsight_core::Millis;
use streamsight_core::probe::{ProbeReport, ProbeTracker};

/// `[[serve.probes]]`: one probe of one cluster.
/// How long a probe's shutdown waits for its loop.
pub const STOP_WITHIN: Duration = Duration::from_secs(2);

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeConfig {
    /// The cluster's name in reports.
    pub name: String,
    /// `host:port[,host:port]`; the cluster's when `cluster` names one.
    #[serde(default)]
    pub bootstrap: String,
    /// A `[[serve.clusters]]` entry whose bootstrap (when `bootstrap` is
    /// empty) and security settings (unless `client` sets
    /// `security.protocol`) the probe uses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Must exist (or the brokers must create it on first use).
    #[serde(default = "default_topic")]
    pub topic: String,
    #[serde(default = "default_group")]
    pub group: String,
    #[serde(default = "default_interval", with = "humantime_serde")]
    pub interval: Duration,
    /// A record not back within this is lost; a send not acknowledged within it failed.
    #[serde(default = "default_sla", with = "humantime_serde")]
    pub sla: Duration,
    #[serde(default = "default_commit_interval", with = "humantime_serde")]
    pub commit_interval: Duration,
    /// librdkafka properties for both clients (security settings, for one).
    #[serde(default)]
    pub client: BTreeMap<String, String>,
}

fn default_topic() -> String {
    "streamsight-probe".into()
}
fn default_group() -> String {
    "streamsight-probe".into()
}
fn default_interval() -> Duration {
    Duration::from_secs(1)
}
fn default_sla() -> Duration {
    Duration::from_secs(20)
}
fn default_commit_interval() -> Duration {
    Duration::from_secs(5)
}

impl ProbeConfig {
    pub fn new(name: &str, bootstrap: &str) -> Self {
        Self {
            name: name.to_owned(),
            bootstrap: bootstrap.to_owned(),
            cluster: None,
            topic: default_topic(),
            group: default_group(),
            interval: default_interval(),
            sla: default_sla(),
            commit_interval: default_commit_interval(),
            client: BTreeMap::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("probe {name}: cannot create a kafka client: {source}")]
    Client {
        name: String,
        source: rdkafka::error::KafkaError,
    },
    #[error("probe {name}: interval and sla must be at least 10ms")]
    Timing { name: String },
}

/// The record a probe sends.
#[derive(Debug, Serialize, Deserialize)]
struct ProbeRecord {
    probe: String,
    seq: u64,
    created_ms: i64,
}

fn now() -> Millis {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    Millis(ms)
}

fn lock(m: &Mutex<ProbeTracker>) -> MutexGuard<'_, ProbeTracker> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A running probe. Dropping it stops it.
#[derive(Debug)]
pub struct Probe {
    pub config: ProbeConfig,
    tracker: Arc<Mutex<ProbeTracker>>,
    stop: Arc<AtomicBool>,
    last_error: Arc<Mutex<Option<String>>>,
    /// The last send the broker did not take, until one is acknowledged again.
    last_send_error: Arc<Mutex<Option<String>>>,
    /// The task that sends and reads; it ends once told to stop, having let
    /// go of the probe's clients.
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Probe {
    /// Starts the probe's tasks on the current tokio runtime.
    pub fn start(config: ProbeConfig) -> Result<Self, ProbeError> {
        if config.interval < Duration::from_millis(10) || config.sla < Duration::from_millis(10) {
            return Err(ProbeError::Timing { name: config.name });
        }
        let client_error = |source| ProbeError::Client {
            name: config.name.clone(),
            source,
        };
        let mut base = ClientConfig::new();
        base.set("bootstrap.servers", &config.bootstrap);
        for (k, v) in &config.client {
            base.set(k, v);
        }
        let sla_ms = streamsight_core::time::duration_ms(config.sla);
        let producer: FutureProducer = base
            .clone()
            .set("message.timeout.ms", sla_ms.max(1).to_string())
            .set("linger.ms", "0")
            .create()
            .map_err(client_error)?;
        let consumer: StreamConsumer = base
            .clone()
            .set("group.id", &config.group)
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "false")
            .create()
            .map_err(client_error)?;
        let probe = Self {
            tracker: Arc::new(Mutex::new(ProbeTracker::new(sla_ms))),
            stop: Arc::new(AtomicBool::new(false)),
            last_error: Arc::new(Mutex::new(None)),
            last_send_error: Arc::new(Mutex::new(None)),
            task: None,
            config,
        };
        let mut probe = probe;
        let id = format!("{}-{}", std::process::id(), now().0);
        probe.task = Some(tokio::spawn(run(
            probe.config.clone(),
            id,
            Arc::new(producer),
            Arc::new(consumer),
            probe.tracker.clone(),
            probe.stop.clone(),
            Errors {
                metadata: probe.last_error.clone(),
                sends: probe.last_send_error.clone(),
            },
        )));
        Ok(probe)
    }

    /// Stops the probe and returns once its producer and consumer are closed.
    /// A consumer closed after its brokers are gone waits for a coordinator
    /// that never answers (librdkafka's close): stop a probe before its
    /// cluster goes away.
    /// Stops the probe: its loop ends at its next tick, or is left within
    /// [`STOP_WITHIN`] when a broker call holds it (a metadata request to a
    /// broker that never answers waits up to the SLA).
    pub async fn shutdown(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(STOP_WITHIN, &mut task).await.is_err()
        {
            task.abort();
        }
    }

    pub fn report(&self) -> ProbeReport {
        lock(&self.tracker).report(now())
    }

    /// Why the probe could not do its work lately: no topic, no metadata, or
    /// the last send the broker refused (until a send is acknowledged again).
    pub fn last_error(&self) -> Option<String> {
        let metadata = self.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone();
        metadata.or_else(|| self.last_send_error.lock().unwrap_or_else(|p| p.into_inner()).clone())
    }
}

async fn partitions_of(producer: &Arc<FutureProducer>, topic: &str, timeout: Duration) -> Result<Vec<i32>, String> {
    let producer = Arc::clone(producer);
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        let md = producer
            .client()
            .fetch_metadata(Some(&topic), timeout)
            .map_err(|e| format!("metadata: {e}"))?;
        let t = md
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .ok_or_else(|| format!("topic {topic} not found"))?;
        if let Some(e) = t.error() {
            return Err(format!("topic {topic}: {e:?}"));
        }
        Ok(t.partitions().iter().map(|p| p.id()).collect())
    })
    .await
    .map_err(|e| e.to_string())?
}

async fn assign_at_end(
    consumer: &Arc<StreamConsumer>,
    topic: &str,
    partitions: &BTreeSet<i32>,
    timeout: Duration,
) -> Result<(), String> {
    let (consumer, topic, partitions) = (Arc::clone(consumer), topic.to_owned(), partitions.clone());
    tokio::task::spawn_blocking(move || {
        let mut tpl = TopicPartitionList::new();
        for &p in &partitions {
            let (_, high) = consumer
                .fetch_watermarks(&topic, p, timeout)
                .map_err(|e| format!("watermarks of {topic}/{p}: {e}"))?;
            tpl.add_partition_offset(&topic, p, Offset::Offset(high))
                .map_err(|e| e.to_string())?;
        }
        consumer.assign(&tpl).map_err(|e| format!("assign: {e}"))
    })
    .await
    .map_err(|e| e.to_string())?
}

/// Where the probe's loop says what went wrong.
#[derive(Clone, Debug)]
struct Errors {
    /// Metadata and assignment: cleared by the next that works.
    metadata: Arc<Mutex<Option<String>>>,
    /// Sends: cleared by the next acknowledged.
    sends: Arc<Mutex<Option<String>>>,
}

async fn run(
    config: ProbeConfig,
    id: String,
    producer: Arc<FutureProducer>,
    consumer: Arc<StreamConsumer>,
    tracker: Arc<Mutex<ProbeTracker>>,
    stop: Arc<AtomicBool>,
    errors: Errors,
) {
    let set_error = |e: Option<String>| *errors.metadata.lock().unwrap_or_else(|p| p.into_inner()) = e;
    let receiving = tokio::spawn(receive(id.clone(), consumer.clone(), tracker.clone(), stop.clone()));
    let mut tick = tokio::time::interval(config.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut assigned: BTreeSet<i32> = BTreeSet::new();
    let mut next_seq: BTreeMap<i32, u64> = BTreeMap::new();
    let mut last_metadata: Option<Instant> = None;
    let mut last_commit = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        // Partitions: at start, then every 30 s (new partitions are probed too).
        if last_metadata.is_none_or(|t| t.elapsed() > Duration::from_secs(30)) || assigned.is_empty() {
            match partitions_of(&producer, &config.topic, config.sla).await {
                Ok(partitions) => {
                    last_metadata = Some(Instant::now());
                    let new: BTreeSet<i32> = partitions.into_iter().collect();
                    if new != assigned {
                        // Read from the current end, resolved before anything is sent:
                        // only this run's records are ours to wait for, and all of them.
                        match assign_at_end(&consumer, &config.topic, &new, config.sla).await {
                            Ok(()) => assigned = new,
                            Err(e) => {
                                set_error(Some(e));
                                continue;
                            }
                        }
                    }
                    set_error(None);
                }
                Err(e) => {
                    tracing::warn!(probe = %config.name, error = %e, "probe has no partitions to probe");
                    set_error(Some(e));
                }
            }
        }
        let at = now();
        for &p in &assigned {
            let seq = next_seq.entry(p).or_insert(0);
            let record = ProbeRecord {
                probe: id.clone(),
                seq: *seq,
                created_ms: at.0,
            };
            *seq += 1;
            let Ok(payload) = serde_json::to_vec(&record) else {
                continue;
            };
            lock(&tracker).sent(p, record.seq, at);
            // Enqueued here, in sequence order: the gap rule relies on a partition's
            // records landing in the order they were numbered.
            let sent = FutureRecord::<(), _>::to(&config.topic).partition(p).payload(&payload);
            match producer.send_result(sent) {
                Ok(delivery) => {
                    let (tracker, sends) = (tracker.clone(), errors.sends.clone());
                    tokio::spawn(async move {
                        let failed = match delivery.await {
                            Ok(Ok(_)) => None,
                            Ok(Err((e, _))) => Some(e.to_string()),
                            Err(_) => Some("the delivery report was lost".to_owned()),
                        };
                        let at = now();
                        *sends.lock().unwrap_or_else(|p| p.into_inner()) = failed
                            .as_ref()
                            .map(|e| format!("send to partition {p} failed at {}: {e}", at.iso()));
                        let mut t = lock(&tracker);
                        if failed.is_none() {
                            t.acked(p, record.seq, at);
                        } else {
                            t.produce_failed(p, record.seq, at);
                        }
                    });
                }
                Err((e, _)) => {
                    let at = now();
                    *errors.sends.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some(format!("send to partition {p} refused at {}: {e}", at.iso()));
                    lock(&tracker).produce_failed(p, record.seq, at);
                }
            }
        }
        lock(&tracker).expire(now());
        if last_commit.elapsed() >= config.commit_interval && !assigned.is_empty() {
            last_commit = Instant::now();
            let (consumer, tracker) = (consumer.clone(), tracker.clone());
            tokio::task::spawn_blocking(move || {
                let started = Instant::now();
                match consumer.commit_consumer_state(CommitMode::Sync) {
                    Ok(()) => {
                        lock(&tracker).committed(i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX))
                    }
                    // Nothing read since the last commit is not a failure.
                    Err(e) if e.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::NoOffset) => {}
                    Err(_) => lock(&tracker).commit_failed(),
                }
            });
        }
    }
    // The receiver holds the consumer too: it ends within its 200 ms wait.
    let _ = receiving.await;
}

async fn receive(id: String, consumer: Arc<StreamConsumer>, tracker: Arc<Mutex<ProbeTracker>>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        let msg = match tokio::time::timeout(Duration::from_millis(200), consumer.recv()).await {
            Ok(Ok(m)) => m,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "probe consumer");
                continue;
            }
            Err(_) => continue,
        };
        let Some(record) = msg
            .payload()
            .and_then(|p| serde_json::from_slice::<ProbeRecord>(p).ok())
        else {
            continue;
        };
        // Other probes (other collectors) may share the topic.
        if record.probe == id {
            lock(&tracker).received(msg.partition(), record.seq, Millis(record.created_ms), now());
        }
    }
}
