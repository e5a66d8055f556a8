//! One node at a time for a job among collectors that share a log in Kafka
//! (a cluster's poller, the alert rules): every node joins one consumer group
//! over a small topic beside the log (`TOPIC-pollers`); a job is done by the
//! node Kafka's group protocol assigned its partition (FNV-1a of its name, as
//! records are sharded). When that node dies, the group's session timeout
//! hands the partition to another. No home-made election, and no messages:
//! only the assignment is used. During a rebalance two nodes may both hold a
//! job for a moment, or none.
//!
//! A node that stops for longer than the session (SIGSTOP, a VM frozen, a
//! long stall) has been dropped from the group and its jobs handed to others,
//! yet on resuming it still holds its old assignment until librdkafka hears
//! of the change, and would do the jobs (evaluate and notify alerts, poll)
//! beside their new owner. So the polling thread notes when it last came
//! back from a poll: a node that has not for [`FENCE_AFTER`] holds nothing,
//! and once it runs again it leaves and rejoins the group, holding nothing
//! until the group assigns it its share again ([`Held`]).

use crate::backend::StoreError;
use crate::client::KafkaUrl;
use crate::client::kafka;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::{ClientContext, Message};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Partitions of the leases topic: jobs are spread over at most this many
/// nodes.
const LEASES: u32 = 64;
/// How soon a dead node's jobs are taken by another.
const SESSION_TIMEOUT_MS: &str = "6000";
/// A node whose polling thread has not come back from a poll (which waits
/// 100 ms) for this long may have missed the session and been replaced.
pub use crate::pause::FENCE_AFTER;

fn write<T>(lock: &std::sync::RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The leases this node holds, and whether it may still believe so. Pure:
/// time is passed in.
#[derive(Debug)]
pub struct Held {
    partitions: BTreeSet<i32>,
    /// When the polling thread last came back from a poll.
    polled_at: Instant,
    /// A gap over [`FENCE_AFTER`] was seen: nothing is held until the group
    /// assigns again.
    fenced: bool,
    /// Times a gap made this node let go.
    let_go: u64,
}

impl Held {
    pub fn new(now: Instant) -> Self {
        Self {
            partitions: BTreeSet::new(),
            polled_at: now,
            fenced: false,
            let_go: 0,
        }
    }

    /// Whether lease `partition` is held at `now`: assigned, not fenced, and
    /// the polling thread seen within [`FENCE_AFTER`] (a node resuming from
    /// a pause asks before that thread has run again).
    pub fn holds(&self, partition: i32, now: Instant) -> bool {
        !self.fenced
            && now.saturating_duration_since(self.polled_at) < FENCE_AFTER
            && self.partitions.contains(&partition)
    }

    /// The polling thread came back from a poll at `now`. True when it had
    /// not for [`FENCE_AFTER`]: everything held is let go, and the caller
    /// rejoins the group.
    pub fn polled(&mut self, now: Instant) -> bool {
        let gap = now.saturating_duration_since(self.polled_at);
        self.polled_at = self.polled_at.max(now);
        if gap < FENCE_AFTER {
            return false;
        }
        self.partitions.clear();
        self.fenced = true;
        self.let_go += 1;
        true
    }

    /// The group assigned this node `partitions`.
    pub fn assigned(&mut self, partitions: BTreeSet<i32>) {
        self.partitions = partitions;
        self.fenced = false;
    }

    /// The group took this node's leases.
    pub fn revoked(&mut self) {
        self.partitions.clear();
    }

    /// Whether the node let go after a gap and waits to be assigned again.
    pub fn fenced(&self) -> bool {
        self.fenced
    }

    /// How many leases are held (as assigned; see [`Self::holds`]).
    pub fn count(&self) -> usize {
        self.partitions.len()
    }

    /// Times a gap made this node let go.
    pub fn let_go(&self) -> u64 {
        self.let_go
    }
}

#[derive(Debug)]
struct Owned(std::sync::RwLock<Held>);

struct LeaseContext(Arc<Owned>);

impl ClientContext for LeaseContext {}

impl ConsumerContext for LeaseContext {
    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => {
                write(&self.0.0).assigned(tpl.elements().iter().map(|e| e.partition()).collect());
                tracing::info!(leases = tpl.count(), "leases assigned");
            }
            Rebalance::Revoke(_) => write(&self.0.0).revoked(),
            Rebalance::Error(e) => tracing::warn!(error = %e, "leases rebalance failed"),
        }
    }
}

/// This node's share of the jobs; dropping it leaves the group.
#[derive(Debug)]
pub struct Leases {
    /// Partitions of the leases topic: what jobs are hashed over.
    count: u32,
    owned: Arc<Owned>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Leases {
    /// Joins the group of the nodes sharing the log at `storage`.
    pub fn join(storage: &str) -> Result<Self, StoreError> {
        let url = KafkaUrl::parse(storage)?;
        let topic = format!("{}-pollers", url.topic);
        // A topic made before (or by a broker that creates topics when
        // they are first named, with its own partition count) keeps its
        // count: every node reads the same one, so jobs are hashed over it.
        let count = crate::client::ensure_topic(&url, &topic, LEASES)?.max(1);
        if count < LEASES {
            tracing::warn!(
                topic = %topic,
                partitions = count,
                "the leases topic has fewer partitions than the {LEASES} streamsight makes: jobs are spread over at most that many nodes"
            );
        }
        let owned = Arc::new(Owned(std::sync::RwLock::new(Held::new(Instant::now()))));
        let consumer: BaseConsumer<LeaseContext> = url
            .client()
            .set("group.id", &topic)
            .set("enable.auto.commit", "false")
            .set("session.timeout.ms", SESSION_TIMEOUT_MS)
            .set("heartbeat.interval.ms", "1000")
            .create_with_context(LeaseContext(owned.clone()))
            .map_err(kafka)?;
        consumer.subscribe(&[&topic]).map_err(kafka)?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            let owned = owned.clone();
            std::thread::Builder::new()
                .name("streamsight-leases".into())
                // Polling keeps the membership alive and serves rebalances.
                .spawn(move || {
                    while !stop.load(Ordering::Acquire) {
                        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
                            tracing::debug!(offset = m.offset(), "ignored a message on the leases topic");
                        }
                        if write(&owned.0).polled(Instant::now()) {
                            // Leaving and joining again is the one way to
                            // hear from the group what this node holds now.
                            tracing::warn!(
                                after_ms = FENCE_AFTER.as_millis() as u64,
                                "leases let go: this node did not run for longer than the session allows; rejoining"
                            );
                            consumer.unsubscribe();
                            if let Err(e) = consumer.subscribe(&[&topic]) {
                                tracing::warn!(error = %e, "leases: rejoining the group failed");
                            }
                        }
                    }
                })
                .map_err(|e| StoreError::Kafka(e.to_string()))?
        };
        Ok(Self {
            count,
            owned,
            stop,
            thread: Some(thread),
        })
    }

    /// Leaves the group: the jobs go to the other nodes (also on drop).
    pub fn leave(&self) {
        self.stop.store(true, Ordering::Release);
    }

    /// Whether this node does `job` now.
    pub fn owns(&self, job: &str) -> bool {
        let lease = streamsight_core::record::shard_of(job, self.count) as i32;
        self.held().holds(lease, Instant::now())
    }

    /// What this node holds, and whether it let go after a pause.
    pub fn held(&self) -> std::sync::RwLockReadGuard<'_, Held> {
        self.owned.0.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for Leases {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_that_did_not_run_for_longer_than_the_guard_holds_nothing_until_assigned_again() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut held = Held::new(t0);
        held.assigned([3, 7].into());
        assert!(held.holds(3, at(50)));
        assert!(!held.holds(4, at(50)), "not assigned");
        // Polling every 100 ms: held all along.
        for ms in (100..=5_000).step_by(100) {
            assert!(!held.polled(at(ms)));
            assert!(held.holds(7, at(ms + 50)));
        }
        // Stopped at 5 s for 20 s: asked on resuming, before the polling
        // thread has run, it no longer holds anything.
        assert!(!held.holds(7, at(25_000)));
        // The thread comes back: it lets go and rejoins.
        assert!(held.polled(at(25_010)));
        assert!(held.fenced());
        assert_eq!(held.let_go(), 1);
        assert!(!held.holds(7, at(25_020)));
        // Polls go on while the group rebalances: still nothing held.
        assert!(!held.polled(at(25_110)));
        assert!(!held.holds(7, at(25_120)));
        // A revocation during the rejoin changes nothing.
        held.revoked();
        assert!(!held.holds(7, at(25_130)));
        // The group assigns this node its share again.
        held.assigned([7].into());
        assert!(!held.fenced());
        assert!(held.holds(7, at(25_200)));
        assert!(!held.holds(3, at(25_200)), "lease 3 went to another node");
    }

    #[test]
    fn a_gap_just_under_the_guard_keeps_the_leases() {
        let t0 = Instant::now();
        let mut held = Held::new(t0);
        held.assigned([1].into());
        let just_under = t0 + FENCE_AFTER - Duration::from_millis(1);
        assert!(held.holds(1, just_under));
        assert!(!held.polled(just_under));
        assert!(held.holds(1, just_under));
        assert!(!held.holds(1, just_under + FENCE_AFTER), "not polled since");
    }
}
