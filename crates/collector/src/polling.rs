//! The poller inside `serve`: one task per configured cluster, polling on its
//! interval and handing what changed to the writer like any other intake.

use crate::clock;
use crate::state::{Shared, Writer};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;
use streamsight_poller::{ClusterClient, ClusterConfig, Tracker};

pub(crate) async fn poll_forever(shared: Arc<Shared>, writer: Writer, config: ClusterConfig) {
    let mut tracker = Tracker::new(&config.name, config.forget_after);
    seed(&shared, &mut tracker, &config.name);
    let mut client = ClusterClient::new(config.clone());
    let mut tick = tokio::time::interval(config.poll_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let groups = groups_to_ask(&shared, &config);
        let started = Instant::now();
        let snap = client.poll(clock::now(), &groups).await;
        let elapsed = started.elapsed();
        let update = tracker.update(&snap);
        let stored = update.durable.len();
        if let Err(e) = writer.append_with_transient(update.durable, update.transient).await {
            tracing::error!(cluster = %config.name, error = %e, "poll results not stored");
        }
        let failed = !snap.metadata_ok;
        if failed {
            tracing::warn!(cluster = %config.name, errors = ?snap.errors, "cluster unreachable");
        } else if !snap.errors.is_empty() {
            tracing::debug!(cluster = %config.name, errors = ?snap.errors, "poll partly failed");
        }
        tracing::debug!(
            cluster = %config.name,
            partitions = snap.partition_count(),
            groups = snap.groups.len(),
            requests = snap.requests,
            stored,
            ms = elapsed.as_secs_f64() * 1000.0,
            "polled"
        );
        shared
            .clusters
            .polled(&config.name, snap, elapsed.as_secs_f64() * 1000.0);
    }
}

/// Groups named in the config and those instrumented clients reported in this
/// cluster: asked for by name, since not every broker can list groups.
fn groups_to_ask(shared: &Shared, config: &ClusterConfig) -> BTreeSet<String> {
    let engine = shared.lag.engine();
    let mut groups: BTreeSet<String> = config.groups.iter().cloned().collect();
    groups.extend(
        engine
            .groups()
            .map(|g| engine.group_name(g))
            .filter(|(c, _)| *c == config.name)
            .map(|(_, g)| g.to_owned()),
    );
    groups
}

/// Commits already replayed from the store are not news.
fn seed(shared: &Shared, tracker: &mut Tracker, cluster: &str) {
    let engine = shared.lag.engine();
    for gp in engine.group_partitions() {
        let n = engine.names(gp);
        if n.cluster == cluster
            && let Some(last) = engine.commits(gp).last()
        {
            tracker.remember_commit(n.group, n.topic, n.partition, last.offset);
        }
    }
}
