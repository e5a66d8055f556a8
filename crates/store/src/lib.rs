//! Durable storage of what the collector accepted.
//!
//! The store is a log: every observation handed to the engine, every rejection it
//! counted and every pathway bucket, in arrival order. The engine's state is a
//! function of that log, so a restart replays it (within retention) into a fresh
//! engine and lag continues where it was. One trait, two implementations picked
//! by URL scheme: `sqlite://PATH` (the default, durable) and `memory://` (tests).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use streamsight_core::{EndOffsetSource, Engine, Millis, Observation, PartitionRef, RejectReason};

mod sqlite;

pub use sqlite::SqliteStore;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("storage url {0:?} is not sqlite://PATH or memory://")]
    BadUrl(String),
    #[error("cannot create data directory {path}: {source}")]
    CreateDir { path: PathBuf, source: std::io::Error },
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("stored record {id} is corrupt: {why}")]
    Corrupt { id: i64, why: String },
}

/// An observation with owned names, as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StoredObservation {
    Produced {
        cluster: String,
        topic: String,
        partition: i32,
        offset: i64,
    },
    ProduceFailed {
        cluster: String,
        topic: String,
        partition: i32,
        error: String,
    },
    Committed {
        cluster: String,
        group: String,
        topic: String,
        partition: i32,
        offset: i64,
    },
    EndOffset {
        cluster: String,
        topic: String,
        partition: i32,
        offset: i64,
        source: EndOffsetSource,
    },
    LogStart {
        cluster: String,
        topic: String,
        partition: i32,
        offset: i64,
    },
    ControlMarker {
        cluster: String,
        topic: String,
        partition: i32,
        offset: i64,
    },
    TopicRecreated {
        cluster: String,
        topic: String,
    },
    Unreachable {
        cluster: String,
        topic: String,
        partition: i32,
    },
    GroupDeleted {
        cluster: String,
        group: String,
    },
    TopicDeleted {
        cluster: String,
        topic: String,
    },
}

impl StoredObservation {
    pub fn from_observation(o: &Observation<'_>) -> Self {
        let own = |p: &PartitionRef<'_>| (p.cluster.to_owned(), p.topic.to_owned(), p.partition);
        match *o {
            Observation::Produced { partition, offset } => {
                let (cluster, topic, partition) = own(&partition);
                Self::Produced {
                    cluster,
                    topic,
                    partition,
                    offset,
                }
            }
            Observation::ProduceFailed { partition, error } => {
                let (cluster, topic, partition) = own(&partition);
                Self::ProduceFailed {
                    cluster,
                    topic,
                    partition,
                    error: error.to_owned(),
                }
            }
            Observation::Committed {
                group,
                partition,
                offset,
            } => {
                let (cluster, topic, partition) = own(&partition);
                Self::Committed {
                    cluster,
                    group: group.to_owned(),
                    topic,
                    partition,
                    offset,
                }
            }
            Observation::EndOffset {
                partition,
                offset,
                source,
            } => {
                let (cluster, topic, partition) = own(&partition);
                Self::EndOffset {
                    cluster,
                    topic,
                    partition,
                    offset,
                    source,
                }
            }
            Observation::LogStart { partition, offset } => {
                let (cluster, topic, partition) = own(&partition);
                Self::LogStart {
                    cluster,
                    topic,
                    partition,
                    offset,
                }
            }
            Observation::ControlMarker { partition, offset } => {
                let (cluster, topic, partition) = own(&partition);
                Self::ControlMarker {
                    cluster,
                    topic,
                    partition,
                    offset,
                }
            }
            Observation::TopicRecreated { cluster, topic } => Self::TopicRecreated {
                cluster: cluster.to_owned(),
                topic: topic.to_owned(),
            },
            Observation::Unreachable { partition } => {
                let (cluster, topic, partition) = own(&partition);
                Self::Unreachable {
                    cluster,
                    topic,
                    partition,
                }
            }
            Observation::GroupDeleted { cluster, group } => Self::GroupDeleted {
                cluster: cluster.to_owned(),
                group: group.to_owned(),
            },
            Observation::TopicDeleted { cluster, topic } => Self::TopicDeleted {
                cluster: cluster.to_owned(),
                topic: topic.to_owned(),
            },
        }
    }

    pub fn as_observation(&self) -> Observation<'_> {
        fn p<'a>(cluster: &'a str, topic: &'a str, partition: i32) -> PartitionRef<'a> {
            PartitionRef {
                cluster,
                topic,
                partition,
            }
        }
        match self {
            Self::Produced {
                cluster,
                topic,
                partition,
                offset,
            } => Observation::Produced {
                partition: p(cluster, topic, *partition),
                offset: *offset,
            },
            Self::ProduceFailed {
                cluster,
                topic,
                partition,
                error,
            } => Observation::ProduceFailed {
                partition: p(cluster, topic, *partition),
                error,
            },
            Self::Committed {
                cluster,
                group,
                topic,
                partition,
                offset,
            } => Observation::Committed {
                group,
                partition: p(cluster, topic, *partition),
                offset: *offset,
            },
            Self::EndOffset {
                cluster,
                topic,
                partition,
                offset,
                source,
            } => Observation::EndOffset {
                partition: p(cluster, topic, *partition),
                offset: *offset,
                source: *source,
            },
            Self::LogStart {
                cluster,
                topic,
                partition,
                offset,
            } => Observation::LogStart {
                partition: p(cluster, topic, *partition),
                offset: *offset,
            },
            Self::ControlMarker {
                cluster,
                topic,
                partition,
                offset,
            } => Observation::ControlMarker {
                partition: p(cluster, topic, *partition),
                offset: *offset,
            },
            Self::TopicRecreated { cluster, topic } => Observation::TopicRecreated { cluster, topic },
            Self::Unreachable {
                cluster,
                topic,
                partition,
            } => Observation::Unreachable {
                partition: p(cluster, topic, *partition),
            },
            Self::GroupDeleted { cluster, group } => Observation::GroupDeleted { cluster, group },
            Self::TopicDeleted { cluster, topic } => Observation::TopicDeleted { cluster, topic },
        }
    }
}

/// One entry of the log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
pub enum Record {
    Observation {
        at: Millis,
        observation: StoredObservation,
    },
    /// A point an adapter refused before it reached the engine.
    Rejected {
        at: Millis,
        reason: RejectReason,
    },
    /// Pathway statistics of one bucket, opaque to the store.
    Pathway {
        at: Millis,
        json: String,
    },
    /// A fact for drop accounting (counts sent, received, skipped), opaque to the store.
    Delivery {
        at: Millis,
        json: String,
    },
}

impl Record {
    /// Replays the record into the engine: exactly what accepting it did, so that
    /// the engine's state is a function of the log. Pathway records are not the
    /// engine's.
    pub fn apply(&self, engine: &mut Engine) {
        match self {
            Record::Observation { at, observation } => {
                // Rejections are counted by the engine itself.
                let _ = engine.observe(*at, &observation.as_observation());
            }
            Record::Rejected { reason, .. } => engine.reject(*reason),
            Record::Pathway { .. } | Record::Delivery { .. } => {}
        }
    }

    pub fn at(&self) -> Millis {
        match self {
            Record::Observation { at, .. }
            | Record::Rejected { at, .. }
            | Record::Pathway { at, .. }
            | Record::Delivery { at, .. } => *at,
        }
    }
}

pub trait Store: Send {
    /// Appends records durably: when this returns Ok they survive a crash.
    fn append(&mut self, records: &[Record]) -> Result<(), StoreError>;
    /// Every record at or after `since`, in the order they were appended.
    fn load(&mut self, since: Millis) -> Result<Vec<Record>, StoreError>;
    /// Deletes records older than `before`; returns how many.
    fn delete_before(&mut self, before: Millis) -> Result<u64, StoreError>;
}

/// Keeps records in memory: for tests, and for users who want no disk at all.
#[derive(Debug, Default)]
pub struct MemoryStore {
    records: Vec<Record>,
}

impl Store for MemoryStore {
    fn append(&mut self, records: &[Record]) -> Result<(), StoreError> {
        self.records.extend_from_slice(records);
        Ok(())
    }

    fn load(&mut self, since: Millis) -> Result<Vec<Record>, StoreError> {
        Ok(self.records.iter().filter(|r| r.at() >= since).cloned().collect())
    }

    fn delete_before(&mut self, before: Millis) -> Result<u64, StoreError> {
        let n = self.records.len();
        self.records.retain(|r| r.at() >= before);
        Ok((n - self.records.len()) as u64)
    }
}

/// Opens the store a URL names: `sqlite://PATH` or `memory://`.
pub fn open(url: &str) -> Result<Box<dyn Store>, StoreError> {
    if let Some(path) = url.strip_prefix("sqlite://") {
        if path.is_empty() {
            return Err(StoreError::BadUrl(url.to_owned()));
        }
        return Ok(Box::new(SqliteStore::open(PathBuf::from(path))?));
    }
    if url == "memory://" {
        return Ok(Box::new(MemoryStore::default()));
    }
    Err(StoreError::BadUrl(url.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records() -> Vec<Record> {
        let produced = Observation::Produced {
            partition: PartitionRef {
                cluster: "c",
                topic: "t",
                partition: 0,
            },
            offset: 9,
        };
        vec![
            Record::Observation {
                at: Millis(1),
                observation: StoredObservation::from_observation(&produced),
            },
            Record::Rejected {
                at: Millis(2),
                reason: RejectReason::NegativePartition,
            },
            Record::Pathway {
                at: Millis(3),
                json: "{}".into(),
            },
        ]
    }

    /// The same body for every implementation.
    fn exercise(store: &mut dyn Store) {
        store.append(&records()).unwrap();
        assert_eq!(store.load(Millis(0)).unwrap(), records());
        assert_eq!(store.load(Millis(2)).unwrap(), records()[1..].to_vec());
        assert_eq!(store.delete_before(Millis(3)).unwrap(), 2);
        assert_eq!(store.load(Millis(0)).unwrap(), records()[2..].to_vec());
    }

    #[test]
    fn memory_store() {
        exercise(open("memory://").unwrap().as_mut());
    }

    #[test]
    fn sqlite_store_and_reopen() {
        let dir = std::env::temp_dir().join(format!("streamsight-store-{}", std::process::id()));
        let path = dir.join("nested").join("s.db");
        let url = format!("sqlite://{}", path.display());
        exercise(open(&url).unwrap().as_mut());
        let mut reopened = open(&url).unwrap();
        assert_eq!(reopened.load(Millis(0)).unwrap(), records()[2..].to_vec());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn observations_round_trip() {
        let o = StoredObservation::Committed {
            cluster: "c".into(),
            group: "g".into(),
            topic: "t".into(),
            partition: 3,
            offset: 7,
        };
        assert_eq!(StoredObservation::from_observation(&o.as_observation()), o);
    }

    #[test]
    fn bad_urls_are_refused() {
        for url in ["postgres://x", "sqlite://", "memory://x", ""] {
            assert!(matches!(open(url), Err(StoreError::BadUrl(_))), "{url}");
        }
    }
}
