//! The engine's state for some topics, by name: what a node holding some
//! shards of a log hands over (a snapshot, so that a node taking a shard over
//! does not replay the whole retention) or keeps (when it lets others go).
//! Imported into an engine, it answers exactly as the engine it came from did
//! for those topics, and goes on from there as that engine would have.

use super::*;
use serde::{Deserialize, Serialize};

/// Topics, their partitions and the groups' places on them. Ids are the
/// engine's own and are not kept: names are.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct EngineShard {
    topics: Vec<TopicShard>,
    groups: Vec<GroupPartitionShard>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct TopicShard {
    cluster: String,
    topic: String,
    unassigned_failure_at: Option<Millis>,
    #[serde(default)]
    retention_ms: Option<i64>,
    partitions: Vec<PartitionShard>,
}

/// A partition's state without the engine's ids.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct PartitionShard {
    partition: i32,
    history: OffsetHistory,
    end_seen_at: Option<Millis>,
    broker_end_max: Option<i64>,
    broker_end: Option<i64>,
    acked_end: Option<i64>,
    unconfirmed: Option<(i64, Millis)>,
    log_start: Option<i64>,
    /// Where the unreadable run starts, and (since it can be longer than a
    /// marker) where it ends: one past the start when absent.
    control_marker: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unreadable_to: Option<i64>,
    #[serde(default)]
    stable: StableOffset,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    open_transaction: Option<std::sync::Arc<crate::model::OpenTransaction>>,
    pending_end_reset: Option<PendingReset>,
    pending_log_start_reset: Option<PendingReset>,
    last_failure_at: Option<Millis>,
    last_success_at: Option<Millis>,
    unreachable_since: Option<Millis>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct GroupPartitionShard {
    cluster: String,
    group: String,
    topic: String,
    partition: i32,
    window: CommitWindow,
    loss: Option<Loss>,
}

impl EngineShard {
    pub fn partitions(&self) -> usize {
        self.topics.iter().map(|t| t.partitions.len()).sum()
    }

    pub fn group_partitions(&self) -> usize {
        self.groups.len()
    }
}

impl Engine {
    /// The state of the live topics whose name `keep` accepts.
    pub fn export(&self, keep: &dyn Fn(&str) -> bool) -> EngineShard {
        let mut shard = EngineShard::default();
        // In the order they were first seen, as the engine lists them.
        for (i, state) in self.topics.iter().enumerate() {
            let (c, t) = (state.cluster, state.name);
            let live = self.topic_ids.get(&(c, t)).is_some_and(|tid| tid.0 as usize == i);
            let topic = self.names.name(t);
            if !live || !keep(topic) {
                continue;
            }
            let partitions = state.partitions.iter().map(|pid| {
                let p = &self.partitions[pid.0 as usize];
                PartitionShard {
                    partition: p.partition,
                    history: p.history.clone(),
                    end_seen_at: p.end_seen_at,
                    broker_end_max: p.broker_end_max,
                    broker_end: p.broker_end,
                    acked_end: p.acked_end,
                    unconfirmed: p.unconfirmed,
                    log_start: p.log_start,
                    control_marker: p.unreadable.range().map(|(from, _)| from),
                    unreadable_to: p.unreadable.range().map(|(_, to)| to),
                    stable: p.stable,
                    open_transaction: self.open_transactions.get(pid).cloned(),
                    pending_end_reset: p.pending_end_reset,
                    pending_log_start_reset: p.pending_log_start_reset,
                    last_failure_at: p.last_failure_at,
                    last_success_at: p.last_success_at,
                    unreachable_since: p.unreachable_since,
                }
            });
            shard.topics.push(TopicShard {
                cluster: self.names.name(c).to_owned(),
                topic: topic.to_owned(),
                unassigned_failure_at: state.unassigned_failure_at,
                retention_ms: state.retention_ms,
                partitions: partitions.collect(),
            });
        }
        for gpid in self.group_partitions() {
            let names = self.names(gpid);
            if keep(names.topic) {
                shard.groups.push(GroupPartitionShard {
                    cluster: names.cluster.to_owned(),
                    group: names.group.to_owned(),
                    topic: names.topic.to_owned(),
                    partition: names.partition,
                    window: self.group_partitions[gpid.0 as usize].window.clone(),
                    loss: self.losses.get(&gpid).copied(),
                });
            }
        }
        shard
    }

    /// Forgets every topic `keep` refuses, as if it had never been seen; ids
    /// are handed out afresh (tombstones go too). Counters stay: they only rise.
    pub fn retain(&mut self, keep: &dyn Fn(&str) -> bool) {
        let kept = self.export(keep);
        let Ok(mut fresh) = Engine::new(self.config.clone()) else {
            return;
        };
        fresh.stats = std::mem::take(&mut self.stats);
        fresh.import(kept);
        *self = fresh;
    }

    /// Takes in what [`Engine::export`] handed over, replacing what this
    /// engine knew of those partitions and group-partitions. Within the
    /// cardinality limits, as anything new is: what is over them is counted
    /// and left out.
    pub fn import(&mut self, shard: EngineShard) {
        for t in shard.topics {
            let Ok(tid) = self.topic_id(&t.cluster, &t.topic) else {
                continue;
            };
            self.topics[tid.0 as usize].unassigned_failure_at = t.unassigned_failure_at;
            self.topics[tid.0 as usize].retention_ms = t.retention_ms;
            for p in t.partitions {
                let at = PartitionRef {
                    cluster: &t.cluster,
                    topic: &t.topic,
                    partition: p.partition,
                };
                let Ok(pid) = self.partition_id(at) else {
                    continue;
                };
                let state = &mut self.partitions[pid.0 as usize];
                state.history = p.history;
                state.end_seen_at = p.end_seen_at;
                state.broker_end_max = p.broker_end_max;
                state.broker_end = p.broker_end;
                state.acked_end = p.acked_end;
                state.unconfirmed = p.unconfirmed;
                state.log_start = p.log_start;
                state.unreadable = match (p.control_marker, p.unreadable_to) {
                    (Some(from), to) => Unreadable::new(from, to.unwrap_or(from.saturating_add(1))),
                    (None, _) => Unreadable::NONE,
                };
                state.stable = p.stable;
                match p.open_transaction {
                    Some(t) => self.open_transactions.insert(pid, t),
                    None => self.open_transactions.remove(&pid),
                };
                state.pending_end_reset = p.pending_end_reset;
                state.pending_log_start_reset = p.pending_log_start_reset;
                state.last_failure_at = p.last_failure_at;
                state.last_success_at = p.last_success_at;
                state.unreachable_since = p.unreachable_since;
            }
        }
        for g in shard.groups {
            let at = PartitionRef {
                cluster: &g.cluster,
                topic: &g.topic,
                partition: g.partition,
            };
            let Ok(pid) = self.partition_id(at) else {
                continue;
            };
            let Ok(gid) = self.group_id(&g.cluster, &g.group) else {
                continue;
            };
            let Ok(gpid) = self.group_partition_id(gid, pid) else {
                continue;
            };
            self.group_partitions[gpid.0 as usize].window = g.window;
            match g.loss {
                Some(loss) => self.losses.insert(gpid, loss),
                None => self.losses.remove(&gpid),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ObservationOf, Partition};
    use proptest::prelude::*;

    const TOPICS: [&str; 3] = ["orders", "payments", "clicks"];
    const GROUPS: [&str; 2] = ["billing", "audit"];

    /// One step of traffic: a kind, a topic, a partition (-1 for an
    /// unassigned failure), a group, an offset move and a time step.
    type Step = (u8, usize, i32, usize, i64, i64);

    fn observation(step: &Step, offsets: &mut HashMap<(usize, i32), i64>) -> ObservationOf<&'static str> {
        let &(kind, t, p, g, moved, _) = step;
        let partition = Partition {
            cluster: "c",
            topic: TOPICS[t],
            partition: p.max(0),
        };
        let end = offsets.entry((t, p.max(0))).or_insert(0);
        // Mostly forward; sometimes far back (a reset, as a broker would say it).
        *end = if moved < -40 { 0 } else { (*end + moved.max(0)).max(0) };
        let end = *end;
        let lower = |n: i64| (end - n).max(0);
        match kind % 9 {
            0 | 1 => ObservationOf::Produced { partition, offset: end },
            2 => ObservationOf::EndOffset {
                partition,
                offset: end + 1,
                source: if moved % 2 == 0 {
                    EndOffsetSource::Broker
                } else {
                    EndOffsetSource::ClientHighWatermark
                },
            },
            3 | 4 => ObservationOf::Committed {
                group: GROUPS[g],
                partition,
                offset: lower(moved.abs() % 30),
            },
            5 => ObservationOf::LogStart {
                partition,
                offset: lower(20),
            },
            6 => ObservationOf::ProduceFailed {
                partition: Partition {
                    partition: p,
                    ..partition
                },
                error: "timeout",
            },
            7 => ObservationOf::ControlMarker { partition, offset: end },
            _ => ObservationOf::Unreachable { partition },
        }
    }

    fn replay(engine: &mut Engine, steps: &[Step], at: &mut i64, offsets: &mut HashMap<(usize, i32), i64>) {
        for step in steps {
            *at += step.5;
            let _ = engine.observe(Millis(*at), &observation(step, offsets));
        }
    }

    /// Everything the engine answers about the kept topics, comparable.
    fn answers(engine: &Engine, now: Millis, keep: &dyn Fn(&str) -> bool) -> Vec<String> {
        let mut out: Vec<String> = engine
            .reports(now, |n| keep(n.topic))
            .into_iter()
            .map(|(n, r)| format!("{n:?} {r:?}"))
            .collect();
        let mut partitions: Vec<String> = engine
            .partitions()
            .map(|pid| (engine.partition_names(pid), engine.evaluate_partition(pid, now)))
            .filter(|((_, topic, _), _)| keep(topic))
            .map(|(n, r)| format!("{n:?} {r:?}"))
            .collect();
        partitions.sort();
        out.extend(partitions);
        out
    }

    fn steps() -> impl Strategy<Value = Vec<Step>> {
        proptest::collection::vec(
            (0u8..9, 0usize..3, -1i32..3, 0usize..2, -50i64..40, 0i64..20_000),
            0..300,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// A node that takes a shard over from a snapshot answers, and goes on,
        /// exactly as the node that made it.
        #[test]
        fn an_imported_shard_answers_as_the_engine_it_came_from(before in steps(), after in steps()) {
            let all = |_: &str| true;
            let (mut at, mut offsets) = (0, HashMap::new());
            let mut original = Engine::new(EngineConfig::default()).unwrap();
            replay(&mut original, &before, &mut at, &mut offsets);
            let mut taken_over = Engine::new(EngineConfig::default()).unwrap();
            taken_over.import(original.export(&all));
            let (at_snapshot, offsets_snapshot) = (at, offsets.clone());
            replay(&mut original, &after, &mut at, &mut offsets);
            let (mut at, mut offsets) = (at_snapshot, offsets_snapshot);
            replay(&mut taken_over, &after, &mut at, &mut offsets);
            for now in [at, at + 60_000, at + 3_600_000] {
                prop_assert_eq!(answers(&original, Millis(now), &all), answers(&taken_over, Millis(now), &all));
            }
        }

        /// What a node keeps when it lets some topics go is what it would have
        /// built from the kept topics' records alone.
        #[test]
        fn kept_topics_answer_as_if_only_they_had_been_seen(steps in steps()) {
            let kept = |topic: &str| topic != "payments";
            let (mut at, mut offsets) = (0, HashMap::new());
            let mut everything = Engine::new(EngineConfig::default()).unwrap();
            replay(&mut everything, &steps, &mut at, &mut offsets);
            let mut kept_engine = Engine::new(EngineConfig::default()).unwrap();
            kept_engine.import(everything.export(&kept));
            // Offsets per partition move only with that partition's steps, so
            // the kept topics' traffic is the same on its own.
            let (mut at2, mut offsets2) = (0, HashMap::new());
            let mut only_kept = Engine::new(EngineConfig::default()).unwrap();
            let mut t = 0;
            for step in &steps {
                t += step.5;
                if kept(TOPICS[step.1]) {
                    at2 = t;
                    let _ = only_kept.observe(Millis(at2), &observation(step, &mut offsets2));
                }
            }
            let now = at.max(at2);
            prop_assert_eq!(answers(&kept_engine, Millis(now), &kept), answers(&only_kept, Millis(now), &kept));
            prop_assert_eq!(answers(&kept_engine, Millis(now), &|_| true), answers(&kept_engine, Millis(now), &kept));
        }
    }
}
