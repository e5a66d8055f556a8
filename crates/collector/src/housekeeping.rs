//! Housekeeping on the history interval: samples, reconciliation, pruning,
//! journeys' decisions, the derived signals, the alert round, retention and idle expiry.

use std::sync::Arc;
use std::time::Duration;
use streamsight_core::Millis;
use streamsight_node::clock::{self, time_ms};
use streamsight_node::telemetry::Failure;
use streamsight_node::{Shared, Writer};

/// In-memory pathway buckets never cover less than this, whatever the window.
const PATHWAYS_KEPT_MS: i64 = 3_600_000;

/// Samples group history, prunes pathways and enforces retention.
pub(crate) async fn housekeeping(shared: Arc<Shared>, writer: Writer, retention_ms: i64) {
    let every = shared.config.history_interval.max(Duration::from_millis(100));
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        let now = clock::now();
        // Walks every group under the services' locks: a blocking thread's work.
        let expired = {
            let shared = shared.clone();
            tokio::task::spawn_blocking(move || {
                shared.lag.sample_groups(now);
                shared.deliveries.reconcile(now, &shared.lag);
                let kept = time_ms(shared.config.pathway_window).max(PATHWAYS_KEPT_MS);
                shared.pathways.prune(now.0.saturating_sub(kept));
                streamsight_journeys::housekeep(&shared, now);
                // Every node derives them every round, whether it evaluates
                // the rules or not: /metrics, the API and the dashboard read them.
                shared.signals.refresh(&shared.lag, now);
                idle_records(&shared, now)
            })
            .await
            .unwrap_or_default()
        };
        streamsight_alerts::round(shared.clone(), &writer, now).await;
        // Cheap when nothing is due: the log is indexed by time.
        writer.delete_before(Millis(now.0.saturating_sub(retention_ms)));
        if !expired.is_empty() {
            tracing::info!(records = expired.len(), "forgetting idle groups and topics");
            if let Err(e) = writer.append(expired).await {
                shared.telemetry.failed(Failure::IdleExpiryNotStored, &e);
            }
        }
    }
}

/// Groups and topics of unpolled clusters nothing was heard of for
/// `forget_idle_after`: no ghost series. Polled clusters expire their own.
fn idle_records(shared: &Shared, now: Millis) -> Vec<streamsight_core::Record> {
    use streamsight_core::{Observation, Record};
    let polled: std::collections::BTreeSet<&str> = shared.config.clusters.iter().map(|c| c.name.as_str()).collect();
    let engine = shared.lag.engine();
    let idle = engine.idle(now, shared.config.forget_idle_after);
    let record = |observation: Observation<'_>| Record::Observation {
        at: now,
        observation: observation.to_owned(),
    };
    // On a sharded log a node holds a group's partitions of its own shards
    // only: that they are idle says nothing of the others'.
    let sharded = shared.sharded();
    let groups = idle
        .groups
        .iter()
        .filter(|(c, _)| !polled.contains(c) && !sharded)
        .map(|&(cluster, group)| record(Observation::GroupDeleted { cluster, group }));
    let topics = idle
        .topics
        .iter()
        .filter(|(c, _)| !polled.contains(c))
        .map(|&(cluster, topic)| record(Observation::TopicDeleted { cluster, topic }));
    groups.chain(topics).collect()
}
