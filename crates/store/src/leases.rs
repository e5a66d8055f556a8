//! One node at a time for a job among collectors that share a log in Kafka
//! (a cluster's poller, the alert rules): every node joins one consumer group
//! over a small topic beside the log (`TOPIC-pollers`); a job is done by the
//! node Kafka's group protocol assigned its partition (FNV-1a of its name, as
//! records are sharded). When that node dies, the group's session timeout
//! hands the partition to another. No home-made election, and no messages:
//! only the assignment is used. During a rebalance two nodes may both hold a
//! job for a moment, or none.
//!
//! The group rebalances cooperatively (cooperative-sticky, as the shards'
//! group does): a rebalance moves only the dead node's leases, and the others
//! keep theirs throughout. With the eager protocol, on tansu, the survivors of
//! a `kill -9` of the node holding the alert rules kept their own leases and
//! never got the dead node's (3 of 5 runs, measured in
//! `crates/cli/tests/scale_out.rs`): its jobs were done by no one.
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

    /// The group assigned this node `partitions` besides those it holds
    /// (a cooperative rebalance hands over only what moves).
    pub fn assigned(&mut self, partitions: BTreeSet<i32>) {
        self.partitions.extend(partitions);
        self.fenced = false;
    }

    /// The group took `partitions` of this node's leases.
    pub fn revoked(&mut self, partitions: &BTreeSet<i32>) {
        self.partitions.retain(|p| !partitions.contains(p));
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

/// How long a node may hold no lease before it asks the group again.
const EMPTY_REJOIN_AFTER: Duration = Duration::from_secs(15);
/// At most one such rejoin in this long.
const EMPTY_REJOIN_EVERY: Duration = Duration::from_secs(60);

/// Since when this node holds no lease, and when it last rejoined for it.
/// Pure: time is passed in.
#[derive(Debug, Default)]
struct Empty {
    since: Option<Instant>,
    rejoined: Option<Instant>,
}

impl Empty {
    /// True when the node has held nothing for [`EMPTY_REJOIN_AFTER`] and
    /// has not rejoined for it within [`EMPTY_REJOIN_EVERY`].
    fn rejoin(&mut self, holding: usize, now: Instant) -> bool {
        if holding > 0 {
            self.since = None;
            return false;
        }
        let since = *self.since.get_or_insert(now);
        let due = now.saturating_duration_since(since) >= EMPTY_REJOIN_AFTER
            && self
                .rejoined
                .is_none_or(|t| now.saturating_duration_since(t) >= EMPTY_REJOIN_EVERY);
        if due {
            self.rejoined = Some(now);
            self.since = Some(now);
        }
        due
    }
}

struct LeaseContext(Arc<Owned>);

impl ClientContext for LeaseContext {}

impl ConsumerContext for LeaseContext {
    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => {
                let mut held = write(&self.0.0);
                held.assigned(tpl.elements().iter().map(|e| e.partition()).collect());
                tracing::info!(gained = tpl.count(), held = held.count(), "leases assigned");
            }
            Rebalance::Revoke(tpl) => {
                let mut held = write(&self.0.0);
                held.revoked(&tpl.elements().iter().map(|e| e.partition()).collect());
                tracing::info!(lost = tpl.count(), held = held.count(), "leases revoked");
            }
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
            .set("partition.assignment.strategy", "cooperative-sticky")
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
                    let mut empty = Empty::default();
                    while !stop.load(Ordering::Acquire) {
                        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
                            tracing::debug!(offset = m.offset(), "ignored a message on the leases topic");
                        }
                        let holding = write(&owned.0).count();
                        if empty.rejoin(holding, Instant::now()) {
                            // A group that took everything from this node and
                            // never handed anything back (tansu, down to one
                            // node after a kill -9): asking again is the way
                            // out; a node among more than LEASES holds none
                            // by right and asks at most once a minute.
                            tracing::warn!("leases: none held for longer than a rebalance takes; rejoining the group");
                            consumer.unsubscribe();
                            if let Err(e) = consumer.subscribe(&[&topic]) {
                                tracing::warn!(error = %e, "leases: rejoining the group failed");
                            }
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
        held.revoked(&[3, 7].into());
        assert!(!held.holds(7, at(25_130)));
        // The group assigns this node its share again.
        held.assigned([7].into());
        assert!(!held.fenced());
        assert!(held.holds(7, at(25_200)));
        assert!(!held.holds(3, at(25_200)), "lease 3 went to another node");
    }

    #[test]
    fn a_node_left_with_nothing_asks_the_group_again_at_most_once_a_minute() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut empty = Empty::default();
        assert!(!empty.rejoin(3, at(0)));
        assert!(!empty.rejoin(0, at(1)));
        assert!(!empty.rejoin(0, at(15)));
        assert!(empty.rejoin(0, at(16)), "15 s with nothing");
        assert!(!empty.rejoin(0, at(40)));
        assert!(!empty.rejoin(0, at(75)), "not within a minute of the last");
        assert!(empty.rejoin(0, at(76)));
        // Something held again: the count starts over.
        assert!(!empty.rejoin(1, at(80)));
        assert!(!empty.rejoin(0, at(81)));
        assert!(!empty.rejoin(0, at(95)));
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
