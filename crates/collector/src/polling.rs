//! The poller inside `serve`: one task per configured cluster, polling on its
//! interval and handing what changed to the writer like any other intake.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;
use streamsight_node::clock;
use streamsight_node::telemetry::Failure;
use streamsight_node::{Shared, Writer};
use streamsight_poller::{ClusterClient, ClusterConfig, Tracker};

/// Polls `config`'s cluster on its interval; on a shared log, only while
/// this node holds the cluster's lease.
pub(crate) async fn poll_forever(shared: Arc<Shared>, writer: Writer, mut config: ClusterConfig) {
    // A log in a cluster this collector polls: its own topics there (the
    // log, its shards', leases' and nodes' topics) and the groups that only
    // read them are the collector's insides, not the estate it watches.
    if shared.config.log_is_shared()
        && let Ok(url) = streamsight_store::KafkaUrl::parse(&shared.config.storage)
    {
        config.topics_deny.push(url.topic.clone());
        config.topics_deny.push(format!("{}-*", url.topic));
    }
    let leases = shared.leases.get().cloned();
    let mut tracker = Tracker::new(&config.name, config.forget_after);
    seed(&shared, &mut tracker, &config.name);
    let mut leased = leases.is_none();
    let mut client = ClusterClient::new(config.clone());
    let mut tick = tokio::time::interval(config.poll_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Between polls, the lagging groups' offsets asked again (docs/poller.md).
    let refreshing = !config.lagging_refresh.is_zero() && config.lagging_refresh < config.poll_interval;
    let mut refresh = tokio::time::interval(if refreshing {
        config.lagging_refresh
    } else {
        config.poll_interval
    });
    refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut unknown = UnknownGroups::default();
    let mut round = 0u64;
    // Said once, and again after groups were listed in between.
    let mut said_unlisted = false;
    loop {
        tokio::select! {
            biased;
            _ = tick.tick() => {}
            _ = refresh.tick(), if refreshing => {
                if leased && round > 0 {
                    refresh_lagging(&shared, &writer, &mut client, &mut tracker).await;
                }
                continue;
            }
        }
        if let Some(leases) = &leases {
            let owns = leases.owns(&config.name);
            if owns && !leased {
                // Another node polled meanwhile: start from what the log says.
                tracker = Tracker::new(&config.name, config.forget_after);
                seed(&shared, &mut tracker, &config.name);
                tracing::info!(cluster = %config.name, "polling: this node holds the lease");
            }
            leased = owns;
            if !owns {
                continue;
            }
        }
        round += 1;
        let groups = {
            let (shared, config) = (shared.clone(), config.clone());
            let due = unknown.due_set(round);
            tokio::task::spawn_blocking(move || groups_to_ask(&shared, &config, &due))
                .await
                .unwrap_or_default()
        };
        let started = Instant::now();
        let snap = client.poll(clock::now(), &groups).await;
        if snap.metadata_ok {
            unknown.update(&groups, &snap, &config, round);
        }
        let elapsed = started.elapsed();
        let update = tracker.update(&snap);
        let (durable, transient) = update.split(shared.config.log_is_shared());
        let stored = durable.len();
        if let Err(e) = writer.append_with_transient(durable, transient).await {
            shared
                .telemetry
                .failed(Failure::PollNotStored, &format!("cluster {}: {e}", config.name));
        }
        if snap.metadata_ok && !snap.groups_listed && !said_unlisted {
            let why = snap.unlisted_why.as_deref().unwrap_or("the brokers did not list them");
            tracing::warn!(
                cluster = %config.name,
                groups_configured = config.groups.len(),
                "no consumer groups listed: {why}; only the groups named in this cluster's `groups = [...]` \
                 and those instrumented clients report are polled"
            );
        }
        said_unlisted = !snap.groups_listed && (snap.metadata_ok || said_unlisted);
        let failed = !snap.metadata_ok;
        if failed {
            let errors = snap.errors.join("; ");
            shared.telemetry.failed(
                Failure::ClusterUnreachable,
                &format!("cluster {}: {errors}", config.name),
            );
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

/// One refresh of the partitions where groups lagged at the last look: what
/// moved goes to the writer like a poll's.
async fn refresh_lagging(shared: &Shared, writer: &Writer, client: &mut ClusterClient, tracker: &mut Tracker) {
    let lagging = tracker.lagging(streamsight_poller::tracker::MAX_REFRESHED);
    if lagging.is_empty() {
        return;
    }
    let cluster = client.config().name.clone();
    let snap = client.refresh(clock::now(), &lagging).await;
    if !snap.errors.is_empty() {
        tracing::debug!(cluster = %cluster, errors = ?snap.errors, "refresh partly failed");
    }
    let (durable, transient) = tracker.update(&snap).split(shared.config.log_is_shared());
    if let Err(e) = writer.append_with_transient(durable, transient).await {
        shared
            .telemetry
            .failed(Failure::PollNotStored, &format!("cluster {cluster}: {e}"));
    }
    shared.clusters.refreshed(&cluster, snap.requests);
}

/// Groups only instrumented clients named, that the broker answered nothing for:
/// asked again after 2, 4, 8... polls (at most every `MAX_BACKOFF` polls), so
/// that names sent to the intake cannot multiply requests to the cluster.
#[derive(Debug, Default)]
pub(crate) struct UnknownGroups {
    /// Group -> (consecutive empty answers, round it may be asked again).
    misses: std::collections::HashMap<String, (u32, u64)>,
}

const MAX_BACKOFF: u64 = 64;
/// Groups only clients named, asked per poll at most.
const MAX_REPORTED_GROUPS: usize = 1_000;

impl UnknownGroups {
    /// The groups not to ask this round.
    fn due_set(&self, round: u64) -> std::collections::HashSet<String> {
        self.misses
            .iter()
            .filter(|&(_, &(_, next))| round < next)
            .map(|(g, _)| g.clone())
            .collect()
    }

    fn update(
        &mut self,
        asked: &BTreeSet<String>,
        snap: &streamsight_poller::Snapshot,
        config: &ClusterConfig,
        round: u64,
    ) {
        let answered: BTreeSet<&str> = snap
            .groups
            .iter()
            .filter(|g| g.listed || !g.offsets.is_empty())
            .map(|g| g.name.as_str())
            .collect();
        for group in asked {
            if answered.contains(group.as_str()) || config.groups.contains(group) {
                self.misses.remove(group);
            } else {
                let (n, _) = self.misses.get(group).copied().unwrap_or((0, 0));
                let n = n.saturating_add(1);
                let wait = (1u64 << n.min(6)).min(MAX_BACKOFF);
                self.misses.insert(group.clone(), (n, round + wait));
            }
        }
        // Forget groups the engine no longer has: the map stays as small as it.
        if self.misses.len() > 4 * MAX_REPORTED_GROUPS {
            self.misses.retain(|g, _| asked.contains(g));
        }
    }
}

/// Groups named in the config and those instrumented clients reported in this
/// cluster (the latter within the backoff and cap of [`UnknownGroups`]): asked
/// for by name, since not every broker can list groups.
fn groups_to_ask(
    shared: &Shared,
    config: &ClusterConfig,
    waiting: &std::collections::HashSet<String>,
) -> BTreeSet<String> {
    let engine = shared.lag.engine();
    let mut groups: BTreeSet<String> = config.groups.iter().cloned().collect();
    groups.extend(
        engine
            .groups()
            .map(|g| engine.group_name(g))
            .filter(|(c, g)| *c == config.name && !waiting.contains(*g))
            .map(|(_, g)| g.to_owned())
            .take(MAX_REPORTED_GROUPS),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_the_broker_does_not_know_are_asked_less_and_less() {
        let config = ClusterConfig::new("c", "k:9092");
        let mut unknown = UnknownGroups::default();
        let asked: BTreeSet<String> = ["ghost".to_owned()].into();
        let snap = streamsight_poller::Snapshot {
            metadata_ok: true,
            ..Default::default()
        };
        let mut asked_in = Vec::new();
        for round in 1..=200 {
            if !unknown.due_set(round).contains("ghost") {
                asked_in.push(round);
                unknown.update(&asked, &snap, &config, round);
            }
        }
        // 2, 4, 8, 16, 32, then every 64 polls: 8 requests in 200 polls, not 200.
        assert!(asked_in.len() <= 8, "{asked_in:?}");
        assert!(!unknown.due_set(1).contains("real"), "a new name is asked at once");
    }
}
