//! Turns successive snapshots of one cluster into engine observations, and
//! decides when groups and topics are gone. Pure: no I/O, time from the snapshot.
//!
//! Only changes are durable (a poll every 10 s over 20,000 partitions would
//! otherwise write 4,000 rows a second for nothing). Answers that only confirm
//! what is known are transient: applied to the engine, never stored. When an end
//! offset moves, its last sighting at the old value is stored with the new one,
//! so a replayed history brackets produce times as tightly as the live one.
//!
//! Between polls, a refresh asks again only for the partitions where a group
//! lags (its committed and end offsets, and the record time there): a group
//! behind by X seconds otherwise reads X plus the age of the last poll. A
//! refresh's end offsets are applied, not stored, unless a commit it saw on the
//! partition is (so that a replay never has a commit above its end); the next
//! poll stores the end if it moved since the last one stored.

use crate::snapshot::Snapshot;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use streamsight_core::{EndOffsetSource, Millis};
use streamsight_core::{Observation, PartitionRef, Record};

/// What one snapshot changes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Update {
    /// To store, then apply.
    pub durable: Vec<Record>,
    /// To apply only.
    pub transient: Vec<Record>,
}

impl Update {
    /// What to store and what only to apply. On a log other collectors share,
    /// confirmations are stored too: the others know only what is in the log,
    /// and without them would read an idle cluster as older than it is.
    pub fn split(self, shared_log: bool) -> (Vec<Record>, Vec<Record>) {
        if shared_log {
            let mut all = self.durable;
            all.extend(self.transient);
            (all, Vec::new())
        } else {
            (self.durable, self.transient)
        }
    }
}

#[derive(Clone, Debug, Default)]
struct PartitionSeen {
    end: Option<i64>,
    /// When `end` was last confirmed, and whether that sighting is stored.
    end_at: Millis,
    end_at_stored: bool,
    /// The end offset last stored: a refresh may have seen `end` without storing it.
    durable_end: Option<i64>,
    log_start: Option<i64>,
    /// The last stable offset stored, and whether it was below the end then:
    /// a transaction opening where the offset already stood is a change too.
    stable: Option<(i64, bool)>,
    /// The transaction's holder last stored.
    holder: Option<crate::snapshot::TransactionHolder>,
}

#[derive(Clone, Debug, Default)]
struct TopicSeen {
    id: Option<String>,
    partitions: BTreeMap<i32, PartitionSeen>,
    missing_since: Option<Millis>,
    /// The time retention last stored.
    retention_ms: Option<i64>,
}

#[derive(Clone, Debug, Default)]
struct GroupSeen {
    /// Committed offsets by topic, then partition: looked up by `&str`, so a
    /// poll of a million group-partitions allocates no key to compare.
    offsets: HashMap<String, HashMap<i32, i64>>,
    missing_since: Option<Millis>,
    /// The live member count last stored, as a describe gave it.
    members: Option<u32>,
    /// Partitions a member was assigned while the group had no commit on
    /// them, already stored as such (said once; bounded by the partitions).
    assigned: std::collections::HashSet<(String, i32)>,
}

impl GroupSeen {
    fn offset(&self, topic: &str, partition: i32) -> Option<i64> {
        self.offsets.get(topic)?.get(&partition).copied()
    }

    /// Records `offset`; true when it is new or moved.
    fn commit(&mut self, topic: &str, partition: i32, offset: i64) -> bool {
        if self.offset(topic, partition) == Some(offset) {
            return false;
        }
        match self.offsets.get_mut(topic) {
            Some(parts) => parts.insert(partition, offset),
            None => self
                .offsets
                .entry(topic.to_owned())
                .or_default()
                .insert(partition, offset),
        };
        true
    }
}

#[derive(Debug)]
pub struct Tracker {
    cluster: String,
    forget_after_ms: i64,
    topics: BTreeMap<String, TopicSeen>,
    groups: BTreeMap<String, GroupSeen>,
    /// Where the next refresh starts among the lagging groups, when they are
    /// more than one refresh asks for: each gets its turn.
    refresh_from: Option<String>,
}

/// Group-partitions one refresh asks for at most, whatever the estate: a
/// refresh costs a few requests per leader and coordinator, not a poll.
pub const MAX_REFRESHED: usize = 2_000;

/// What a refresh asks for: per lagging group, its lagging partitions.
pub type Lagging = BTreeMap<String, Vec<(String, i32)>>;

impl Tracker {
    pub fn new(cluster: &str, forget_after: Duration) -> Self {
        Self {
            cluster: cluster.to_owned(),
            forget_after_ms: streamsight_core::time::duration_ms(forget_after),
            topics: BTreeMap::new(),
            groups: BTreeMap::new(),
            refresh_from: None,
        }
    }

    /// The groups whose committed offset was below the end at the last look,
    /// and those partitions, at most `max` group-partitions (a group's are
    /// never split); past `max` the next call goes on where this one stopped.
    pub fn lagging(&mut self, max: usize) -> Lagging {
        let behind = |g: &GroupSeen| -> Vec<(String, i32)> {
            let mut parts: Vec<(String, i32)> = g
                .offsets
                .iter()
                .flat_map(|(topic, parts)| parts.iter().map(move |(p, o)| (topic, *p, *o)))
                .filter(|&(topic, partition, offset)| {
                    self.topics
                        .get(topic)
                        .and_then(|t| t.partitions.get(&partition))
                        .and_then(|p| p.end)
                        .is_some_and(|end| offset < end)
                })
                .map(|(topic, partition, _)| (topic.clone(), partition))
                .collect();
            parts.sort();
            parts
        };
        let start = self.refresh_from.take();
        let after = start.iter().flat_map(|from| self.groups.range::<String, _>(from..));
        let before = self
            .groups
            .iter()
            .take_while(|(name, _)| start.as_ref().is_some_and(|from| *name < from));
        let mut out = Lagging::new();
        let mut taken = 0;
        let ordered: Box<dyn Iterator<Item = (&String, &GroupSeen)>> = if start.is_some() {
            Box::new(after.chain(before))
        } else {
            Box::new(self.groups.iter())
        };
        let mut next = None;
        for (name, g) in ordered {
            let parts = behind(g);
            if parts.is_empty() {
                continue;
            }
            if taken + parts.len() > max && taken > 0 {
                next = Some(name.clone());
                break;
            }
            taken += parts.len();
            let mut parts = parts;
            parts.truncate(max);
            out.insert(name.clone(), parts);
        }
        self.refresh_from = next;
        out
    }

    /// Seeds what is already known (from the store, after a restart), so that
    /// an unchanged commit is not recorded again as a fresh one.
    pub fn remember_commit(&mut self, group: &str, topic: &str, partition: i32, offset: i64) {
        self.groups
            .entry(group.to_owned())
            .or_default()
            .commit(topic, partition, offset);
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
                    u.transient.push(unreachable(at, &self.cluster, topic, partition));
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
        // A refresh's end offsets are stored only where a commit it saw moved.
        let moved_commits: std::collections::HashSet<(&str, i32)> = if snap.partial {
            snap.groups
                .iter()
                .flat_map(|g| g.offsets.iter().filter(|o| self.commit_moved(&g.name, o)))
                .map(|o| (o.topic.as_str(), o.partition))
                .collect()
        } else {
            Default::default()
        };
        for t in &snap.topics {
            let seen = self.topics.entry(t.name.clone()).or_default();
            if let Some(&ms) = snap.retention.get(&t.name)
                && seen.retention_ms.replace(ms) != Some(ms)
            {
                out.durable.push(record(
                    at,
                    Observation::TopicRetention {
                        cluster: &cluster,
                        topic: &t.name,
                        retention_ms: ms,
                    },
                ));
            }
            seen.missing_since = None;
            if let (Some(old), Some(new)) = (&seen.id, &t.id)
                && old != new
            {
                out.durable.push(record(
                    at,
                    Observation::TopicRecreated {
                        cluster: &cluster,
                        topic: &t.name,
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
                    out.transient.push(unreachable(at, &cluster, &t.name, p.partition));
                    continue;
                };
                if let Some(start) = p.log_start
                    && ps.log_start != Some(start)
                {
                    ps.log_start = Some(start);
                    out.durable.push(record(
                        at,
                        Observation::LogStart {
                            partition: part(&cluster, &t.name, p.partition),
                            offset: start,
                        },
                    ));
                }
                let end_record = |offset: i64, at: Millis| {
                    record(
                        at,
                        Observation::EndOffset {
                            partition: part(&cluster, &t.name, p.partition),
                            offset,
                            source: EndOffsetSource::Broker,
                        },
                    )
                };
                let store = !snap.partial || moved_commits.contains(&(t.name.as_str(), p.partition));
                if !store || (ps.end == Some(end) && ps.durable_end == Some(end)) {
                    out.transient.push(end_record(end, at));
                    ps.end_at_stored = false;
                } else {
                    // The previous value's last sighting, unless stored; when a
                    // refresh saw this value first, that sighting of it.
                    if let Some(old) = ps.end
                        && !ps.end_at_stored
                        && (old != end || ps.durable_end != Some(old))
                    {
                        out.durable.push(end_record(old, ps.end_at));
                    }
                    out.durable.push(end_record(end, at));
                    ps.end_at_stored = true;
                    ps.durable_end = Some(end);
                }
                ps.end = Some(end);
                ps.end_at = at;
                // After the end offset: the engine judges it against that end.
                if let Some(stable) = p.stable {
                    let seen_now = (stable, stable < end);
                    let observed = record(
                        at,
                        Observation::StableOffset {
                            partition: part(&cluster, &t.name, p.partition),
                            offset: stable,
                        },
                    );
                    if ps.stable == Some(seen_now) {
                        out.transient.push(observed);
                    } else {
                        ps.stable = Some(seen_now);
                        out.durable.push(observed);
                    }
                    // After the stable offset, which forgets a holder named
                    // for another offset. Stored when it changes.
                    if let Some(h) = &p.open_transaction {
                        let named = record(
                            at,
                            Observation::TransactionHolder {
                                partition: part(&cluster, &t.name, p.partition),
                                producer_id: h.producer_id,
                                producer_epoch: h.producer_epoch,
                                transactional_id: h.transactional_id.as_deref(),
                                timeout_ms: h.timeout_ms,
                            },
                        );
                        if ps.holder.as_ref() == Some(h) {
                            out.transient.push(named);
                        } else {
                            ps.holder = Some(h.clone());
                            out.durable.push(named);
                        }
                    }
                }
            }
            // Partitions only grow in Kafka; one that vanished went with a recreation.
            if !snap.partial {
                let listed: Vec<i32> = t.partitions.iter().map(|p| p.partition).collect();
                seen.partitions.retain(|p, _| listed.contains(p));
            }
        }
        let present: std::collections::BTreeSet<&str> = snap.topics.iter().map(|t| t.name.as_str()).collect();
        let mut forgotten = Vec::new();
        for (name, t) in &mut self.topics {
            if snap.partial || present.contains(name.as_str()) {
                continue;
            }
            let since = *t.missing_since.get_or_insert(at);
            if at.since(since) >= self.forget_after_ms {
                forgotten.push(name.clone());
                out.durable.push(record(
                    at,
                    Observation::TopicDeleted {
                        cluster: &cluster,
                        topic: name,
                    },
                ));
            } else {
                // Gone from the cluster but not yet forgotten: never healthy.
                for &partition in t.partitions.keys() {
                    out.transient.push(unreachable(at, &cluster, name, partition));
                }
            }
        }
        for name in forgotten {
            self.topics.remove(&name);
        }
        // When the records at lagging commits were written. A time after the
        // poll, or none (-1), says nothing true: left out.
        for b in &snap.batches {
            // Markers and aborted records from a commit on: the reader there
            // has read everything before them (Kafka's own --describe counts
            // each as lag for good).
            if let Some((from, to)) = b.unreadable {
                out.durable.push(record(
                    at,
                    Observation::Unreadable {
                        partition: part(&self.cluster, &b.topic, b.partition),
                        from,
                        to,
                    },
                ));
            }
            let times = [(b.base_offset, b.first_timestamp), (b.last_offset, b.last_timestamp)];
            for (i, &(offset, ts)) in times.iter().enumerate() {
                if (i == 1 && b.last_offset == b.base_offset) || ts <= 0 || ts > at.0 {
                    continue;
                }
                out.durable.push(record(
                    Millis(ts),
                    Observation::RecordWritten {
                        partition: part(&cluster, &b.topic, b.partition),
                        offset,
                    },
                ));
            }
        }
        *u = out;
    }

    /// Whether `o` is a commit of `group` not yet seen.
    fn commit_moved(&self, group: &str, o: &crate::snapshot::CommittedOffset) -> bool {
        self.groups.get(group).and_then(|g| g.offset(&o.topic, o.partition)) != Some(o.offset)
    }

    fn groups_update(&mut self, snap: &Snapshot, u: &mut Update) {
        let at = snap.at;
        // Without metadata every commit is taken; with it, only those on live partitions.
        let live: std::collections::HashSet<(&str, i32)> = snap
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.name.as_str(), p.partition)))
            .collect();
        let known_topic = |topic: &str, partition: i32| !snap.metadata_ok || live.contains(&(topic, partition));
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
                if !seen.commit(&o.topic, o.partition, o.offset) {
                    continue;
                }
                u.durable.push(record(
                    at,
                    Observation::Committed {
                        group: &g.name,
                        partition: part(&self.cluster, &o.topic, o.partition),
                        offset: o.offset,
                    },
                ));
            }
            // A member's partition with no commit: a row of unknown lag,
            // stored once (the commits' own rows need no such word). Not a
            // share group's: it commits nothing by design and has no
            // consumer lag, only share-group lag (Snapshot::share_lag).
            if g.described && !g.is_share() {
                for m in &g.members {
                    for (topic, partitions) in &m.assignment {
                        for &p in partitions {
                            if !known_topic(topic, p)
                                || seen.offset(topic, p).is_some()
                                || seen.assigned.contains(&(topic.clone(), p))
                            {
                                continue;
                            }
                            seen.assigned.insert((topic.clone(), p));
                            u.durable.push(record(
                                at,
                                Observation::Assigned {
                                    group: &g.name,
                                    partition: part(&self.cluster, topic, p),
                                },
                            ));
                        }
                    }
                }
            }
            // Who is in it, only as a describe said: after the commits (a
            // group the engine follows), stored when it changes (a poller
            // starting afresh says it again). An unknown membership says nothing.
            if g.described {
                let members = u32::try_from(g.members.len()).unwrap_or(u32::MAX);
                if seen.members.replace(members) != Some(members) {
                    u.durable.push(record(
                        at,
                        Observation::GroupMembers {
                            cluster: &self.cluster,
                            group: &g.name,
                            members,
                        },
                    ));
                }
            }
        }
        if snap.partial {
            return;
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
                Observation::GroupDeleted {
                    cluster: &self.cluster,
                    group: &name,
                },
            ));
        }
    }
}

fn part<'a>(cluster: &'a str, topic: &'a str, partition: i32) -> PartitionRef<'a> {
    PartitionRef {
        cluster,
        topic,
        partition,
    }
}

fn unreachable(at: Millis, cluster: &str, topic: &str, partition: i32) -> Record {
    record(
        at,
        Observation::Unreachable {
            partition: part(cluster, topic, partition),
        },
    )
}

fn record(at: Millis, observation: Observation<'_>) -> Record {
    Record::Observation {
        at,
        observation: observation.to_owned(),
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn confirmations_are_stored_only_on_a_shared_log() {
        let r = |offset| {
            record(
                Millis(1),
                Observation::EndOffset {
                    partition: PartitionRef {
                        cluster: "c",
                        topic: "t",
                        partition: 0,
                    },
                    offset,
                    source: EndOffsetSource::Broker,
                },
            )
        };
        let update = Update {
            durable: vec![r(1)],
            transient: vec![r(2)],
        };
        assert_eq!(update.clone().split(false), (vec![r(1)], vec![r(2)]));
        assert_eq!(update.split(true), (vec![r(1), r(2)], Vec::new()));
    }

    use super::*;
    use crate::snapshot::{CommittedOffset, GroupSnapshot, PartitionSnapshot, TopicSnapshot};
    use streamsight_core::{Engine, EngineConfig, EngineEvent, Status};

    fn secs(s: i64) -> Millis {
        Millis(s * 1000)
    }

    fn snapshot(at: i64, log_start: i64, end: i64, committed: Option<i64>) -> Snapshot {
        let mut s = Snapshot::new("c", secs(at));
        s.metadata_ok = true;
        s.topics.push(TopicSnapshot {
            name: "orders".into(),
            id: Some("id-1".into()),
            error_code: 0,
            partitions: vec![PartitionSnapshot {
                partition: 0,
                leader: 1,
                log_start: Some(log_start),
                end: Some(end),
                stable: None,
                open_transaction: None,
                error: None,
            }],
        });
        let mut g = GroupSnapshot::new("billing");
        if let Some(offset) = committed {
            g.offsets.push(CommittedOffset {
                topic: "orders".into(),
                partition: 0,
                offset,
            });
        }
        s.groups.push(g);
        s
    }

    fn apply(engine: &mut Engine, u: &Update) {
        for r in u.durable.iter().chain(&u.transient) {
            r.apply(engine);
        }
    }

    #[test]
    fn only_changes_are_durable_and_a_move_stores_the_last_sighting_first() {
        let mut t = Tracker::new("c", Duration::from_secs(600));
        let first = t.update(&snapshot(10, 0, 100, Some(50)));
        assert_eq!(first.durable.len(), 3, "log start, end, commit: {first:?}");
        let same = t.update(&snapshot(20, 0, 100, Some(50)));
        assert!(same.durable.is_empty());
        assert_eq!(same.transient.len(), 1, "the end offset, confirmed");
        let moved = t.update(&snapshot(30, 0, 120, Some(50)));
        let ends: Vec<_> = moved.durable.iter().map(|r| r.at()).collect();
        assert_eq!(
            ends,
            vec![secs(20), secs(30)],
            "old end's last sighting, then the new end"
        );
    }

    #[test]
    fn retention_passing_the_group_is_data_loss_reported_apart_from_lag() {
        let mut t = Tracker::new("c", Duration::from_secs(600));
        let mut e = Engine::new(EngineConfig::default()).unwrap();
        apply(&mut e, &t.update(&snapshot(10, 0, 100, Some(20))));
        apply(&mut e, &t.update(&snapshot(20, 70, 100, Some(20))));
        let r = e.evaluate(e.find("c", "billing", "orders", 0).unwrap(), secs(20));
        assert_eq!(r.data_loss_messages, 50);
        assert_eq!(r.lag_messages, Some(30), "measured from the log start");
        assert_eq!(r.status, Status::DataLoss);
        let events = e.drain_events();
        assert!(
            matches!(events.as_slice(), [EngineEvent::DataLoss { messages: 50, .. }]),
            "{events:?}"
        );
    }

    #[test]
    fn a_new_topic_id_under_the_same_name_is_a_recreation() {
        let mut t = Tracker::new("c", Duration::from_secs(600));
        let mut e = Engine::new(EngineConfig::default()).unwrap();
        apply(&mut e, &t.update(&snapshot(10, 0, 100, Some(100))));
        let mut again = snapshot(20, 0, 3, None);
        again.topics[0].id = Some("id-2".into());
        apply(&mut e, &t.update(&again));
        let events = e.drain_events();
        assert!(
            matches!(events.as_slice(), [EngineEvent::TopicReset { .. }]),
            "{events:?}"
        );
    }

    #[test]
    fn a_group_without_offsets_is_forgotten_after_the_expiry_unless_unanswered() {
        let mut t = Tracker::new("c", Duration::from_secs(60));
        t.update(&snapshot(0, 0, 10, Some(5)));
        // The coordinator could not be asked: not evidence of anything.
        let mut unanswered = snapshot(10, 0, 10, None);
        unanswered.groups[0].error = Some("timeout".into());
        assert!(t.update(&unanswered).durable.is_empty());
        assert!(
            t.update(&snapshot(100, 0, 10, None)).durable.is_empty(),
            "absent since 100"
        );
        let gone = t.update(&snapshot(160, 0, 10, None));
        assert!(matches!(
            gone.durable.as_slice(),
            [Record::Observation {
                observation: streamsight_core::ObservationOf::GroupDeleted { .. },
                ..
            }]
        ));
    }

    #[test]
    fn seeded_commits_are_not_recorded_again() {
        let mut t = Tracker::new("c", Duration::from_secs(600));
        t.remember_commit("billing", "orders", 0, 50);
        let u = t.update(&snapshot(10, 0, 100, Some(50)));
        assert!(!u.durable.iter().any(|r| matches!(
            r,
            Record::Observation {
                observation: streamsight_core::ObservationOf::Committed { .. },
                ..
            }
        )));
    }

    #[test]
    fn a_partition_added_to_a_topic_is_picked_up() {
        let mut t = Tracker::new("c", Duration::from_secs(600));
        let mut e = Engine::new(EngineConfig::default()).unwrap();
        apply(&mut e, &t.update(&snapshot(10, 0, 100, Some(100))));
        let mut grown = snapshot(20, 0, 100, Some(100));
        grown.topics[0].partitions.push(PartitionSnapshot {
            partition: 1,
            leader: 1,
            log_start: Some(0),
            end: Some(7),
            stable: None,
            open_transaction: None,
            error: None,
        });
        grown.groups[0].offsets.push(CommittedOffset {
            topic: "orders".into(),
            partition: 1,
            offset: 2,
        });
        apply(&mut e, &t.update(&grown));
        assert_eq!(e.partitions().count(), 2);
        let r = e.evaluate(e.find("c", "billing", "orders", 1).unwrap(), secs(20));
        assert_eq!(r.lag_messages, Some(5));
        assert!(e.drain_events().is_empty(), "no reset");
    }

    fn refresh(at: i64, end: i64, committed: i64) -> Snapshot {
        let mut s = snapshot(at, 0, end, Some(committed));
        s.partial = true;
        s.topics[0].id = None;
        s
    }

    #[test]
    fn a_refresh_stores_an_end_only_beside_a_moved_commit_and_the_next_poll_stores_what_it_saw() {
        let mut t = Tracker::new("c", Duration::from_secs(600));
        let mut live = Engine::new(EngineConfig::default()).unwrap();
        let mut replayed = Engine::new(EngineConfig::default()).unwrap();
        let mut step = |t: &mut Tracker, s: Snapshot| {
            let u = t.update(&s);
            apply(&mut live, &u);
            for r in &u.durable {
                r.apply(&mut replayed);
            }
            u
        };
        step(&mut t, snapshot(10, 0, 100, Some(50)));
        // The end moved, no commit did: applied, not stored.
        let quiet = step(&mut t, refresh(11, 120, 50));
        assert!(quiet.durable.is_empty(), "{quiet:?}");
        assert_eq!(quiet.transient.len(), 1);
        // A commit moved: it and its partition's end are stored.
        let moved = step(&mut t, refresh(12, 130, 60));
        assert_eq!(
            moved.durable.len(),
            3,
            "the end's last sighting, the end, the commit: {moved:?}"
        );
        // A refresh saw 140 and stored nothing; the poll seeing 140 stores it.
        step(&mut t, refresh(13, 140, 60));
        let polled = step(&mut t, snapshot(20, 0, 140, Some(60)));
        let stored: Vec<(Millis, i64)> = polled
            .durable
            .iter()
            .filter_map(|r| match r {
                Record::Observation {
                    at,
                    observation: streamsight_core::ObservationOf::EndOffset { offset, .. },
                } => Some((*at, *offset)),
                _ => None,
            })
            .collect();
        assert_eq!(stored, vec![(secs(13), 140), (secs(20), 140)]);
        let again = step(&mut t, snapshot(30, 0, 140, Some(60)));
        assert!(again.durable.is_empty(), "unchanged since stored: {again:?}");
        // Neither engine saw an end go down, and both agree on the lag.
        assert!(live.drain_events().is_empty());
        assert!(replayed.drain_events().is_empty());
        let gp = |e: &Engine| {
            e.evaluate(e.find("c", "billing", "orders", 0).unwrap(), secs(30))
                .lag_messages
        };
        assert_eq!((gp(&live), gp(&replayed)), (Some(80), Some(80)));
    }

    #[test]
    fn a_refresh_forgets_nothing_it_did_not_ask_for() {
        let mut t = Tracker::new("c", Duration::from_secs(1));
        t.update(&snapshot(10, 0, 100, Some(50)));
        let mut other = refresh(100, 100, 50);
        other.topics.clear();
        other.groups.clear();
        let u = t.update(&other);
        assert!(u.durable.is_empty() && u.transient.is_empty(), "{u:?}");
        assert_eq!(t.lagging(10).len(), 1, "the group and topic are still known");
    }

    #[test]
    fn lagging_groups_take_turns_within_the_bound() {
        let mut t = Tracker::new("c", Duration::from_secs(600));
        let mut s = snapshot(10, 0, 100, Some(100));
        for (name, offset) in [("a", 10), ("b", 100), ("c", 20), ("d", 30)] {
            let mut g = GroupSnapshot::new(name);
            g.offsets.push(CommittedOffset {
                topic: "orders".into(),
                partition: 0,
                offset,
            });
            s.groups.push(g);
        }
        t.update(&s);
        let names = |l: Lagging| l.into_keys().collect::<Vec<_>>();
        assert_eq!(names(t.lagging(10)), ["a", "c", "d"], "billing and b are at the end");
        assert_eq!(names(t.lagging(2)), ["a", "c"]);
        assert_eq!(
            names(t.lagging(2)),
            ["a", "d"],
            "on from where it stopped (d), then round (a)"
        );
        assert_eq!(names(t.lagging(2)), ["c", "d"]);
    }
}
