//! One node at a time for a job among collectors that share a log in Kafka
//! (a cluster's poller, the alert rules): every node joins one consumer group
//! over a small topic beside the log (`TOPIC-pollers`); a job is done by the
//! node Kafka's group protocol assigned its partition (FNV-1a of its name, as
//! records are sharded). When that node dies, the group's session timeout
//! hands the partition to another. No home-made election, and no messages:
//! only the assignment is used. During a rebalance two nodes may both hold a
//! job for a moment, or none.

use crate::backend::StoreError;
use crate::client::KafkaUrl;
use crate::client::kafka;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::{ClientContext, Message};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Partitions of the leases topic: jobs are spread over at most this many
/// nodes.
const LEASES: u32 = 64;
/// How soon a dead node's jobs are taken by another.
const SESSION_TIMEOUT_MS: &str = "6000";

fn write<T>(lock: &std::sync::RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[derive(Debug, Default)]
struct Owned(std::sync::RwLock<BTreeSet<i32>>);

struct LeaseContext(Arc<Owned>);

impl ClientContext for LeaseContext {}

impl ConsumerContext for LeaseContext {
    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => {
                *write(&self.0.0) = tpl.elements().iter().map(|e| e.partition()).collect();
                tracing::info!(leases = tpl.count(), "leases assigned");
            }
            Rebalance::Revoke(_) => write(&self.0.0).clear(),
            Rebalance::Error(e) => tracing::warn!(error = %e, "leases rebalance failed"),
        }
    }
}

/// This node's share of the jobs; dropping it leaves the group.
#[derive(Debug)]
pub struct Leases {
    owned: Arc<Owned>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Leases {
    /// Joins the group of the nodes sharing the log at `storage`.
    pub fn join(storage: &str) -> Result<Self, StoreError> {
        let url = KafkaUrl::parse(storage)?;
        let topic = format!("{}-pollers", url.topic);
        crate::client::ensure_topic(&url, &topic, LEASES)?;
        let owned = Arc::new(Owned::default());
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
            std::thread::Builder::new()
                .name("streamsight-leases".into())
                // Polling keeps the membership alive and serves rebalances.
                .spawn(move || {
                    while !stop.load(Ordering::Acquire) {
                        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
                            tracing::debug!(offset = m.offset(), "ignored a message on the leases topic");
                        }
                    }
                })
                .map_err(|e| StoreError::Kafka(e.to_string()))?
        };
        Ok(Self {
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
        let lease = streamsight_core::record::shard_of(job, LEASES) as i32;
        self.owned
            .0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(&lease)
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
