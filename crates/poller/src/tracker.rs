//! Turns successive snapshots of one cluster into engine observations, and
//! decides when groups and topics are gone. Pure: no I/O, time from the snapshot.
//!
//! Only changes are durable (a poll every 10 s over 20,000 partitions would
//! otherwise write 4,000 rows a second for nothing). Answers that only confirm
//! what is known are transient: applied to the engine, never stored. When an end
//! offset moves, its last sighting at the old value is stored with the new one,
//! so a replayed history brackets produce times as tightly as the live one.

use crate::snapshot::Snapshot;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use streamsight_core::{EndOffsetSource, Millis};
use streamsight_store::{Record, StoredObservation};

/// What one snapshot changes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Update {
    /// To store, then apply.
    pub durable: Vec<Record>,
    /// To apply only.
    pub transient: Vec<Record>,
}

#[derive(Clone, Debug, Default)]
struct PartitionSeen {
    end: Option<i64>,
    /// When `end` was last confirmed, and whether that sighting is stored.
    end_at: Millis,
    end_at_stored: bool,
    log_start: Option<i64>,
}

#[derive(Clone, Debug, Default)]
struct TopicSeen {
    id: Option<String>,
    partitions: BTreeMap<i32, PartitionSeen>,
    missing_since: Option<Millis>,
}

#[derive(Clone, Debug, Default)]
struct GroupSeen {
    offsets: HashMap<(String, i32), i64>,
    missing_since: Option<Millis>,
}

#[derive(Debug)]
pub struct Tracker {
    cluster: String,
    forget_after_ms: i64,
    topics: BTreeMap<String, TopicSeen>,
    groups: BTreeMap<String, GroupSeen>,
}

impl Tracker {
    pub fn new(cluster: &str, forget_after: Duration) -> Self {
        Self {
            cluster: cluster.to_owned(),
            forget_after_ms: streamsight_core::time::duration_ms(forget_after),
            topics: BTreeMap::new(),
            groups: BTreeMap::new(),
        }
    }

    /// Seeds what is already known (from the store, after a restart), so that
    /// an unchanged commit is not recorded again as a fresh one.
    pub fn remember_commit(&mut self, group: &str, topic: &str, partition: i32, offset: i64) {
        let g = self.groups.entry(group.to_owned()).or_default();
        g.offsets.insert((topic.to_owned(), partition), offset);
    }

    pub fn update(&mut self, snap: &Snapshot) -> Update {
        let mut u = Update::default();
        let at = snap.at;
        if snap.metadata_ok {
            self.topics_update(snap, &mut u);
        } else {
            // Nothing answered: everything known is unconfirmed from now on.
            for (topic, t) in &self.topics {
                for &partition in t.partitions.keys() {
                    u.transient.push(self.record(at, self.unreachable(topic, partition)));
                }
            }
        }
        self.groups_update(snap, &mut u);
        u
    }

    fn topics_update(&mut self, snap: &Snapshot, u: &mut Update) {
        let at = snap.at;
        let cluster = self.cluster.clone();
        let mut out = std::mem::take(u);
        for t in &snap.topics {
            let seen = self.topics.entry(t.name.clone()).or_default();
            seen.missing_since = None;
            if let (Some(old), Some(new)) = (&seen.id, &t.id)
                && old != new
            {
                out.durable.push(record(
                    at,
                    StoredObservation::TopicRecreated {
                        cluster: cluster.clone(),
                        topic: t.name.clone(),
                    },
                ));
                seen.partitions.clear();
            }
            if t.id.is_some() {
                seen.id.clone_from(&t.id);
            }
            for p in &t.partitions {
                let ps = seen.partitions.entry(p.partition).or_default();
                let Some(end) = p.end else {
                    out.transient
                        .push(record(at, unreachable(&cluster, &t.name, p.partition)));
                    continue;
                };
                if let Some(start) = p.log_start
                    && ps.log_start != Some(start)
                {
                    ps.log_start = Some(start);
                    out.durable.push(record(
                        at,
                        StoredObservation::LogStart {
                            cluster: cluster.clone(),
                            topic: t.name.clone(),
                            partition: p.partition,
                            offset: start,
                        },
                    ));
                }
                let end_record = |offset: i64, at: Millis| {
                    record(
                        at,
                        StoredObservation::EndOffset {
                            cluster: cluster.clone(),
                            topic: t.name.clone(),
                            partition: p.partition,
                            offset,
                            source: EndOffsetSource::Broker,
                        },
                    )
                };
                if ps.end == Some(end) {
                    out.transient.push(end_record(end, at));
                    ps.end_at_stored = false;
                } else {
                    if let Some(old) = ps.end
                        && !ps.end_at_stored
                    {
                        out.durable.push(end_record(old, ps.end_at));
                    }
                    out.durable.push(end_record(end, at));
                    ps.end = Some(end);
                    ps.end_at_stored = true;
                }
                ps.end_at = at;
            }
            // Partitions only grow in Kafka; one that vanished went with a recreation.
            let listed: Vec<i32> = t.partitions.iter().map(|p| p.partition).collect();
            seen.partitions.retain(|p, _| listed.contains(p));
        }
        let present: std::collections::BTreeSet<&str> = snap.topics.iter().map(|t| t.name.as_str()).collect();
        let mut forgotten = Vec::new();
        for (name, t) in &mut self.topics {
            if present.contains(name.as_str()) {
                continue;
            }
            let since = *t.missing_since.get_or_insert(at);
            if at.since(since) >= self.forget_after_ms {
                forgotten.push(name.clone());
                out.durable.push(record(
                    at,
                    StoredObservation::TopicDeleted {
                        cluster: cluster.clone(),
                        topic: name.clone(),
                    },
                ));
            } else {
                // Gone from the cluster but not yet forgotten: never healthy.
                for &partition in t.partitions.keys() {
                    out.transient.push(record(at, unreachable(&cluster, name, partition)));
                }
            }
        }
        for name in forgotten {
            self.topics.remove(&name);
        }
        *u = out;
    }

    fn groups_update(&mut self, snap: &Snapshot, u: &mut Update) {
        let at = snap.at;
        let known_topic = |topic: &str, partition: i32| {
            // Without metadata every commit is taken; with it, only those on live partitions.
            !snap.metadata_ok
                || snap
                    .topics
                    .iter()
                    .any(|t| t.name == topic && t.partitions.iter().any(|p| p.partition == partition))
        };
        for g in &snap.groups {
            if g.error.is_some() && !g.exists() {
                // The coordinator could not be asked: neither present nor gone.
                continue;
            }
            if !g.exists() {
                continue;
            }
            let seen = self.groups.entry(g.name.clone()).or_default();
            seen.missing_since = None;
            for o in g.offsets.iter().filter(|o| known_topic(&o.topic, o.partition)) {
                let key = (o.topic.clone(), o.partition);
                if seen.offsets.get(&key) == Some(&o.offset) {
                    continue;
                }
                seen.offsets.insert(key, o.offset);
                u.durable.push(record(
                    at,
                    StoredObservation::Committed {
                        cluster: self.cluster.clone(),
                        group: g.name.clone(),
                        topic: o.topic.clone(),
                        partition: o.partition,
                        offset: o.offset,
                    },
                ));
            }
        }
        let mut forgotten = Vec::new();
        for (name, seen) in &mut self.groups {
            let answer = snap.group(name);
            let gone = match answer {
                Some(g) => !g.exists() && g.error.is_none(),
                // Not asked for, and not listed by a complete listing.
                None => snap.groups_listed,
            };
            if !gone {
                continue;
            }
            let since = *seen.missing_since.get_or_insert(at);
            if at.since(since) >= self.forget_after_ms {
                forgotten.push(name.clone());
            }
        }
        for name in forgotten {
            self.groups.remove(&name);
            u.durable.push(record(
                at,
                StoredObservation::GroupDeleted {
                    cluster: self.cluster.clone(),
                    group: name,
                },
            ));
        }
    }

    fn unreachable(&self, topic: &str, partition: i32) -> StoredObservation {
        unreachable(&self.cluster, topic, partition)
    }

    fn record(&self, at: Millis, o: StoredObservation) -> Record {
        record(at, o)
    }
}

fn unreachable(cluster: &str, topic: &str, partition: i32) -> StoredObservation {
    StoredObservation::Unreachable {
        cluster: cluster.to_owned(),
        topic: topic.to_owned(),
        partition,
    }
}

fn record(at: Millis, observation: StoredObservation) -> Record {
    Record::Observation { at, observation }
}
