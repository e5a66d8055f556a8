//! Settling what a run that stopped left in flight.

use super::MAX_VERIFIED;
use super::context::{Counts, Run};
use crate::ActError;
use crate::record::reader_config;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};
use streamsight_core::redrive::{Destination, MAX_BATCH, RedriveEvent, SentLetter};
use streamsight_wire::dlq::{REDRIVE_HEADER, parse_redrive_header};

/// Settles the letters earlier runs claimed and never said they sent: reads
/// each destination from where it ended at the claim for their redrive
/// header. Found: sent; not found: released, to be sent again.
pub(super) fn settle(run: &Run<'_>, counts: &mut Counts) -> Result<(), ActError> {
    let (cluster, of) = (run.cluster, &run.of);
    let in_flight = run.shared.redrives.view().in_flight(of);
    if in_flight.is_empty() {
        return Ok(());
    }
    let broker = |e: rdkafka::error::KafkaError| run.broker(e);
    let mut from: BTreeMap<(String, i32), i64> = BTreeMap::new();
    for (_, _, ends) in &in_flight {
        for (t, p, end) in ends.iter() {
            let at = from.entry((t.clone(), *p)).or_insert(*end);
            *at = (*at).min(*end);
        }
    }
    let wanted: HashMap<(i32, i64), String> = in_flight.iter().map(|(k, run, _)| (*k, run.clone())).collect();
    let consumer: BaseConsumer = reader_config(cluster, "streamsight-redrive")?
        .create()
        .map_err(broker)?;
    let mut tpl = TopicPartitionList::new();
    let mut ends = HashMap::new();
    for ((t, p), start) in &from {
        let (_, high) = consumer
            .fetch_watermarks(t, *p, cluster.request_timeout)
            .map_err(broker)?;
        if *start < high {
            tpl.add_partition_offset(t, *p, Offset::Offset(*start))
                .map_err(broker)?;
            ends.insert((t.clone(), *p), high);
        }
    }
    let mut found: BTreeMap<String, Vec<SentLetter>> = BTreeMap::new();
    if !ends.is_empty() {
        consumer.assign(&tpl).map_err(broker)?;
        let mut read = 0u64;
        let mut quiet_since = Instant::now();
        while !ends.is_empty() {
            match consumer.poll(Duration::from_millis(200)) {
                None if quiet_since.elapsed() > cluster.request_timeout.max(Duration::from_secs(5)) => {
                    return Err(ActError::Broker(format!(
                        "cluster {}: the destinations of in-flight dead letters could not be read, so none is sent again",
                        cluster.name
                    )));
                }
                None => {}
                Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => {
                    // Which topic is not said: the ends below close each.
                }
                Some(Err(e)) => return Err(broker(e)),
                Some(Ok(m)) => {
                    quiet_since = Instant::now();
                    let key = (m.topic().to_owned(), m.partition());
                    if ends.get(&key).is_none_or(|end| m.offset() + 1 >= *end) {
                        ends.remove(&key);
                    }
                    read += 1;
                    if read > MAX_VERIFIED {
                        return Err(ActError::Refused(format!(
                            "{} dead letters are in flight from a run that stopped, and their destinations moved on by more than {MAX_VERIFIED} records: not sent again, as whether they arrived cannot be checked",
                            wanted.len()
                        )));
                    }
                    let Some(h) = m.headers() else { continue };
                    for h in h.iter().filter(|h| h.key == REDRIVE_HEADER) {
                        let Some((run, dlq, p, o)) = h.value.and_then(parse_redrive_header) else {
                            continue;
                        };
                        if dlq == of.dlq && wanted.get(&(p, o)).is_some_and(|r| r == run) {
                            found.entry(run.to_owned()).or_default().push(SentLetter {
                                partition: p,
                                offset: o,
                                to: Destination {
                                    topic: m.topic().to_owned(),
                                    partition: m.partition(),
                                    offset: m.offset(),
                                },
                            });
                        }
                    }
                }
            }
        }
    }
    let arrived: BTreeSet<(i32, i64)> = found.values().flatten().map(|s| (s.partition, s.offset)).collect();
    let mut released: BTreeMap<String, Vec<(i32, i64)>> = BTreeMap::new();
    for (k, run, _) in &in_flight {
        if !arrived.contains(k) {
            released.entry(run.clone()).or_default().push(*k);
        }
    }
    counts.settled_sent = arrived.len() as u64;
    counts.settled_released = released.values().map(Vec::len).sum::<usize>() as u64;
    let mut events = Vec::new();
    for (run, sent) in found {
        for chunk in sent.chunks(MAX_BATCH) {
            events.push(RedriveEvent::Sent {
                run: run.clone(),
                of: of.clone(),
                sent: chunk.to_vec(),
            });
        }
    }
    for (run, letters) in released {
        for chunk in letters.chunks(MAX_BATCH) {
            events.push(RedriveEvent::Released {
                run: run.clone(),
                of: of.clone(),
                letters: chunk.to_vec(),
            });
        }
    }
    tracing::info!(dlq = %of.dlq, sent = counts.settled_sent, released = counts.settled_released, "in-flight dead letters settled");
    run.append(events)
}
