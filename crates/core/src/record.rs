//! The log: everything the collector accepted, in the order it was accepted. The
//! collector's state is a function of it, so a restart (or another node) replays it
//! into a fresh engine, ledger and pathway map. Stores only serialize it.

use crate::delivery::Fact;
use crate::engine::Engine;
use crate::model::{OwnedObservation, RejectReason};
use crate::pathway::PathwayPoint;
use crate::time::Millis;
use serde::{Deserialize, Serialize};

/// One entry of the log. Variants larger than an observation are boxed: intake
/// moves hundreds of records a request, and each is the size of the largest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
pub enum Record {
    Observation {
        at: Millis,
        observation: OwnedObservation,
    },
    /// A point an adapter refused before it reached the engine.
    Rejected {
        at: Millis,
        reason: RejectReason,
    },
    /// Pathway statistics of one bucket.
    Pathway {
        at: Millis,
        point: Box<PathwayPoint>,
    },
    /// A fact for drop accounting (counts sent, received, skipped).
    Delivery {
        at: Millis,
        fact: Box<Fact>,
    },
    /// An administrative action: who may do what changed.
    Audit {
        at: Millis,
        event: AuditEvent,
    },
    /// An alert changed state, was notified, or was silenced: kept so that a
    /// restart neither loses a firing alert nor notifies it twice.
    Alert {
        at: Millis,
        event: Box<AlertEvent>,
    },
    /// A span of a message's journey (OTLP, a Datadog tracer).
    Span {
        at: Millis,
        span: Box<crate::journey::Span>,
    },
    /// A log line that names a trace.
    Log {
        at: Millis,
        line: Box<crate::journey::LogLine>,
    },
    /// What a dead-letter redrive claimed, sent, or released: its progress,
    /// so that no dead letter is sent twice (see [`crate::redrive`]).
    Redrive {
        at: Millis,
        event: Box<crate::redrive::RedriveEvent>,
    },
}

/// Where [`Record::route`] sends a record.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Route {
    Shard(u32),
    AllShards,
    Global,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum AlertEvent {
    Changed(crate::alerts::Transition),
    Notified {
        rule: String,
        labels: crate::alerts::SharedLabels,
        state: crate::alerts::AlertState,
    },
    Silenced(crate::alerts::Silence),
    /// A rule made or replaced through the API (over the configuration's of the
    /// same name).
    RuleSet(crate::alerts::rule::Rule),
    /// A rule made through the API removed: the configuration's (or default)
    /// rule of that name, if any, applies again.
    RuleRemoved {
        name: String,
    },
    /// The node holding the rules' lease on a shared log evaluated them (at
    /// the record's time; written every few seconds): the other nodes tell
    /// from its absence that nobody does.
    Evaluated,
}

/// What an administrator did, as the collector saw it take effect.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum AuditEvent {
    /// A key appeared in the keys file (never the key itself).
    KeyCreated { id: String, tenant: String, scope: String },
    /// A key was revoked or removed.
    KeyRevoked { id: String, tenant: String },
    /// A listener's TLS certificate was replaced.
    TlsReloaded { listener: String },
    /// A group's committed offsets were reset (`streamsight groups reset
    /// --execute` or the API). Boxed: it is larger than every other record.
    OffsetsReset(Box<ResetAudit>),
}

/// An executed offset reset: by which key, to what, and what it skipped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResetAudit {
    pub cluster: String,
    pub group: String,
    /// The key that asked; empty when the collector runs without keys.
    pub key: String,
    pub to: crate::reset::ResetTo,
    /// (topic, partition, committed before, committed now), at most
    /// [`AUDITED_PARTITIONS`]; `partitions` counts them all.
    pub moved: Vec<(String, i32, Option<i64>, i64)>,
    pub partitions: usize,
    pub skipped: u64,
    pub reread: u64,
}

/// Partitions an offsets-reset audit record lists one by one.
pub const AUDITED_PARTITIONS: usize = 1_000;

impl Record {
    pub fn at(&self) -> Millis {
        match self {
            Record::Observation { at, .. }
            | Record::Rejected { at, .. }
            | Record::Pathway { at, .. }
            | Record::Delivery { at, .. }
            | Record::Audit { at, .. }
            | Record::Alert { at, .. }
            | Record::Span { at, .. }
            | Record::Log { at, .. }
            | Record::Redrive { at, .. } => *at,
        }
    }

    /// The Kafka topic the record is about, if any: what a log kept in Kafka is
    /// partitioned by, so that everything about one topic (its offsets, its
    /// groups' commits, its pathway points, facts and spans) is in one shard.
    pub fn topic(&self) -> Option<&str> {
        use crate::model::ObservationOf as O;
        match self {
            Record::Observation { observation, .. } => match observation {
                O::Produced { partition, .. }
                | O::ProduceFailed { partition, .. }
                | O::Committed { partition, .. }
                | O::OffsetsReset { partition, .. }
                | O::EndOffset { partition, .. }
                | O::LogStart { partition, .. }
                | O::ControlMarker { partition, .. }
                | O::Unreadable { partition, .. }
                | O::StableOffset { partition, .. }
                | O::TransactionHolder { partition, .. }
                | O::RecordWritten { partition, .. }
                | O::Unreachable { partition }
                | O::Assigned { partition, .. } => Some(&partition.topic),
                O::TopicRecreated { topic, .. } | O::TopicDeleted { topic, .. } | O::TopicRetention { topic, .. } => {
                    Some(topic)
                }
                O::GroupDeleted { .. } | O::GroupMembers { .. } => None,
            },
            Record::Pathway { point, .. } => point.topic(),
            Record::Delivery { fact, .. } => Some(fact.topic()),
            Record::Span { span, .. } => span.messaging.as_ref().map(|m| m.topic.as_str()),
            Record::Rejected { .. }
            | Record::Audit { .. }
            | Record::Alert { .. }
            | Record::Log { .. }
            | Record::Redrive { .. } => None,
        }
    }

    /// Which of `shards` the record belongs to: by its topic's name (FNV-1a,
    /// stable across versions and platforms), and shard 0 for records about no
    /// topic.
    pub fn shard(&self, shards: u32) -> u32 {
        shard_about(self.topic(), shards)
    }

    /// Where the record goes in a log whose shards are held by different nodes:
    /// what is about a topic to its shard; a group's deletion to every shard
    /// (each holds some of its partitions, and must see it in order with their
    /// commits); what every node needs whole (alerts, audit) to the global log;
    /// the rest to shard 0.
    pub fn route(&self, shards: u32) -> Route {
        match self {
            Record::Audit { .. } | Record::Alert { .. } | Record::Redrive { .. } => Route::Global,
            Record::Observation {
                observation:
                    crate::model::ObservationOf::GroupDeleted { .. } | crate::model::ObservationOf::GroupMembers { .. },
                ..
            } => Route::AllShards,
            _ => Route::Shard(self.shard(shards)),
        }
    }

    /// Replays the record's part that is the engine's: exactly what accepting it
    /// did. Pathway points and delivery facts belong to their own services.
    pub fn apply(&self, engine: &mut Engine) {
        match self {
            Record::Observation { at, observation } => {
                // Rejections are counted by the engine itself.
                let _ = engine.observe(*at, &observation.borrowed());
            }
            Record::Rejected { reason, .. } => engine.reject(*reason),
            Record::Pathway { .. }
            | Record::Delivery { .. }
            | Record::Audit { .. }
            | Record::Alert { .. }
            | Record::Span { .. }
            | Record::Log { .. }
            | Record::Redrive { .. } => {}
        }
    }
}

/// The shard of what is about `topic`, or about no topic (shard 0), among
/// `shards` (see [`Record::shard`]).
pub fn shard_about(topic: Option<&str>, shards: u32) -> u32 {
    match topic {
        Some(topic) if shards > 1 => shard_of(topic, shards),
        _ => 0,
    }
}

/// The shard of a topic's records among `shards` (see [`Record::shard`]).
pub fn shard_of(topic: &str, shards: u32) -> u32 {
    let hash = topic.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    (hash % u64::from(shards.max(1))) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_no_bigger_than_an_observation_needs() {
        assert!(
            std::mem::size_of::<Record>() <= 88,
            "{} bytes",
            std::mem::size_of::<Record>()
        );
    }

    #[test]
    fn shards_are_stable_and_in_range() {
        // FNV-1a of "orders": the shard must not move between versions, or a
        // log written by one would be read as another's.
        assert_eq!((shard_of("orders", 12), shard_of("orders", 1_000)), (4, 972));
        for shards in [1, 2, 7, 12, 10_000] {
            assert!(shard_of("orders", shards) < shards);
        }
        assert_eq!(shard_of("anything", 0), 0);
    }

    #[test]
    fn routes_keep_a_topic_and_its_groups_together_and_alerts_global() {
        use crate::model::ObservationOf;
        let commit = Record::Observation {
            at: Millis(1),
            observation: ObservationOf::Committed {
                partition: crate::model::Partition {
                    cluster: "c".into(),
                    topic: "orders".into(),
                    partition: 3,
                },
                group: "billing".into(),
                offset: 7,
            },
        };
        assert_eq!(commit.route(12), Route::Shard(4));
        let deleted = Record::Observation {
            at: Millis(1),
            observation: ObservationOf::GroupDeleted {
                cluster: "c".into(),
                group: "billing".into(),
            },
        };
        assert_eq!(deleted.route(12), Route::AllShards);
        let rejected = Record::Rejected {
            at: Millis(1),
            reason: crate::model::RejectReason::MalformedTag,
        };
        assert_eq!(rejected.route(12), Route::Shard(0));
        let silenced = Record::Audit {
            at: Millis(1),
            event: AuditEvent::TlsReloaded { listener: "api".into() },
        };
        assert_eq!(silenced.route(12), Route::Global);
    }
}
