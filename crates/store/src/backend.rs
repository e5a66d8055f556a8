//! What every storage backend is: the [`Store`] and [`Follow`] traits, their
//! error, and the in-memory store. Backends are picked by URL scheme ([`crate::open`]).

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use streamsight_core::Millis;
use streamsight_core::record::Record;
use streamsight_core::shard::{ShardState, Shards};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("storage url {0:?} is not sqlite://PATH, kafka://HOST:PORT[,HOST:PORT]/TOPIC or memory://")]
    BadUrl(String),
    /// A `kafka://` URL with one part wrong: which, and what it must be.
    #[error("storage url {url:?}: {part} {why}")]
    BadUrlPart { url: String, part: String, why: String },
    #[error("cannot create data directory {path}: {source}")]
    CreateDir { path: PathBuf, source: std::io::Error },
    #[error("cannot create database file {path}: {source}")]
    CreateFile { path: PathBuf, source: std::io::Error },
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("kafka: {0}")]
    Kafka(String),
    /// A node that would disagree with the live nodes of its log.
    #[error("not joining the nodes of log {topic}: {why}")]
    JoinRefused { topic: String, why: String },
    #[error("stored batch {id} is corrupt: {why}")]
    Corrupt { id: i64, why: String },
}

/// What a scan read, besides the records it handed over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Scanned {
    /// Stored batches that could not be decoded: skipped, never fatal.
    pub corrupt: u64,
}

pub trait Store: Send {
    /// Appends records as one batch, durably: when this returns Ok they survive a
    /// crash.
    fn append(&mut self, records: &[Record]) -> Result<(), StoreError>;
    /// Hands every record at or after `since` to `each`, a batch at a time, in the
    /// order they were appended; memory holds one batch, not the whole log. A
    /// batch that cannot be decoded is skipped and counted, and the scan goes on.
    fn scan(&mut self, since: Millis, each: &mut dyn FnMut(Vec<Record>)) -> Result<Scanned, StoreError>;
    /// Deletes records older than `before`; returns how many.
    fn delete_before(&mut self, before: Millis) -> Result<u64, StoreError>;
    /// Bytes the stored records take.
    fn bytes(&mut self) -> Result<u64, StoreError> {
        Ok(0)
    }
    /// Caps the store at `max_bytes`: the oldest batches are deleted until it fits,
    /// and appends beyond the cap fail (as a full disk does). Returns how many
    /// records were deleted.
    fn cap_bytes(&mut self, _max_bytes: u64) -> Result<u64, StoreError> {
        Ok(0)
    }

    /// For a log other writers share: what they append from the end of the last
    /// `scan` on, as it arrives. None for a log that is this process's alone.
    fn follow(&mut self) -> Option<Box<dyn Follow>> {
        None
    }

    /// Every record at or after `since`, in one vector.
    fn load(&mut self, since: Millis) -> Result<Vec<Record>, StoreError> {
        let mut all = Vec::new();
        self.scan(since, &mut |batch| all.extend(batch))?;
        Ok(all)
    }
}

/// What following a shared log brings.
#[derive(Debug)]
pub enum Followed {
    /// Records to apply.
    Records(Vec<Record>),
    /// Shards this node holds from now on: their snapshots (`Restored`) and
    /// records follow.
    Gained(Vec<u32>),
    /// Everything shard `0` held when it was gained has been handed over.
    CaughtUp(u32),
    /// Shards another node holds now: what was built from them must go, what
    /// was built from `kept` stays.
    Lost { lost: Vec<u32>, kept: Shards },
    /// The state of a gained shard as of a snapshot: take it in; the shard's
    /// records follow from where it was taken.
    Restored { shard: u32, state: Box<ShardState> },
}

/// Records that other writers append to a shared log.
pub trait Follow: Send {
    /// What arrives within `wait`, if anything.
    fn next(&mut self, wait: std::time::Duration) -> Result<Option<Followed>, StoreError>;

    /// Whether this node's own appends come back through here too (a sharded
    /// log: a node holds only some shards, so it applies what it reads, never
    /// what it appends); else they were applied when appended.
    fn includes_own(&self) -> bool {
        false
    }

    /// Shards (one each) whose state should be saved now: the caller builds
    /// it from everything handed over so far and passes it to `save`.
    fn due(&mut self) -> Vec<Shards> {
        Vec::new()
    }

    /// Saves a shard's state (a snapshot, see `snapshots`).
    fn save(&mut self, _shard: &Shards, _state: ShardState) {}

    /// What snapshots did, where there are any.
    fn snapshot_counts(&self) -> Option<std::sync::Arc<SnapshotCounts>> {
        None
    }
}

/// Keeps nothing: what it would keep could never be replayed (a restart
/// empties memory), so holding it would only grow the process.
#[derive(Debug, Default)]
pub struct MemoryStore;

impl Store for MemoryStore {
    fn append(&mut self, _records: &[Record]) -> Result<(), StoreError> {
        Ok(())
    }

    fn scan(&mut self, _since: Millis, _each: &mut dyn FnMut(Vec<Record>)) -> Result<Scanned, StoreError> {
        Ok(Scanned::default())
    }

    fn delete_before(&mut self, _before: Millis) -> Result<u64, StoreError> {
        Ok(0)
    }
}

/// What a sharded log's snapshots did, for `/metrics`.
#[derive(Debug, Default)]
pub struct SnapshotCounts {
    pub written: AtomicU64,
    pub written_bytes: AtomicU64,
    pub write_failures: AtomicU64,
    pub restored: AtomicU64,
    /// A manifest was found but its snapshot could not be used.
    pub restore_failures: AtomicU64,
    /// Log messages read to catch a gained shard up, after its snapshot if any.
    pub replayed_messages: AtomicU64,
}
