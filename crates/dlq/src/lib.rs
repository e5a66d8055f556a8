//! The dead-letter queue monitor: DLQ topics found by configuration and by
//! naming convention (`.dlq`, `-dlq`, `.DLT`, `-dlt`), their size from the
//! brokers' end offsets and their velocity from the letters' timestamps (no
//! instrumentation needed), and their reasons from a
//! read-only consumer that parses provenance headers in streamsight's, Spring's
//! and Connect's namings. It never commits: it reads with its own group id and
//! keeps its positions in memory. Payloads are previewed for browsing, never
//! logged; headers other than provenance are not kept.

pub mod stats;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use stats::{DlqStats, RecentRecord, TopicReport};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use streamsight_wire::dlq::{Provenance, source_of_dlq_name};

/// `[[serve.dlq]]`: the DLQs of one cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DlqConfig {
    pub name: String,
    /// `host:port[,host:port]`; the cluster's when `cluster` names one.
    #[serde(default)]
    pub bootstrap: String,
    /// A `[[serve.clusters]]` entry whose bootstrap (when `bootstrap` is
    /// empty) and security settings (unless `client` sets
    /// `security.protocol`) the monitor uses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// DLQ topics besides those found by name.
    #[serde(default)]
    pub topics: Vec<String>,
    /// Find DLQ topics by their names' suffixes.
    #[serde(default = "yes")]
    pub by_convention: bool,
    #[serde(default = "default_group")]
    pub group: String,
    /// How often topics and end offsets are refreshed.
    #[serde(default = "default_refresh", with = "humantime_serde")]
    pub refresh: Duration,
    /// librdkafka properties (security settings, for one).
    #[serde(default)]
    pub client: BTreeMap<String, String>,
}

fn yes() -> bool {
    true
}
fn default_group() -> String {
    "streamsight-dlq-monitor".into()
}
fn default_refresh() -> Duration {
    Duration::from_secs(10)
}

impl DlqConfig {
    pub fn new(name: &str, bootstrap: &str) -> Self {
        Self {
            name: name.to_owned(),
            bootstrap: bootstrap.to_owned(),
            cluster: None,
            topics: Vec::new(),
            by_convention: true,
            group: default_group(),
            refresh: default_refresh(),
            client: BTreeMap::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("dlq monitor {name}: cannot create a kafka client: {source}")]
pub struct DlqError {
    name: String,
    source: rdkafka::error::KafkaError,
}

fn lock(m: &Mutex<DlqStats>) -> MutexGuard<'_, DlqStats> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A running monitor; dropping it stops it.
#[derive(Debug)]
pub struct DlqMonitor {
    pub config: DlqConfig,
    stats: Arc<Mutex<DlqStats>>,
    stop: Arc<AtomicBool>,
}

impl Drop for DlqMonitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl DlqMonitor {
    /// Starts the monitor on its own thread (librdkafka's consumer blocks).
    pub fn start(config: DlqConfig) -> Result<Self, DlqError> {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &config.bootstrap)
            .set("group.id", &config.group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "false")
            // A position retention deleted meanwhile reads from the oldest
            // letter kept, never jumps to the end (unread letters skipped).
            .set("auto.offset.reset", "earliest");
        for (k, v) in &config.client {
            c.set(k, v);
        }
        let consumer: BaseConsumer = c.create().map_err(|source| DlqError {
            name: config.name.clone(),
            source,
        })?;
        let sniffer: BaseConsumer = c.create().map_err(|source| DlqError {
            name: config.name.clone(),
            source,
        })?;
        let monitor = Self {
            config,
            stats: Arc::new(Mutex::new(DlqStats::default())),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let (config, stats, stop) = (monitor.config.clone(), monitor.stats.clone(), monitor.stop.clone());
        let spawned = std::thread::Builder::new()
            .name("streamsight-dlq".into())
            .spawn(move || watch(&config, &consumer, &sniffer, &stats, &stop));
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the dlq monitor thread");
        }
        Ok(monitor)
    }

    pub fn report(&self) -> Vec<TopicReport> {
        lock(&self.stats).report()
    }
}

/// A DLQ record as kept for browsing: position, provenance and a preview.
pub fn read_record<M: Message>(m: &M) -> RecentRecord {
    let provenance = m
        .headers()
        .and_then(|h| Provenance::parse(rdkafka::message::Headers::iter(h).map(|h| (h.key, h.value))));
    let (preview, value_bytes) = stats::preview(m.payload());
    RecentRecord {
        partition: m.partition(),
        offset: m.offset(),
        timestamp_ms: m.timestamp().to_millis(),
        provenance,
        preview,
        value_bytes,
    }
}

/// Topics that are DLQs: configured, named like one, or found carrying
/// provenance headers.
fn dlq_topics(
    config: &DlqConfig,
    all: &[(String, Vec<i32>)],
    carrying: &BTreeSet<String>,
) -> BTreeMap<String, Vec<i32>> {
    let wanted: BTreeSet<&str> = config.topics.iter().map(String::as_str).collect();
    all.iter()
        .filter(|(t, _)| {
            wanted.contains(t.as_str())
                || carrying.contains(t)
                || (config.by_convention && source_of_dlq_name(t).is_some())
        })
        .map(|(t, p)| (t.clone(), p.clone()))
        .collect()
}

/// Reads the newest record of every partition of the topics not yet looked at
/// (and not empty), with a consumer of its own: the topics whose records carry
/// provenance headers are DLQs whatever their names.
fn sniff(consumer: &BaseConsumer, topics: &[(String, Vec<i32>)], looked: &mut BTreeSet<String>) -> BTreeSet<String> {
    let timeout = Duration::from_secs(5);
    let mut tpl = TopicPartitionList::new();
    let mut expected = 0;
    let fresh: Vec<&(String, Vec<i32>)> = topics
        .iter()
        .filter(|(t, _)| !looked.contains(t) && !t.starts_with("__"))
        .collect();
    for (t, parts) in fresh {
        let mut any = false;
        for &p in parts {
            if let Ok((low, high)) = consumer.fetch_watermarks(t, p, timeout)
                && high > low
            {
                let _ = tpl.add_partition_offset(t, p, Offset::Offset(high - 1));
                expected += 1;
                any = true;
            }
        }
        // Empty topics are looked at again on a later refresh.
        if any {
            looked.insert(t.clone());
        }
    }
    let mut found = BTreeSet::new();
    if expected == 0 || consumer.assign(&tpl).is_err() {
        return found;
    }
    let deadline = Instant::now() + timeout;
    while expected > 0 && Instant::now() < deadline {
        let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        expected -= 1;
        let carries = m
            .headers()
            .and_then(|h| Provenance::parse(rdkafka::message::Headers::iter(h).map(|h| (h.key, h.value))))
            .is_some();
        if carries {
            found.insert(m.topic().to_owned());
        }
    }
    let _ = consumer.unassign();
    found
}

fn watch(
    config: &DlqConfig,
    consumer: &BaseConsumer,
    sniffer: &BaseConsumer,
    stats: &Mutex<DlqStats>,
    stop: &AtomicBool,
) {
    let timeout = Duration::from_secs(5);
    let mut assigned: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    let (mut looked, mut carrying) = (BTreeSet::new(), BTreeSet::new());
    let mut refreshed: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        if refreshed.is_none_or(|t| t.elapsed() >= config.refresh) {
            // The brokers are asked through the sniffer's handle: the reader
            // only reads (asked for watermarks through the reader, librdkafka
            // never fetched a partition assigned later: Apache Kafka 4.4).
            match sniffer.fetch_metadata(None, timeout) {
                Ok(md) => {
                    let all: Vec<(String, Vec<i32>)> = md
                        .topics()
                        .iter()
                        .map(|t| (t.name().to_owned(), t.partitions().iter().map(|p| p.id()).collect()))
                        .collect();
                    if config.by_convention {
                        carrying.extend(sniff(sniffer, &all, &mut looked));
                    }
                    let found = dlq_topics(config, &all, &carrying);
                    // A DLQ gone from the cluster: one made again under its
                    // name starts at offset 0.
                    let gone: Vec<&String> = assigned
                        .keys()
                        .filter(|t| !all.iter().any(|(name, _)| name == *t))
                        .collect();
                    for t in &gone {
                        lock(stats).forget_positions(t);
                    }
                    if found != assigned {
                        // Only what changed: partitions of DLQs that appeared
                        // are added from the positions counted so far (0 at
                        // first; below the log start it resets to the oldest),
                        // those of DLQs gone are let go. Assigning the whole
                        // set again read from the start on tansu, and nothing
                        // more on Apache Kafka 4.4 (both measured).
                        let (mut added, mut dropped) = (TopicPartitionList::new(), TopicPartitionList::new());
                        {
                            let mut stats = lock(stats);
                            for (t, parts) in &found {
                                stats.watch(t, source_of_dlq_name(t));
                                let before = assigned.get(t);
                                for &p in parts.iter().filter(|p| before.is_none_or(|b| !b.contains(p))) {
                                    let start = Offset::Offset(stats.next_offset(t, p).unwrap_or(0));
                                    let _ = added.add_partition_offset(t, p, start);
                                }
                            }
                        }
                        for (t, parts) in &assigned {
                            let now = found.get(t);
                            for &p in parts.iter().filter(|p| now.is_none_or(|n| !n.contains(p))) {
                                dropped.add_partition(t, p);
                            }
                        }
                        let unassigned = if dropped.count() > 0 {
                            consumer.incremental_unassign(&dropped)
                        } else {
                            Ok(())
                        };
                        let result = unassigned.and_then(|()| {
                            if added.count() > 0 {
                                consumer.incremental_assign(&added)
                            } else {
                                Ok(())
                            }
                        });
                        match result {
                            Ok(()) => assigned = found,
                            Err(e) => {
                                // From nothing at the next refresh, from the positions counted.
                                tracing::warn!(cluster = %config.name, error = %e, "dlq monitor cannot assign");
                                let _ = consumer.unassign();
                                assigned.clear();
                            }
                        }
                    }
                }
                Err(e) => tracing::warn!(cluster = %config.name, error = %e, "dlq monitor has no metadata"),
            }
            // The next refresh counts from the end of this one: reading gets
            // its whole interval however long the brokers took to answer.
            refreshed = Some(Instant::now());
            // The brokers' watermarks: the letters in each DLQ, and whether
            // the monitor has read it to its end.
            for (t, parts) in &assigned {
                let marks: Option<Vec<(i32, i64, i64)>> = parts
                    .iter()
                    .map(|&p| {
                        sniffer
                            .fetch_watermarks(t, p, timeout)
                            .ok()
                            .map(|(low, high)| (p, low, high))
                    })
                    .collect();
                if let Some(marks) = marks {
                    let mut stats = lock(stats);
                    stats.ends(t, now_ms(), marks.iter().map(|m| m.2).sum());
                    stats.watermarks(t, &marks);
                }
            }
        }
        // Read until the next refresh is due: a refresh asks the brokers
        // several round trips' worth, and reading one record between two
        // refreshes (as before) crawled at one a second behind a burst.
        while !stop.load(Ordering::Relaxed) && refreshed.is_some_and(|t| t.elapsed() < config.refresh) {
            let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) else {
                continue;
            };
            let record = read_record(&m);
            if !lock(stats).record(m.topic(), record) {
                tracing::debug!(
                    topic = m.topic(),
                    partition = m.partition(),
                    offset = m.offset(),
                    "dlq record read again, not counted again"
                );
            }
        }
    }
}
