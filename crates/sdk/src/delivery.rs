//! Drop accounting on the consumer side: per (group, topic, partition, one-minute
//! window of record timestamps) how many records were received, failed in
//! processing and were dead-lettered, and per partition the offsets a consumer
//! jumped over.
//!
//! The hot path takes no lock shared with other threads and allocates nothing:
//! each thread keeps its own cache of counter cells (atomics) and only a cell it
//! has not seen yet, once per key and thread, goes through the shared registry.
//! The shipper swaps the atomics to zero when it takes a payload. Gaps and
//! starts, which are rare, take a lock.

use std::cell::RefCell;
use std::collections::HashMap as StdHashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use streamsight_wire::dsm::payload::{ConsumeStart, ConsumedCount, SkippedRange};

type HashMap<K, V> = StdHashMap<K, V, foldhash::fast::RandomState>;

/// One-minute accounting windows of record timestamps, as the collector's ledger keeps them.
const WINDOW_MS: i64 = 60_000;
/// Trace ids kept per window, for following a failed or dead-lettered record.
const TRACE_IDS_KEPT: usize = 5;
/// Windows a thread keeps cached behind the newest it has seen.
const CACHED_WINDOWS: i64 = 3;

/// What the application did with a record it received.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done with: the default for a record never marked.
    Processed,
    /// Processing failed and the record was dropped (not retried, not dead-lettered).
    Failed,
    /// Sent to a dead-letter queue.
    DeadLettered,
}

pub(crate) fn window_of(ms: i64) -> i64 {
    ms - ms.rem_euclid(WINDOW_MS)
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    group: Arc<str>,
    topic: String,
    partition: i32,
    window: i64,
}

#[derive(Debug, Default)]
struct Cell {
    received: AtomicU64,
    failed: AtomicU64,
    dead_lettered: AtomicU64,
    trace_ids: Mutex<Vec<String>>,
}

#[derive(Debug)]
struct Position {
    /// Last offset received, -1 before the first since (re)assignment.
    last: AtomicI64,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PartitionKey {
    group: Arc<str>,
    topic: String,
    partition: i32,
}

/// The shared side: every cell and position, and the rare events.
#[derive(Debug, Default)]
pub(crate) struct ConsumedCounters {
    id: usize,
    cells: Mutex<HashMap<Key, Arc<Cell>>>,
    positions: Mutex<HashMap<PartitionKey, Arc<Position>>>,
    skipped: Mutex<Vec<SkippedRange>>,
    started: Mutex<Vec<ConsumeStart>>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// One thread's cached cells: (counters id, hash of the key) -> cells with that hash.
type Cache = HashMap<(usize, u64), Vec<(Key, Arc<Cell>)>>;
type PositionCache = HashMap<(usize, u64), Vec<(PartitionKey, Arc<Position>)>>;

thread_local! {
    static CELLS: RefCell<Cache> = RefCell::new(Cache::default());
    static POSITIONS: RefCell<PositionCache> = RefCell::new(PositionCache::default());
    static NEWEST_WINDOW: std::cell::Cell<i64> = const { std::cell::Cell::new(i64::MIN) };
}

fn hasher() -> foldhash::fast::FixedState {
    foldhash::fast::FixedState::with_seed(0x5eed)
}

fn key_hash(group: &str, topic: &str, partition: i32, window: i64) -> u64 {
    let mut h = hasher().build_hasher();
    group.hash(&mut h);
    topic.hash(&mut h);
    partition.hash(&mut h);
    window.hash(&mut h);
    h.finish()
}

impl ConsumedCounters {
    pub(crate) fn new() -> Self {
        Self {
            id: usize::try_from(NEXT_ID.fetch_add(1, Relaxed)).unwrap_or(usize::MAX),
            ..Self::default()
        }
    }

    /// Runs `f` on the key's cell, found in this thread's cache without touching
    /// its reference count (no write to a line other threads share).
    fn with_cell<R>(
        &self,
        group: &Arc<str>,
        topic: &str,
        partition: i32,
        window: i64,
        mut f: impl FnMut(&Cell) -> R,
    ) -> R {
        let hash = key_hash(group, topic, partition, window);
        let hit = CELLS.with_borrow(|cache| {
            cache
                .get(&(self.id, hash))
                .and_then(|entries| {
                    entries.iter().find(|(k, _)| {
                        k.window == window && k.partition == partition && k.topic == topic && *k.group == **group
                    })
                })
                .map(|(_, c)| f(c))
        });
        match hit {
            Some(r) => r,
            None => f(&self.cell_slow(group, topic, partition, window, hash)),
        }
    }

    /// Once per key and thread: through the registry, then cached.
    #[cold]
    fn cell_slow(&self, group: &Arc<str>, topic: &str, partition: i32, window: i64, hash: u64) -> Arc<Cell> {
        let key = Key {
            group: Arc::clone(group),
            topic: topic.to_owned(),
            partition,
            window,
        };
        let cell = {
            let mut cells = self.cells.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(cells.entry(key.clone()).or_default())
        };
        let newest = NEWEST_WINDOW.get().max(window);
        NEWEST_WINDOW.set(newest);
        CELLS.with_borrow_mut(|cache| {
            // Old windows leave the cache, so the registry can let their cells go.
            cache.retain(|_, entries| {
                entries.retain(|(k, _)| k.window >= newest - CACHED_WINDOWS * WINDOW_MS);
                !entries.is_empty()
            });
            cache.entry((self.id, hash)).or_default().push((key, Arc::clone(&cell)));
        });
        cell
    }

    /// Moves the partition's last received offset to `offset`; returns the one before.
    fn swap_position(&self, group: &Arc<str>, topic: &str, partition: i32, offset: i64) -> i64 {
        let hash = key_hash(group, topic, partition, 0);
        let hit = POSITIONS.with_borrow(|cache| {
            cache
                .get(&(self.id, hash))
                .and_then(|entries| {
                    entries
                        .iter()
                        .find(|(k, _)| k.partition == partition && k.topic == topic && *k.group == **group)
                })
                .map(|(_, p)| p.last.swap(offset, Relaxed))
        });
        match hit {
            Some(previous) => previous,
            None => self
                .position_slow(group, topic, partition, hash)
                .last
                .swap(offset, Relaxed),
        }
    }

    /// Once per partition and thread: through the registry, then cached.
    #[cold]
    fn position_slow(&self, group: &Arc<str>, topic: &str, partition: i32, hash: u64) -> Arc<Position> {
        let key = PartitionKey {
            group: Arc::clone(group),
            topic: topic.to_owned(),
            partition,
        };
        let position = {
            let mut positions = self.positions.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(positions.entry(key.clone()).or_insert_with(|| {
                Arc::new(Position {
                    last: AtomicI64::new(-1),
                })
            }))
        };
        POSITIONS.with_borrow_mut(|cache| {
            cache
                .entry((self.id, hash))
                .or_default()
                .push((key, Arc::clone(&position)))
        });
        position
    }

    /// A record received: counted in its window, its offset checked against the
    /// last one of its partition.
    pub(crate) fn received(
        &self,
        group: &Arc<str>,
        topic: &str,
        partition: i32,
        offset: i64,
        timestamp_ms: i64,
        now_ms: i64,
    ) {
        self.with_cell(group, topic, partition, window_of(timestamp_ms), |c| {
            c.received.fetch_add(1, Relaxed)
        });
        let previous = self.swap_position(group, topic, partition, offset);
        if previous < 0 {
            self.started
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(ConsumeStart {
                    group: group.to_string(),
                    topic: topic.to_owned(),
                    partition,
                    first_offset: offset,
                    at_ms: now_ms,
                });
        } else if offset > previous + 1 {
            self.skipped
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(SkippedRange {
                    group: group.to_string(),
                    topic: topic.to_owned(),
                    partition,
                    first_offset: previous + 1,
                    last_offset: offset - 1,
                    at_ms: now_ms,
                });
        }
    }

    /// What the application did with a received record.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn outcome(
        &self,
        group: &Arc<str>,
        topic: &str,
        partition: i32,
        timestamp_ms: i64,
        outcome: Outcome,
        trace_id: Option<String>,
    ) {
        if outcome == Outcome::Processed {
            return;
        }
        let mut trace_id = trace_id;
        self.with_cell(group, topic, partition, window_of(timestamp_ms), |cell| {
            let counter = if outcome == Outcome::Failed {
                &cell.failed
            } else {
                &cell.dead_lettered
            };
            counter.fetch_add(1, Relaxed);
            if let Some(id) = trace_id.take() {
                let mut ids = cell.trace_ids.lock().unwrap_or_else(|p| p.into_inner());
                if ids.len() < TRACE_IDS_KEPT {
                    ids.push(id);
                }
            }
        });
    }

    /// The partitions were taken away (rebalance): whoever reads them next starts
    /// afresh, compared with the committed offset, not with this consumer's last.
    pub(crate) fn revoked(&self, group: &Arc<str>, partitions: impl Iterator<Item = (String, i32)>) {
        let positions = self.positions.lock().unwrap_or_else(|p| p.into_inner());
        for (topic, partition) in partitions {
            let key = PartitionKey {
                group: Arc::clone(group),
                topic,
                partition,
            };
            if let Some(p) = positions.get(&key) {
                p.last.store(-1, Relaxed);
            }
        }
    }

    /// Everything counted since the last call; cells no thread holds any more and
    /// with nothing left to report are dropped.
    pub(crate) fn take(&self) -> (Vec<ConsumedCount>, Vec<SkippedRange>, Vec<ConsumeStart>) {
        let mut counts = Vec::new();
        let mut cells = self.cells.lock().unwrap_or_else(|p| p.into_inner());
        cells.retain(|key, cell| {
            let received = cell.received.swap(0, Relaxed);
            let failed = cell.failed.swap(0, Relaxed);
            let dead_lettered = cell.dead_lettered.swap(0, Relaxed);
            let trace_ids = std::mem::take(&mut *cell.trace_ids.lock().unwrap_or_else(|p| p.into_inner()));
            if received + failed + dead_lettered > 0 {
                counts.push(ConsumedCount {
                    group: key.group.to_string(),
                    topic: key.topic.clone(),
                    partition: key.partition,
                    window_ms: key.window,
                    received,
                    failed,
                    dead_lettered,
                    trace_ids,
                });
                true
            } else {
                Arc::strong_count(cell) > 1
            }
        });
        drop(cells);
        let skipped = std::mem::take(&mut *self.skipped.lock().unwrap_or_else(|p| p.into_inner()));
        let started = std::mem::take(&mut *self.started.lock().unwrap_or_else(|p| p.into_inner()));
        (counts, skipped, started)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_gaps_starts_and_outcomes() {
        let c = ConsumedCounters::new();
        let g: Arc<str> = Arc::from("g");
        for offset in [0, 1, 2, 6, 7] {
            c.received(&g, "orders", 0, offset, 60_500, 1);
        }
        c.outcome(&g, "orders", 0, 60_500, Outcome::Failed, Some("t1".into()));
        c.outcome(&g, "orders", 0, 60_500, Outcome::DeadLettered, None);
        c.outcome(&g, "orders", 0, 60_500, Outcome::Processed, None);
        let (counts, skipped, started) = c.take();
        assert_eq!(counts.len(), 1);
        let k = &counts[0];
        assert_eq!((k.window_ms, k.received, k.failed, k.dead_lettered), (60_000, 5, 1, 1));
        assert_eq!(k.trace_ids, vec!["t1".to_owned()]);
        assert_eq!((skipped[0].first_offset, skipped[0].last_offset), (3, 5));
        assert_eq!((started.len(), started[0].first_offset), (1, 0));
        // Taken: nothing twice.
        let (counts, skipped, started) = c.take();
        assert!(counts.is_empty() && skipped.is_empty() && started.is_empty());
        // Revoked, then read again from elsewhere: a start, not a gap.
        c.revoked(&g, std::iter::once(("orders".to_owned(), 0)));
        c.received(&g, "orders", 0, 40, 60_500, 2);
        let (_, skipped, started) = c.take();
        assert!(skipped.is_empty());
        assert_eq!(started[0].first_offset, 40);
    }

    #[test]
    fn threads_count_into_the_same_cells() {
        let c = Arc::new(ConsumedCounters::new());
        let g: Arc<str> = Arc::from("g");
        std::thread::scope(|s| {
            for t in 0..4 {
                let (c, g) = (Arc::clone(&c), Arc::clone(&g));
                s.spawn(move || {
                    for i in 0..1000 {
                        c.received(&g, "orders", t, i, 0, 0);
                    }
                });
            }
        });
        let (counts, skipped, _) = c.take();
        assert_eq!(counts.iter().map(|k| k.received).sum::<u64>(), 4000);
        assert!(skipped.is_empty());
    }
}
