//! A run: what it sends, how it reports to the log, and which are running.

use super::context::{Counts, Run, Status};
use super::{Selection, destination, partition_counts};
use crate::ActError;
use crate::record::reader_config;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};
use streamsight_core::redrive::{Destination, DlqTopic, MAX_BATCH, RedriveEvent, SentLetter};
use streamsight_wire::dlq::{REDRIVE_HEADER, is_provenance, redrive_header};

/// The most a batch holds of dead letters' bytes before it is sent: a
/// batch of large letters is smaller, not larger in memory.
const BATCH_BYTES: usize = 16 << 20;

/// What a selected letter carries, read for sending.
struct Outgoing {
    partition: i32,
    offset: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
    topic: String,
    to_partition: Option<i32>,
    /// The destination's partition count.
    partitions: i32,
}

impl Outgoing {
    fn bytes(&self) -> usize {
        let h: usize = self
            .headers
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len))
            .sum();
        self.key.as_ref().map_or(0, Vec::len) + self.value.as_ref().map_or(0, Vec::len) + h
    }
}

/// A run: settles what crashed runs left in flight, then sends the selected
/// letters not sent yet, batch by batch, each claimed in the log before it is
/// sent and recorded after.
pub fn execute(run: &Run<'_>, selection: &Selection, progress: &std::sync::Mutex<Status>) -> Result<(), ActError> {
    let mut counts = Counts::default();
    super::settle::settle(run, &mut counts)?;
    lock(progress).counts = counts.clone();
    run.append(vec![RedriveEvent::Started {
        run: run.id.clone(),
        of: run.of.clone(),
        key: run.key.clone(),
        selection: serde_json::to_string(selection).unwrap_or_default(),
    }])?;
    // One pass over the DLQ: what is selected is counted as it is sent.
    let result = send_all(run, selection, &mut counts, progress);
    run.append(vec![RedriveEvent::Finished {
        run: run.id.clone(),
        of: run.of.clone(),
        selected: counts.selected,
        error: result.as_ref().err().map(ToString::to_string),
    }])?;
    lock(progress).counts = counts;
    result
}

/// A failpoint for crash tests: `STREAMSIGHT_FAILPOINT=redrive-after-delivery:N`
/// aborts the process (as kill -9 would stop it) once the N-th batch is
/// delivered and before the log is told: the moment exactly-once is hardest.
fn abort_if_asked(point: &str, n: u64) {
    static ASKED: std::sync::OnceLock<Option<(String, u64)>> = std::sync::OnceLock::new();
    let asked = ASKED.get_or_init(|| {
        let v = std::env::var("STREAMSIGHT_FAILPOINT").ok()?;
        let (name, at) = v.split_once(':')?;
        Some((name.to_owned(), at.parse().ok()?))
    });
    if asked.as_ref().is_some_and(|(name, at)| name == point && *at == n) {
        tracing::error!(point, n, "failpoint: aborting");
        std::process::abort();
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn send_all(
    run: &Run<'_>,
    selection: &Selection,
    counts: &mut Counts,
    progress: &std::sync::Mutex<Status>,
) -> Result<(), ActError> {
    let (cluster, of) = (run.cluster, &run.of);
    let broker = |e: rdkafka::error::KafkaError| run.broker(e);
    let rate = selection.rate();
    let batch_size = (rate as usize).clamp(1, 500);
    // Each destination's partition count, asked once, the first time a
    // letter goes there; never the collector's own log.
    let mut counts_by_topic: HashMap<String, i32> = HashMap::new();
    let mut count_of = |topic: &str| -> Result<i32, ActError> {
        if let Some(n) = counts_by_topic.get(topic) {
            return Ok(*n);
        }
        if run.shared.config.is_log_topic(topic) {
            return Err(ActError::Refused(format!(
                "{topic} is this collector's own log: nothing is redriven into it"
            )));
        }
        let n = partition_counts(cluster, &BTreeSet::from([topic.to_owned()]))?
            .remove(topic)
            .unwrap_or(0);
        counts_by_topic.insert(topic.to_owned(), n);
        Ok(n)
    };
    let producer: FutureProducer = crate::record::cluster_config(cluster)?
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("partitioner", "murmur2_random")
        .set(
            "message.timeout.ms",
            (cluster.request_timeout.as_millis() * 3).to_string(),
        )
        .create()
        .map_err(broker)?;
    // Asks where each destination partition ends before each batch.
    let watermarks: BaseConsumer = reader_config(cluster, "streamsight-redrive")?
        .create()
        .map_err(broker)?;
    let started = Instant::now();
    let mut queued = 0u64;
    let mut batches = 0u64;
    let mut batch: Vec<Outgoing> = Vec::with_capacity(batch_size);
    let mut flush = |batch: &mut Vec<Outgoing>, counts: &mut Counts| -> Result<(), ActError> {
        if batch.is_empty() {
            return Ok(());
        }
        // Where each destination partition ends now: a later run reads from
        // here if this one stops before it says what arrived.
        let consumer = &watermarks;
        let mut ends = Vec::new();
        let mut seen = BTreeSet::new();
        for o in batch.iter() {
            let parts: Vec<i32> = match o.to_partition {
                Some(p) => vec![p],
                None => (0..o.partitions).collect(),
            };
            for p in parts {
                if seen.insert((o.topic.clone(), p)) {
                    let (_, high) = consumer
                        .fetch_watermarks(&o.topic, p, cluster.request_timeout)
                        .map_err(broker)?;
                    ends.push((o.topic.clone(), p, high));
                }
            }
        }
        run.append(vec![RedriveEvent::Claimed {
            run: run.id.clone(),
            of: of.clone(),
            letters: batch.iter().map(|o| (o.partition, o.offset)).collect(),
            ends,
        }])?;
        let mut deliveries = Vec::with_capacity(batch.len());
        for o in batch.iter() {
            // Paced: at most `rate` records a second since the run began.
            let due = Duration::from_secs_f64(queued as f64 / f64::from(rate));
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait);
            }
            let mut headers = OwnedHeaders::new_with_capacity(o.headers.len() + 1);
            for (k, v) in &o.headers {
                headers = headers.insert(Header {
                    key: k,
                    value: v.as_deref(),
                });
            }
            let stamp = redrive_header(&run.id, &of.dlq, o.partition, o.offset);
            headers = headers.insert(Header {
                key: REDRIVE_HEADER,
                value: Some(stamp.as_bytes()),
            });
            let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&o.topic).headers(headers);
            if let Some(k) = &o.key {
                record = record.key(k.as_slice());
            }
            if let Some(v) = &o.value {
                record = record.payload(v.as_slice());
            }
            if let Some(p) = o.to_partition {
                record = record.partition(p);
            }
            let mut record = record;
            let delivery = loop {
                match producer.send_result(record) {
                    Ok(d) => break d,
                    Err((
                        rdkafka::error::KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull),
                        r,
                    )) => {
                        producer.poll(Duration::from_millis(50));
                        record = r;
                    }
                    Err((e, _)) => return Err(broker(e)),
                }
            };
            queued += 1;
            deliveries.push((o.partition, o.offset, o.topic.clone(), delivery));
        }
        let mut sent = Vec::with_capacity(deliveries.len());
        let mut failed = None;
        for (partition, offset, topic, d) in deliveries {
            match run.runtime.block_on(d) {
                Ok(Ok(d)) => sent.push(SentLetter {
                    partition,
                    offset,
                    to: Destination {
                        topic,
                        partition: d.partition,
                        offset: d.offset,
                    },
                }),
                // Left in flight: whether it arrived is checked by the next run.
                Ok(Err((e, _))) => failed = failed.or(Some(broker(e))),
                Err(_) => failed = failed.or(Some(ActError::Broker("the producer went away".into()))),
            }
        }
        batches += 1;
        abort_if_asked("redrive-after-delivery", batches);
        counts.sent += sent.len() as u64;
        if !sent.is_empty() {
            run.append(vec![RedriveEvent::Sent {
                run: run.id.clone(),
                of: of.clone(),
                sent,
            }])?;
        }
        lock(progress).counts = counts.clone();
        batch.clear();
        failed.map_or(Ok(()), Err)
    };
    let mut error = None;
    let mut held = 0usize;
    let scanned = super::scan::scan(cluster, &of.dlq, selection, |m, provenance| {
        if !selection.takes(m, provenance) {
            return Ok(true);
        }
        counts.selected += 1;
        if counts.selected > super::MAX_SELECTED {
            error = Some(ActError::BadRequest(format!(
                "more than {} dead letters selected: narrow the selection (--offsets, --from, --reason)",
                super::MAX_SELECTED
            )));
            return Ok(false);
        }
        if run
            .shared
            .redrives
            .view()
            .state(of, m.partition(), m.offset())
            .is_some()
        {
            counts.already_sent += 1;
            return Ok(true);
        }
        let (Some(topic), mut to_partition) = destination(selection, &of.dlq, provenance) else {
            counts.no_destination += 1;
            return Ok(true);
        };
        let partitions = match count_of(&topic) {
            Ok(n) => n,
            Err(e) => {
                error = Some(e);
                return Ok(false);
            }
        };
        if to_partition.is_some_and(|p| p >= partitions) {
            to_partition = None;
        }
        let headers = m.headers().map_or_else(Vec::new, |h| {
            h.iter()
                .filter(|h| !is_provenance(h.key) && h.key != REDRIVE_HEADER)
                .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
                .collect()
        });
        batch.push(Outgoing {
            partition: m.partition(),
            offset: m.offset(),
            key: m.key().map(<[u8]>::to_vec),
            value: m.payload().map(<[u8]>::to_vec),
            headers,
            topic,
            to_partition,
            partitions,
        });
        held += batch.last().map_or(0, Outgoing::bytes);
        if batch.len() >= batch_size.min(MAX_BATCH) || held >= BATCH_BYTES {
            held = 0;
            if let Err(e) = flush(&mut batch, counts) {
                error = Some(e);
                return Ok(false);
            }
        }
        Ok(true)
    })?;
    if let Some(e) = error {
        return Err(e);
    }
    if counts.selected == 0
        && let Some(named) = selection.named()
    {
        let why = super::nothing_matched(&of.dlq, &named, &scanned.held, &BTreeMap::new());
        return Err(ActError::NotFound(why));
    }
    flush(&mut batch, counts)?;
    lock(progress).counts = counts.clone();
    tracing::info!(run = %run.id, dlq = %of.dlq, sent = counts.sent, already = counts.already_sent, "redrive finished");
    Ok(())
}

/// Redrives of this node's tenant running in this process: one at a time
/// per DLQ topic. Installed as a feature ([`crate::ActService`]).
#[derive(Debug, Default)]
pub struct Running {
    runs: std::sync::Mutex<HashMap<DlqTopic, String>>,
    by_run: std::sync::Mutex<HashMap<String, Arc<std::sync::Mutex<Status>>>>,
}

impl Running {
    /// Takes `of` for `run`, unless a run has it.
    pub fn start(&self, of: &DlqTopic, run: &str) -> Result<Arc<std::sync::Mutex<Status>>, ActError> {
        let mut runs = lock(&self.runs);
        if let Some(other) = runs.get(of) {
            return Err(ActError::Refused(format!(
                "redrive {other} of {} is running: one at a time per DLQ topic",
                of.dlq
            )));
        }
        let status = Arc::new(std::sync::Mutex::new(Status::default()));
        runs.insert(of.clone(), run.to_owned());
        let mut by_run = lock(&self.by_run);
        if by_run.len() >= streamsight_core::redrive::RUNS_KEPT {
            // Forget the finished ones; running ones stay.
            by_run.retain(|_, s| !lock(s).done);
        }
        by_run.insert(run.to_owned(), Arc::clone(&status));
        Ok(status)
    }

    /// `run` ended, with `result`.
    pub fn finish(&self, of: &DlqTopic, run: &str, result: Result<(), ActError>) {
        if let Some(s) = lock(&self.by_run).get(run) {
            let mut s = lock(s);
            s.done = true;
            s.error = result.err().map(|e| e.to_string());
        }
        lock(&self.runs).remove(of);
    }

    pub fn is_running(&self, run: &str) -> bool {
        lock(&self.runs).values().any(|r| r == run)
    }

    pub fn status(&self, run: &str) -> Option<Status> {
        lock(&self.by_run).get(run).map(|c| lock(c).clone())
    }
}
