//! What the wrappers record, aggregated per 10 s bucket, and the thread that ships
//! it to the collector as Data Streams payloads.
//!
//! The application's threads only touch an in-memory aggregate for a moment; the
//! shipper swaps it out and does all I/O. A collector that is down costs the
//! application the lost payload (counted), nothing else. The aggregate is bounded:
//! past `max_keys` distinct keys, new keys are dropped and counted.

use crate::config::SdkConfig;
use std::collections::HashMap as StdHashMap;

/// Hot-path maps: foldhash, several times faster than SipHash on short keys.
type HashMap<K, V> = StdHashMap<K, V, foldhash::fast::RandomState>;
use crate::delivery::{ConsumedCounters, Outcome, window_of};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;
use streamsight_wire::dsm::payload::{
    Backlog, Bucket, Delivery, FailedSends, Payload, ProducedCount, StatsPoint, encode,
};
use streamsight_wire::dsm::sketch::SketchBuilder;

/// Counters of the SDK's own health, counted by the SDK alone: read them with
/// [`SdkStats::counters`].
#[derive(Debug, Default)]
pub struct SdkStats {
    pub(crate) payloads_sent: AtomicU64,
    pub(crate) payloads_lost: AtomicU64,
    pub(crate) points_dropped: AtomicU64,
    pub(crate) messages_produced: AtomicU64,
    pub(crate) sends_failed: AtomicU64,
    pub(crate) messages_consumed: AtomicU64,
    pub(crate) commits_tracked: AtomicU64,
    pub(crate) dead_lettered: AtomicU64,
    pub(crate) dead_letter_failures: AtomicU64,
    pub(crate) schema_violations: AtomicU64,
}

/// The SDK's counters at one moment.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SdkCounters {
    /// Payloads the collector took.
    pub payloads_sent: u64,
    /// Payloads the collector did not take (down, refused, timed out).
    pub payloads_lost: u64,
    /// Points dropped because the aggregate was full.
    pub points_dropped: u64,
    /// Sends the broker acknowledged at a real position.
    pub messages_produced: u64,
    /// Sends that failed, before or at the broker.
    pub sends_failed: u64,
    /// Messages a wrapper's `recv` or `poll` returned.
    pub messages_consumed: u64,
    /// Commits the broker accepted.
    pub commits_tracked: u64,
    /// Records routed to a dead-letter queue.
    pub dead_lettered: u64,
    /// Records that could not be dead-lettered even after retries: dropped.
    pub dead_letter_failures: u64,
    /// Records that failed schema validation.
    pub schema_violations: u64,
}

impl SdkStats {
    /// The counters now.
    pub fn counters(&self) -> SdkCounters {
        SdkCounters {
            payloads_sent: self.payloads_sent.load(Relaxed),
            payloads_lost: self.payloads_lost.load(Relaxed),
            points_dropped: self.points_dropped.load(Relaxed),
            messages_produced: self.messages_produced.load(Relaxed),
            sends_failed: self.sends_failed.load(Relaxed),
            messages_consumed: self.messages_consumed.load(Relaxed),
            commits_tracked: self.commits_tracked.load(Relaxed),
            dead_lettered: self.dead_lettered.load(Relaxed),
            dead_letter_failures: self.dead_letter_failures.load(Relaxed),
            schema_violations: self.schema_violations.load(Relaxed),
        }
    }
}

/// One checkpoint of one message: latencies in seconds, payload size in bytes.
#[derive(Debug)]
pub(crate) struct Checkpoint<'a> {
    pub now_ms: i64,
    pub hash: u64,
    pub parent_hash: u64,
    /// Sorted, each tag as pieces to concatenate.
    pub edge_tags: &'a [&'a [&'a str]],
    pub edge_latency: f64,
    pub pathway_latency: f64,
    pub payload_size: f64,
}

#[derive(Debug)]
struct StatsAcc {
    parent_hash: u64,
    edge_tags: Vec<String>,
    edge_latency: SketchBuilder,
    pathway_latency: SketchBuilder,
    payload_size: SketchBuilder,
}

/// One period's offsets and failures. Delivery callbacks (librdkafka's thread)
/// and checkpoints (the application's) take different locks.
#[derive(Debug, Default)]
struct Aggregate {
    keys: usize,
    /// Sends' outcomes in the order they came: which of a partition's
    /// failures and successes came last.
    outcomes: u64,
    /// topic -> partition -> highest acknowledged offset, and the outcome
    /// number of its last success.
    produced: HashMap<String, HashMap<i32, (i64, u64)>>,
    /// group -> topic -> partition -> highest committed offset.
    committed: HashMap<String, HashMap<String, HashMap<i32, i64>>>,
    /// topic -> (partition or -1, error, window) -> count, a few trace ids,
    /// and the outcome number of the last one.
    failed: HashMap<String, HashMap<FailureKey, Failures>>,
    /// topic -> (partition, window of record timestamps) -> acked records.
    produced_windows: HashMap<String, HashMap<(i32, i64), WindowCount>>,
}

/// Partition (or -1), error label, window.
type FailureKey = (i32, String, i64);

/// Failures of one key: how many, a few trace ids, the outcome number of the last.
type Failures = (u64, Vec<String>, u64);

/// Acknowledged records of one partition in one window, and where they landed.
#[derive(Copy, Clone, Debug)]
struct WindowCount {
    count: u64,
    first: i64,
    last: i64,
}

const FAILED_TRACE_IDS_KEPT: usize = 5;

/// One period's pathway sketches: (bucket start ms, pathway hash) -> sketches.
#[derive(Debug, Default)]
struct Pathways {
    keys: usize,
    stats: HashMap<(i64, u64), StatsAcc>,
}

#[derive(Debug)]
struct Inner {
    config: SdkConfig,
    aggregate: Mutex<Aggregate>,
    pathways: Mutex<Pathways>,
    stats: SdkStats,
    consumed: ConsumedCounters,
    stop: Mutex<bool>,
    wake: Condvar,
    last_error: Mutex<Option<String>>,
}

/// A handle on the SDK's telemetry: cheap to clone, one shipper thread per
/// [`Telemetry::start`].
#[derive(Clone, Debug)]
pub struct Telemetry {
    inner: Arc<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Records a new key only while the aggregate has room.
fn room(keys: &mut usize, max: usize, stats: &SdkStats) -> bool {
    if *keys >= max {
        stats.points_dropped.fetch_add(1, Relaxed);
        return false;
    }
    *keys += 1;
    true
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Telemetry {
    /// Telemetry that ships every `flush_interval` on its own thread.
    pub fn start(config: SdkConfig) -> Self {
        let t = Self::unshipped(config);
        let shipper = t.clone();
        let spawned = std::thread::Builder::new()
            .name("streamsight-sdk".into())
            .spawn(move || shipper.ship_loop());
        if let Err(e) = spawned {
            tracing::error!(error = %e, "streamsight-sdk: cannot start the shipper thread; telemetry is not shipped");
        }
        t
    }

    /// Telemetry that only aggregates: the caller takes payloads with
    /// [`Telemetry::take_payload`] (tests, or an application with its own transport).
    pub fn unshipped(config: SdkConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                aggregate: Mutex::new(Aggregate::default()),
                pathways: Mutex::new(Pathways::default()),
                stats: SdkStats::default(),
                consumed: ConsumedCounters::new(),
                stop: Mutex::new(false),
                wake: Condvar::new(),
                last_error: Mutex::new(None),
            }),
        }
    }

    /// What it was started with.
    pub fn config(&self) -> &SdkConfig {
        &self.inner.config
    }

    /// The live counters (see [`Telemetry::counters`] for a copy).
    pub fn stats(&self) -> &SdkStats {
        &self.inner.stats
    }

    /// The SDK's counters now.
    pub fn counters(&self) -> SdkCounters {
        self.inner.stats.counters()
    }

    /// A send the broker acknowledged at a real position; `timestamp_ms` is the
    /// record's, which places it in its accounting window.
    pub(crate) fn produced(&self, topic: &str, partition: i32, offset: i64, timestamp_ms: i64) {
        let i = &self.inner;
        i.stats.messages_produced.fetch_add(1, Relaxed);
        let mut agg = lock(&i.aggregate);
        let agg = &mut *agg;
        let window = window_of(timestamp_ms);
        match agg
            .produced_windows
            .get_mut(topic)
            .and_then(|w| w.get_mut(&(partition, window)))
        {
            Some(w) => {
                w.count += 1;
                w.first = w.first.min(offset);
                w.last = w.last.max(offset);
            }
            None => {
                if (agg.produced_windows.contains_key(topic) || room(&mut agg.keys, i.config.max_keys, &i.stats))
                    && room(&mut agg.keys, i.config.max_keys, &i.stats)
                {
                    let count = WindowCount {
                        count: 1,
                        first: offset,
                        last: offset,
                    };
                    agg.produced_windows.entry_ref(topic).insert((partition, window), count);
                }
            }
        }
        agg.outcomes += 1;
        let outcome = agg.outcomes;
        // The common case, a partition already seen this period: one lookup each.
        if let Some((o, last)) = agg.produced.get_mut(topic).and_then(|p| p.get_mut(&partition)) {
            *o = (*o).max(offset);
            *last = outcome;
            return;
        }
        if !agg.produced.contains_key(topic) && !room(&mut agg.keys, i.config.max_keys, &i.stats) {
            return;
        }
        let partitions = agg.produced.entry_ref(topic);
        if !room(&mut agg.keys, i.config.max_keys, &i.stats) {
            return;
        }
        partitions.insert(partition, (offset, outcome));
    }

    /// A send that failed; `partition` is -1 when none was assigned.
    pub(crate) fn failed(&self, topic: &str, partition: i32, error: &str, timestamp_ms: i64, trace_id: Option<String>) {
        let i = &self.inner;
        i.stats.sends_failed.fetch_add(1, Relaxed);
        let mut agg = lock(&i.aggregate);
        let agg = &mut *agg;
        if !agg.failed.contains_key(topic) && !room(&mut agg.keys, i.config.max_keys, &i.stats) {
            return;
        }
        let errors = agg.failed.entry_ref(topic);
        let key = (partition.max(-1), error.to_owned(), window_of(timestamp_ms));
        if !errors.contains_key(&key) && !room(&mut agg.keys, i.config.max_keys, &i.stats) {
            return;
        }
        agg.outcomes += 1;
        let (count, ids, last) = errors.entry(key).or_default();
        *count += 1;
        *last = agg.outcomes;
        if let Some(id) = trace_id
            && ids.len() < FAILED_TRACE_IDS_KEPT
        {
            ids.push(id);
        }
    }

    /// A record a consumer of `group` received (counted for drop accounting).
    pub(crate) fn received(&self, group: &Arc<str>, topic: &str, partition: i32, offset: i64, timestamp_ms: i64) {
        if !self.inner.config.count_deliveries {
            return;
        }
        self.inner
            .consumed
            .received(group, topic, partition, offset, timestamp_ms, now_ms());
    }

    /// What the application did with a received record.
    pub(crate) fn outcome(
        &self,
        group: &Arc<str>,
        topic: &str,
        partition: i32,
        timestamp_ms: i64,
        outcome: Outcome,
        trace_id: Option<String>,
    ) {
        self.inner
            .consumed
            .outcome(group, topic, partition, timestamp_ms, outcome, trace_id);
    }

    pub(crate) fn revoked(&self, group: &Arc<str>, partitions: impl Iterator<Item = (String, i32)>) {
        self.inner.consumed.revoked(group, partitions);
    }

    /// A commit the broker accepted: `offset` is the next offset to read.
    pub(crate) fn committed(&self, group: &str, topic: &str, partition: i32, offset: i64) {
        let i = &self.inner;
        i.stats.commits_tracked.fetch_add(1, Relaxed);
        let mut agg = lock(&i.aggregate);
        let agg = &mut *agg;
        if !agg.committed.contains_key(group) && !room(&mut agg.keys, i.config.max_keys, &i.stats) {
            return;
        }
        let topics = agg.committed.entry_ref(group);
        if !topics.contains_key(topic) && !room(&mut agg.keys, i.config.max_keys, &i.stats) {
            return;
        }
        let partitions = topics.entry_ref(topic);
        if !partitions.contains_key(&partition) && !room(&mut agg.keys, i.config.max_keys, &i.stats) {
            return;
        }
        let o = partitions.entry(partition).or_insert(offset);
        *o = (*o).max(offset);
    }

    pub(crate) fn consumed(&self) {
        self.inner.stats.messages_consumed.fetch_add(1, Relaxed);
    }

    /// A pathway checkpoint.
    pub(crate) fn checkpoint(&self, c: &Checkpoint<'_>) {
        let i = &self.inner;
        let bucket = c.now_ms - c.now_ms.rem_euclid(i.config.bucket_ms());
        let mut agg = lock(&i.pathways);
        let agg = &mut *agg;
        if !agg.stats.contains_key(&(bucket, c.hash)) && !room(&mut agg.keys, i.config.max_keys, &i.stats) {
            return;
        }
        let acc = agg.stats.entry((bucket, c.hash)).or_insert_with(|| StatsAcc {
            parent_hash: c.parent_hash,
            edge_tags: c.edge_tags.iter().map(|t| t.concat()).collect(),
            edge_latency: SketchBuilder::default(),
            pathway_latency: SketchBuilder::default(),
            payload_size: SketchBuilder::default(),
        });
        acc.edge_latency.add(c.edge_latency);
        acc.pathway_latency.add(c.pathway_latency);
        acc.payload_size.add(c.payload_size);
    }

    /// Takes what was aggregated as one payload; `None` when there is nothing.
    pub fn take_payload(&self) -> Option<Payload> {
        let agg = std::mem::take(&mut *lock(&self.inner.aggregate));
        let pathways = std::mem::take(&mut *lock(&self.inner.pathways));
        let c = &self.inner.config;
        let now = now_ms();
        let period_start = now - c.bucket_ms();
        let mut backlogs = Vec::new();
        let cluster = |tags: &mut Vec<String>| {
            if let Some(id) = &c.kafka_cluster_id {
                tags.push(format!("kafka_cluster_id:{id}"));
            }
        };
        for (topic, partitions) in &agg.produced {
            for (partition, (offset, _)) in partitions {
                let mut tags = vec![
                    "type:kafka_produce".into(),
                    format!("topic:{topic}"),
                    format!("partition:{partition}"),
                ];
                cluster(&mut tags);
                backlogs.push(Backlog { tags, value: *offset });
            }
        }
        for (group, topics) in &agg.committed {
            for (topic, partitions) in topics {
                for (partition, offset) in partitions {
                    let mut tags = vec![
                        "type:kafka_commit".into(),
                        format!("consumer_group:{group}"),
                        format!("topic:{topic}"),
                        format!("partition:{partition}"),
                    ];
                    cluster(&mut tags);
                    backlogs.push(Backlog { tags, value: *offset });
                }
            }
        }
        // The last success on a partition (on any, for a failure that had
        // none) after a failure there: the producer recovered.
        let last_success = |topic: &str, partition: i32| -> Option<u64> {
            let partitions = agg.produced.get(topic)?;
            if partition < 0 {
                partitions.values().map(|(_, last)| *last).max()
            } else {
                partitions.get(&partition).map(|(_, last)| *last)
            }
        };
        let failed_sends: Vec<FailedSends> = agg
            .failed
            .iter()
            .flat_map(|(topic, errors)| {
                errors
                    .iter()
                    .map(move |((partition, error, window), (count, ids, last))| FailedSends {
                        topic: topic.clone(),
                        partition: *partition,
                        error: error.clone(),
                        count: *count,
                        cluster: c.kafka_cluster_id.clone().unwrap_or_default(),
                        window_ms: *window,
                        trace_ids: ids.clone(),
                        recovered: last_success(topic, *partition).is_some_and(|s| s > *last),
                    })
            })
            .collect();
        let (consumed, skipped, started) = self.inner.consumed.take();
        let delivery = Delivery {
            cluster: c.kafka_cluster_id.clone().unwrap_or_default(),
            produced: agg
                .produced_windows
                .iter()
                .flat_map(|(topic, windows)| {
                    windows.iter().map(move |(&(partition, window_ms), w)| ProducedCount {
                        topic: topic.clone(),
                        partition,
                        window_ms,
                        count: w.count,
                        first_offset: w.first,
                        last_offset: w.last,
                    })
                })
                .collect(),
            consumed,
            skipped,
            started,
        };
        let mut buckets: HashMap<i64, Vec<StatsPoint>> = HashMap::default();
        for ((bucket, hash), acc) in pathways.stats {
            buckets.entry(bucket).or_default().push(StatsPoint {
                edge_tags: acc.edge_tags,
                hash,
                parent_hash: acc.parent_hash,
                pathway_latency: acc.pathway_latency.encode(),
                edge_latency: acc.edge_latency.encode(),
                payload_size: acc.payload_size.encode(),
                timestamp_type: "current".into(),
            });
        }
        if backlogs.is_empty() && failed_sends.is_empty() && buckets.is_empty() && delivery.is_empty() {
            return None;
        }
        let ns = |ms: i64| u64::try_from(ms).unwrap_or(0) * 1_000_000;
        let duration = ns(c.bucket_ms());
        let mut stats: Vec<Bucket> = buckets
            .into_iter()
            .map(|(start, stats)| Bucket {
                start: ns(start),
                duration,
                stats,
                backlogs: Vec::new(),
            })
            .collect();
        stats.sort_by_key(|b| b.start);
        // Backlogs describe the period just ended.
        stats.push(Bucket {
            start: ns(period_start),
            duration,
            stats: Vec::new(),
            backlogs,
        });
        Some(Payload {
            env: c.env.clone(),
            service: c.service.clone(),
            lang: "rust".into(),
            tracer_version: concat!("streamsight-sdk/", env!("CARGO_PKG_VERSION")).into(),
            version: c.version.clone(),
            stats,
            failed_sends,
            delivery,
            ..Default::default()
        })
    }

    /// Ships what was aggregated now. Returns whether the collector took it.
    /// **Blocks** the calling thread for one HTTP request (at most its
    /// timeout): from async code, await [`Telemetry::flush_async`].
    pub fn flush(&self) -> bool {
        let Some(payload) = self.take_payload() else {
            return true;
        };
        let body = encode(&payload);
        let key = self.inner.config.api_key.as_ref().map(|k| k.0.as_str());
        match crate::http::post_msgpack(&self.inner.config.collector_url, "/v0.1/pipeline_stats", &body, key) {
            Ok(()) => {
                self.inner.stats.payloads_sent.fetch_add(1, Relaxed);
                true
            }
            Err(e) => {
                self.inner.stats.payloads_lost.fetch_add(1, Relaxed);
                *lock(&self.inner.last_error) = Some(e.to_string());
                false
            }
        }
    }

    /// Why the last payload did not reach the collector, if one did not.
    pub fn last_error(&self) -> Option<String> {
        lock(&self.inner.last_error).clone()
    }

    /// [`Telemetry::flush`] on a thread of its own: an async service awaits it
    /// without blocking its runtime's worker (any runtime).
    pub async fn flush_async(&self) -> bool {
        let t = self.clone();
        off_thread(move || t.flush()).await.unwrap_or(false)
    }

    /// [`Telemetry::shutdown`] on a thread of its own, awaited.
    pub async fn shutdown_async(&self) {
        let t = self.clone();
        off_thread(move || t.shutdown()).await;
    }

    /// Stops the shipper after one last flush. Idempotent. **Blocks** the
    /// calling thread for that flush (one HTTP request to the collector, at
    /// most its timeout): from async code, await [`Telemetry::shutdown_async`].
    pub fn shutdown(&self) {
        *lock(&self.inner.stop) = true;
        self.inner.wake.notify_all();
        self.flush();
    }

    fn ship_loop(&self) {
        let every = self.inner.config.flush_interval.max(Duration::from_millis(10));
        loop {
            let stop = lock(&self.inner.stop);
            let (stop, _) = self
                .inner
                .wake
                .wait_timeout_while(stop, every, |stop| !*stop)
                .unwrap_or_else(|p| p.into_inner());
            if *stop {
                return;
            }
            drop(stop);
            self.flush();
        }
    }
}

/// `f` on a new thread, its result awaited; run here when no thread can
/// start. `None` when `f` panicked.
async fn off_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let f = Arc::new(Mutex::new(Some(f)));
    let on_thread = f.clone();
    let spawned = std::thread::Builder::new()
        .name("streamsight-sdk-flush".into())
        .spawn(move || {
            let f = lock(&on_thread).take();
            if let Some(f) = f {
                let _ = tx.send(f());
            }
        });
    if spawned.is_err() {
        let f = lock(&f).take();
        return f.map(|f| f());
    }
    rx.await.ok()
}

/// `HashMap<String, V>::entry` without allocating a key that is already there.
trait EntryRef<V> {
    fn entry_ref(&mut self, key: &str) -> &mut V;
}

impl<V: Default> EntryRef<V> for HashMap<String, V> {
    fn entry_ref(&mut self, key: &str) -> &mut V {
        if !self.contains_key(key) {
            self.insert(key.to_owned(), V::default());
        }
        self.get_mut(key).unwrap_or_else(|| unreachable!("inserted above"))
    }
}

#[cfg(test)]
mod keys {
    use super::*;
    use streamsight_collector::auth::{KeyFile, Scope, generate};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn payloads_carry_the_api_key_a_collector_asks_for() {
        let dir = std::env::temp_dir().join(format!("streamsight-sdk-keys-{}", std::process::id()));
        let key = generate("default", Scope::Ingest, 0).unwrap();
        KeyFile {
            keys: vec![key.stored.clone()],
        }
        .save(&dir.join("keys.json"))
        .unwrap();
        let config = streamsight_collector::ServeConfig {
            intake_listen: "127.0.0.1:0".parse().unwrap(),
            api_listen: "127.0.0.1:0".parse().unwrap(),
            storage: "memory://".into(),
            keys_file: dir.join("keys.json"),
            ..streamsight_collector::ServeConfig::ephemeral()
        };
        let running = streamsight_collector::serve(config, streamsight_core::EngineConfig::default())
            .await
            .unwrap();
        let url = format!("http://{}", running.intake_addr);
        let ship = move |api_key: Option<String>| {
            let config = SdkConfig {
                collector_url: url.clone(),
                api_key: api_key.map(crate::config::ApiKey),
                ..SdkConfig::new("checkout")
            };
            let t = Telemetry::unshipped(config);
            t.produced("orders", 0, 41, now_ms());
            (t.flush(), t.last_error())
        };
        let (with_key, without) = tokio::task::spawn_blocking(move || (ship(Some(key.token)), ship(None)))
            .await
            .unwrap();
        assert_eq!(with_key, (true, None));
        assert!(!without.0 && without.1.unwrap().contains("401"));
        running.shutdown().await;
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_key_is_never_printed() {
        let c = SdkConfig {
            api_key: Some(crate::config::ApiKey("ssk_secret".into())),
            ..SdkConfig::new("s")
        };
        assert!(!format!("{c:?}").contains("ssk_secret"));
    }
}

#[cfg(test)]
mod off_thread {
    use super::*;

    /// On a single-threaded runtime, a blocking flush would stall every
    /// task; the async one lets a timer fire while it waits on the collector.
    #[tokio::test(flavor = "current_thread")]
    async fn flush_async_leaves_the_runtime_free() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut config = SdkConfig::new("svc");
        // A collector that accepts and never answers: the flush waits its timeout.
        config.collector_url = format!("http://{}", listener.local_addr().unwrap());
        let t = Telemetry::unshipped(config);
        t.produced("orders", 0, 1, now_ms());
        let ticked = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = ticked.clone();
        let timer = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            flag.store(true, Relaxed);
        });
        let taken = t.flush_async().await;
        assert!(!taken, "no answer is no delivery");
        assert!(ticked.load(Relaxed), "the runtime ran other tasks meanwhile");
        timer.await.unwrap();
        assert_eq!(t.counters().payloads_lost, 1);
        t.shutdown_async().await;
        drop(listener);
    }
}
