//! Reading a DLQ topic's selected partitions to their end now.

use super::{MAX_SCANNED, Selection};
use crate::ActError;
use crate::record::reader_config;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use streamsight_poller::ClusterConfig;
use streamsight_wire::dlq::Provenance;

/// What a scan read, and what the DLQ holds.
#[derive(Debug, Default)]
pub(super) struct Scanned {
    pub(super) records: u64,
    /// Each selected partition's first and next offset (low and high
    /// watermarks) when it was read: what a selection could have named.
    pub(super) held: Vec<(i32, i64, i64)>,
}

/// Reads the DLQ's selected partitions from where the selection starts to
/// where they end now, handing each record to `each` (which says whether to
/// go on). Blocking.
pub(super) fn scan(
    cluster: &ClusterConfig,
    dlq: &str,
    selection: &Selection,
    mut each: impl FnMut(&BorrowedMessage<'_>, Option<&Provenance>) -> Result<bool, ActError>,
) -> Result<Scanned, ActError> {
    let broker = |e: rdkafka::error::KafkaError| ActError::Broker(format!("cluster {}: {e}", cluster.name));
    let consumer: BaseConsumer = reader_config(cluster, "streamsight-redrive")?
        .create()
        .map_err(broker)?;
    let timeout = cluster.request_timeout;
    let meta = consumer.fetch_metadata(Some(dlq), timeout).map_err(broker)?;
    let partitions: Vec<i32> = meta
        .topics()
        .iter()
        .filter(|t| t.name() == dlq && t.error().is_none())
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .filter(|p| selection.partitions.is_empty() || selection.partitions.contains(p))
        .filter(|p| selection.letters.is_empty() || selection.letters.iter().any(|l| l.partition == *p))
        .collect();
    if partitions.is_empty() {
        return Err(ActError::UnknownTopic(format!(
            "cluster {} has no topic {dlq} (or none of the partitions named)",
            cluster.name
        )));
    }
    let mut ends = HashMap::new();
    let mut tpl = TopicPartitionList::new();
    let mut held = Vec::new();
    for p in partitions {
        let (low, high) = consumer.fetch_watermarks(dlq, p, timeout).map_err(broker)?;
        held.push((p, low, high));
        let mut start = low;
        if let Some(r) = selection.offsets {
            start = start.max(r.first);
        }
        if let Some(first) = selection
            .letters
            .iter()
            .filter(|l| l.partition == p)
            .map(|l| l.offset)
            .min()
        {
            start = start.max(first);
        }
        if start >= high {
            continue;
        }
        ends.insert(p, high);
        tpl.add_partition_offset(dlq, p, Offset::Offset(start))
            .map_err(broker)?;
    }
    if let Some(from) = selection.from_ms {
        // Where the time starts, per partition: never before the start above.
        let mut times = TopicPartitionList::new();
        for p in ends.keys() {
            times
                .add_partition_offset(dlq, *p, Offset::Offset(from))
                .map_err(broker)?;
        }
        let found = consumer.offsets_for_times(times, timeout).map_err(broker)?;
        for e in found.elements() {
            let Some(mut mine) = tpl.find_partition(dlq, e.partition()) else {
                continue;
            };
            match (e.offset(), mine.offset()) {
                (Offset::Offset(at), Offset::Offset(start)) if at > start => {
                    mine.set_offset(Offset::Offset(at)).map_err(broker)?;
                    tpl.set_partition_offset(dlq, e.partition(), Offset::Offset(at))
                        .map_err(broker)?;
                }
                // Past every record: nothing of this partition is selected.
                (Offset::End, _) => {
                    ends.remove(&e.partition());
                }
                _ => {}
            }
        }
    }
    let mut assigned = TopicPartitionList::new();
    for e in tpl.elements() {
        if ends.contains_key(&e.partition()) {
            assigned
                .add_partition_offset(dlq, e.partition(), e.offset())
                .map_err(broker)?;
        }
    }
    if ends.is_empty() {
        return Ok(Scanned { records: 0, held });
    }
    consumer.assign(&assigned).map_err(broker)?;
    let mut scanned = 0u64;
    let mut quiet_since = Instant::now();
    while !ends.is_empty() {
        match consumer.poll(Duration::from_millis(200)) {
            None => {
                if quiet_since.elapsed() > timeout.max(Duration::from_secs(5)) {
                    return Err(ActError::Broker(format!(
                        "cluster {} handed over nothing of {dlq} for {} s",
                        cluster.name,
                        timeout.max(Duration::from_secs(5)).as_secs()
                    )));
                }
            }
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                ends.remove(&p);
            }
            Some(Err(e)) => return Err(broker(e)),
            Some(Ok(m)) => {
                quiet_since = Instant::now();
                let p = m.partition();
                let Some(&end) = ends.get(&p) else { continue };
                if m.offset() >= end {
                    ends.remove(&p);
                    continue;
                }
                if m.offset() + 1 >= end {
                    ends.remove(&p);
                }
                scanned += 1;
                if scanned > MAX_SCANNED {
                    return Err(ActError::BadRequest(format!(
                        "more than {MAX_SCANNED} records of {dlq} to read: narrow the selection (--offsets, --from, --partition)"
                    )));
                }
                let provenance = m
                    .headers()
                    .and_then(|h| Provenance::parse(h.iter().map(|h| (h.key, h.value))));
                if !each(&m, provenance.as_ref())? {
                    break;
                }
            }
        }
    }
    Ok(Scanned { records: scanned, held })
}
