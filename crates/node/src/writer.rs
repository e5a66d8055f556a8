//! The one writer that changes what a node holds.
//!
//! Every accepted record goes through the writer thread: records from all requests
//! waiting at that moment are appended to the store as one batch (group commit),
//! and only once that is on disk are they applied to the services, and the
//! requests answered. So no service holds what the disk does not, and a 2xx means
//! "on disk".

use crate::state::Shared;
use crate::sync::lock;
use crate::telemetry::Failure;
use crate::timings::Stage;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use streamsight_core::{Millis, Record};
use streamsight_store::{Follow, Followed, Store, StoreError};
use tokio::sync::oneshot;

#[derive(Debug, thiserror::Error)]
pub enum WriterError {
    #[error("replaying the store: {0}")]
    Replay(#[from] StoreError),
    #[error("cannot start the writer thread: {0}")]
    Spawn(std::io::Error),
}

/// Why records were not stored.
#[derive(Clone, Debug, thiserror::Error)]
pub enum AppendError {
    #[error("the writer has stopped")]
    Stopped,
    #[error("storage failed: {0}")]
    Storage(String),
    #[error("{0} records are already waiting to be stored; try again shortly")]
    Busy(usize),
}

impl AppendError {
    pub fn kind(&self) -> crate::telemetry::IntakeError {
        match self {
            AppendError::Busy(_) => crate::telemetry::IntakeError::Overloaded,
            _ => crate::telemetry::IntakeError::StorageFailed,
        }
    }
}

enum Job {
    Append {
        records: Vec<Record>,
        /// Applied after `records`, never stored: answers that only confirm.
        transient: Vec<Record>,
        done: oneshot::Sender<Result<(), AppendError>>,
        /// When it was handed over: its wait in the queue is timed.
        sent: std::time::Instant,
    },
    DeleteBefore(Millis),
}

/// The handle requests use to reach the writer thread.
#[derive(Clone, Debug)]
pub struct Writer {
    tx: mpsc::Sender<Job>,
    /// Records handed over and not yet taken by the writer thread.
    queued: Arc<AtomicUsize>,
    max_queued: usize,
    thread: Arc<std::sync::Mutex<Option<std::thread::JoinHandle<()>>>>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Job::Append { records, transient, .. } => {
                write!(f, "Append({} records, {} transient)", records.len(), transient.len())
            }
            Job::DeleteBefore(at) => write!(f, "DeleteBefore({at:?})"),
        }
    }
}

impl Writer {
    /// Replays what the store holds since `since`, then starts the writer thread.
    pub fn start(mut store: Box<dyn Store>, shared: Arc<Shared>, since: Millis) -> Result<Self, WriterError> {
        // A batch at a time: replay never holds the whole log in memory.
        let mut replayed = 0usize;
        let scanned = store.scan(since, &mut |batch| {
            replayed += batch.len();
            shared.apply_owned(batch);
        })?;
        shared.telemetry.stored_batches_skipped(scanned.corrupt);
        tracing::info!(
            records = replayed,
            corrupt_batches = scanned.corrupt,
            "replayed stored records"
        );
        let max_bytes = shared.config.max_storage_bytes;
        if max_bytes > 0 {
            store.cap_bytes(max_bytes)?;
        }
        let (tx, rx) = mpsc::channel::<Job>();
        let queued = Arc::new(AtomicUsize::new(0));
        let max_queued = shared.config.limits.max_queued_records;
        // On a sharded log a node applies what it reads of its shards, on a
        // thread of its own (taking a shard over may take a while; appends go on), and
        // never what it appends: that may be another node's shard.
        let (follow, follower) = match store.follow() {
            Some(follow) if follow.includes_own() => (None, Some(Follower::start(follow, shared.clone())?)),
            other => (other, None),
        };
        let thread = {
            let queued = queued.clone();
            std::thread::Builder::new()
                .name("streamsight-writer".into())
                .spawn(move || {
                    let applies = follower.is_none();
                    write_loop(store.as_mut(), &shared, &rx, &queued, follow, applies);
                    drop(follower);
                })
                .map_err(WriterError::Spawn)?
        };
        Ok(Self {
            tx,
            queued,
            max_queued,
            thread: Arc::new(std::sync::Mutex::new(Some(thread))),
        })
    }

    /// Lets go of this handle and, once no other is left, waits until the writer
    /// has stored and applied everything it was handed. Blocks: call it from a
    /// blocking context.
    pub fn finish(self) {
        let thread = lock(&self.thread).take();
        drop(self);
        if let Some(thread) = thread
            && thread.join().is_err()
        {
            tracing::error!("the writer thread panicked");
        }
    }

    /// Returns once the records are on disk and applied.
    pub async fn append(&self, records: Vec<Record>) -> Result<(), AppendError> {
        self.append_with_transient(records, Vec::new()).await
    }

    /// Stores `records`, then applies them and `transient` (which is not stored).
    /// Refused without waiting when more than `max_queued_records` wait already:
    /// a slow disk answers 503 instead of growing memory.
    pub async fn append_with_transient(&self, records: Vec<Record>, transient: Vec<Record>) -> Result<(), AppendError> {
        let n = records.len() + transient.len();
        let before = self.queued.fetch_add(n, Ordering::AcqRel);
        if before > 0 && before + n > self.max_queued {
            self.queued.fetch_sub(n, Ordering::AcqRel);
            return Err(AppendError::Busy(before));
        }
        let (done, wait) = oneshot::channel();
        let job = Job::Append {
            records,
            transient,
            done,
            sent: std::time::Instant::now(),
        };
        if self.tx.send(job).is_err() {
            self.queued.fetch_sub(n, Ordering::AcqRel);
            return Err(AppendError::Stopped);
        }
        wait.await.map_err(|_| AppendError::Stopped)?
    }

    pub fn delete_before(&self, before: Millis) {
        let _ = self.tx.send(Job::DeleteBefore(before));
    }
}

/// How long the writer waits for a job before looking at a shared log again.
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_millis(50);
/// Messages of a shared log applied between two looks at the jobs: intake is
/// not starved by a node catching up.
const FOLLOW_BATCH: usize = 64;

/// Applies what other nodes appended to a shared log since the last look; the
/// error, if reading failed.
fn apply_followed(follow: &mut dyn Follow, shared: &Shared) -> Option<StoreError> {
    for _ in 0..FOLLOW_BATCH {
        match follow.next(std::time::Duration::ZERO) {
            Ok(Some(Followed::Records(records))) => shared.apply_owned(records),
            // A replicated log has no shards to gain or lose.
            Ok(Some(_)) => {}
            Ok(None) => return None,
            Err(e) => return Some(e),
        }
    }
    None
}

/// Said once when following starts failing and once when it recovers.
fn follow_health(shared: &Shared, error: Option<&StoreError>, failing: &mut bool) {
    match (error, *failing) {
        (Some(e), false) => shared.telemetry.failed(Failure::FollowLog, e),
        (None, true) => tracing::info!("following the shared log again"),
        _ => {}
    }
    *failing = error.is_some();
}

/// The thread that applies a sharded log's records to this node's services.
struct Follower {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Follower {
    fn start(mut follow: Box<dyn Follow>, shared: Arc<Shared>) -> Result<Self, WriterError> {
        if let Some(counts) = follow.snapshot_counts() {
            let _ = shared.snapshots.set(counts);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("streamsight-shards".into())
                .spawn(move || follow_shards(follow.as_mut(), &shared, &stop))
                .map_err(WriterError::Spawn)?
        };
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn follow_shards(follow: &mut dyn Follow, shared: &Shared, stop: &AtomicBool) {
    let held = |change: &dyn Fn(&mut std::collections::BTreeSet<u32>)| {
        if let Some(directory) = shared.directory.get() {
            directory.update_held(change);
        }
    };
    let mut failing = false;
    while !stop.load(Ordering::Acquire) {
        let next = follow.next(FOLLOW_EVERY);
        follow_health(shared, next.as_ref().err(), &mut failing);
        match next {
            Ok(Some(Followed::Records(records))) => shared.apply_owned(records),
            Ok(Some(Followed::Gained(_)) | None) => {}
            Ok(Some(Followed::Restored { state, .. })) => shared.import_shards(*state),
            Ok(Some(Followed::CaughtUp(shard))) => {
                held(&|h| {
                    h.insert(shard);
                });
                shared.lag.invalidate();
            }
            Ok(Some(Followed::Lost { lost, kept })) => {
                held(&|h| h.retain(|s| !lost.contains(s)));
                shared.retain_shards(&kept);
            }
            Err(_) => std::thread::sleep(FOLLOW_EVERY),
        }
        for shard in follow.due() {
            let state = shared.export_shards(&shard);
            follow.save(&shard, state);
        }
    }
}

fn write_loop(
    store: &mut dyn Store,
    shared: &Shared,
    rx: &mpsc::Receiver<Job>,
    queued: &AtomicUsize,
    mut follow: Option<Box<dyn Follow>>,
    applies: bool,
) {
    // On a replicated log, other nodes' appends are applied on this thread too:
    // one order of application, and no state that two threads write.
    let mut follow_failing = false;
    loop {
        let first = match follow.as_deref_mut() {
            None => match rx.recv() {
                Ok(job) => job,
                Err(_) => return,
            },
            Some(follow) => {
                let error = apply_followed(follow, shared);
                follow_health(shared, error.as_ref(), &mut follow_failing);
                match rx.recv_timeout(FOLLOW_EVERY) {
                    Ok(job) => job,
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                }
            }
        };
        let mut batch = Vec::new();
        let mut transient = Vec::new();
        let mut waiting = Vec::new();
        let mut deletes = Vec::new();
        let mut take = |job: Job| match job {
            Job::Append {
                records,
                transient: t,
                done,
                sent,
            } => {
                queued.fetch_sub(records.len() + t.len(), Ordering::AcqRel);
                shared.timings.stage(Stage::Queue).observe(sent.elapsed());
                // The first job's records become the batch: not copied.
                if batch.is_empty() {
                    batch = records;
                } else {
                    batch.extend(records);
                }
                transient.extend(t);
                waiting.push(done);
            }
            Job::DeleteBefore(at) => deletes.push(at),
        };
        take(first);
        while let Ok(job) = rx.try_recv() {
            take(job);
        }
        if !waiting.is_empty() {
            let result = shared
                .timings
                .stage(Stage::Append)
                .time(|| store.append(&batch))
                .map_err(|e| AppendError::Storage(e.to_string()));
            if result.is_err() {
                shared
                    .storage_failed_at_ms
                    .store(crate::clock::now().0, Ordering::Release);
            }
            shared.storage_failing.store(result.is_err(), Ordering::Release);
            let max_bytes = shared.config.max_storage_bytes;
            if max_bytes > 0 {
                match store.cap_bytes(max_bytes) {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(deleted = n, max_bytes, "storage cap enforced"),
                    Err(e) => shared.telemetry.failed(Failure::StorageCap, &e),
                }
            }
            match &result {
                Ok(()) if applies => shared.timings.stage(Stage::Apply).time(|| {
                    shared.apply_owned(std::mem::take(&mut batch));
                    // Most writes have none: each service's apply counted once a batch.
                    if !transient.is_empty() {
                        shared.apply(&transient);
                    }
                }),
                Ok(()) => {}
                Err(e) => shared
                    .telemetry
                    .failed(Failure::StoreAppend, &format!("{e} ({} records)", batch.len())),
            }
            for done in waiting {
                let _ = done.send(result.clone());
            }
        }
        if let Some(&before) = deletes.iter().max() {
            match store.delete_before(before) {
                Ok(0) => {}
                Ok(n) => tracing::info!(deleted = n, "retention enforced"),
                Err(e) => shared.telemetry.failed(Failure::Retention, &e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServeConfig;
    use streamsight_core::EngineConfig;
    use streamsight_store::Scanned;

    /// A disk that stalls: each append says it started, then waits until the
    /// test lets it through.
    struct StalledDisk {
        started: mpsc::Sender<()>,
        release: mpsc::Receiver<()>,
    }

    impl Store for StalledDisk {
        fn append(&mut self, _records: &[Record]) -> Result<(), StoreError> {
            let _ = self.started.send(());
            let _ = self.release.recv();
            Ok(())
        }
        fn scan(&mut self, _since: Millis, _each: &mut dyn FnMut(Vec<Record>)) -> Result<Scanned, StoreError> {
            Ok(Scanned::default())
        }
        fn delete_before(&mut self, _before: Millis) -> Result<u64, StoreError> {
            Ok(0)
        }
    }

    /// A disk that refuses every append.
    struct FullDisk;

    impl Store for FullDisk {
        fn append(&mut self, _records: &[Record]) -> Result<(), StoreError> {
            Err(StoreError::Kafka("disk full".into()))
        }
        fn scan(&mut self, _since: Millis, _each: &mut dyn FnMut(Vec<Record>)) -> Result<Scanned, StoreError> {
            Ok(Scanned::default())
        }
        fn delete_before(&mut self, _before: Millis) -> Result<u64, StoreError> {
            Ok(0)
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_append_is_a_failure_event_and_a_503_kind() {
        let shared = Arc::new(Shared::new(ServeConfig::default(), EngineConfig::default()).unwrap());
        let writer = Writer::start(Box::new(FullDisk), shared.clone(), Millis(0)).unwrap();
        let refused = writer.append(records(3)).await;
        assert!(matches!(refused, Err(AppendError::Storage(_))), "{refused:?}");
        assert_eq!(shared.telemetry.failures(Failure::StoreAppend), 1);
        assert!(shared.storage_failing.load(Ordering::Acquire));
        drop(writer);
    }

    fn records(n: usize) -> Vec<Record> {
        (0..n)
            .map(|i| Record::Rejected {
                at: Millis(i as i64),
                reason: streamsight_core::RejectReason::MalformedTag,
            })
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stalled_disk_fills_the_queue_and_more_is_refused_not_held() {
        let mut config = ServeConfig::default();
        config.limits.max_queued_records = 100;
        let shared = Arc::new(Shared::new(config, EngineConfig::default()).unwrap());
        let (release, stalled) = mpsc::channel();
        let (started_tx, started) = mpsc::channel();
        let disk = StalledDisk {
            started: started_tx,
            release: stalled,
        };
        let writer = Writer::start(Box::new(disk), shared, Millis(0)).unwrap();
        // The first batch is taken by the writer and stalls on the disk.
        let first = tokio::spawn({
            let w = writer.clone();
            async move { w.append(records(80)).await }
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        started.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        // The next waits in the queue; beyond the limit, appends are refused.
        let second = tokio::spawn({
            let w = writer.clone();
            async move { w.append(records(80)).await }
        });
        while writer.queued.load(Ordering::Acquire) != 80 {
            assert!(std::time::Instant::now() < deadline);
            tokio::task::yield_now().await;
        }
        let refused = writer.append(records(30)).await;
        assert!(matches!(refused, Err(AppendError::Busy(80))), "{refused:?}");
        assert_eq!(refused.unwrap_err().kind(), crate::telemetry::IntakeError::Overloaded);
        // Once the disk moves, what was queued is stored.
        release.send(()).unwrap();
        release.send(()).unwrap();
        assert!(first.await.unwrap().is_ok());
        let second = second.await.unwrap();
        assert!(second.is_ok(), "{second:?}");
        drop(release);
    }
}
