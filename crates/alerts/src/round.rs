//! One round of the alert rules on the housekeeping tick.

use crate::service::of;
use crate::signals::{self, SERIES_PATH};
use streamsight_core::{AlertEvent, Millis, Record};
use streamsight_node::Shared;
use streamsight_node::sync::lock;
use streamsight_node::telemetry::Failure;

/// The lease whose holder evaluates the rules on a shared log.
const ALERTS_LEASE: &str = "streamsight-alert-rules";

/// Whether this node evaluates the rules: always on a log of its own; on a
/// shared log while it holds their lease (which it lets go after a pause).
pub(crate) fn holds_the_rules(shared: &Shared) -> bool {
    shared.leases.get().is_none_or(|leases| leases.owns(ALERTS_LEASE))
}

/// One round on the housekeeping tick: evaluate, store what changed, notify
/// what is due (never waiting for a receiver), store that it was.
pub async fn round(shared: std::sync::Arc<Shared>, writer: &streamsight_node::Writer, now: Millis) {
    // On a shared log one node at a time evaluates, stores and notifies: the
    // others apply what it stores.
    if !holds_the_rules(&shared) {
        // Why a round this node made earlier was skipped says nothing of
        // the node that evaluates now.
        of(&shared).not_evaluated(&shared.telemetry, None);
        return;
    }
    // A node of a sharded log sees only its shards: rules run on every
    // signal merged from the nodes holding each shard, and not at all while a
    // shard is missing (they would resolve what its data fires).
    let gathered = if shared.sharded() {
        let local =
            move |shared: &Shared, _: Option<&std::collections::BTreeSet<u32>>| of(shared).local_series(shared, now);
        let key = format!("Bearer {}{}", streamsight_http::auth::PEER_PREFIX, shared.peer_key);
        let credentials: Vec<_> = axum::http::HeaderValue::from_str(&key)
            .map(|v| (axum::http::header::AUTHORIZATION, v))
            .into_iter()
            .collect();
        let (parts, coverage) = streamsight_http::fanout::gather(&shared, SERIES_PATH, "", &credentials, local).await;
        if !coverage.missing.is_empty() {
            let missing: Vec<String> = coverage.missing.iter().map(u32::to_string).collect();
            let failed: Vec<String> = coverage
                .nodes
                .iter()
                .filter_map(|n| Some(format!("node {}: {}", n.node, n.error.as_ref()?)))
                .collect();
            of(&shared).not_evaluated(
                &shared.telemetry,
                Some(format!(
                    "{} of {} shards ({}) did not answer{}",
                    missing.len(),
                    coverage.count,
                    missing.join(", "),
                    if failed.is_empty() {
                        String::new()
                    } else {
                        format!("; {}", failed.join("; "))
                    }
                )),
            );
            return;
        }
        Some(signals::merge(parts))
    } else {
        None
    };
    let changed = {
        let shared = shared.clone();
        tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            let changed = of(&shared).evaluate_with(&shared, now, gathered.as_ref());
            let took = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            of(&shared)
                .evaluation_micros
                .store(took, std::sync::atomic::Ordering::Relaxed);
            changed
        })
        .await
        .unwrap_or_default()
    };
    of(&shared).not_evaluated(&shared.telemetry, None);
    // Asked again after the evaluation and before each step that others see:
    // a node stopped meanwhile (a pause) may have been replaced, and must
    // neither store what it judged from before nor tell anyone.
    if !holds_the_rules(&shared) {
        return;
    }
    if !changed.is_empty() {
        for r in &changed {
            if let Record::Alert { event, .. } = r
                && let AlertEvent::Changed(t) = &**event
                && t.to.notifies()
            {
                tracing::warn!(rule = %t.rule, labels = ?t.labels, from = t.from.as_str(), to = t.to.as_str(), value = ?t.value, "alert");
            }
        }
        // Written before anyone is told: a crash after this notifies on restart.
        if let Err(e) = writer.append(changed).await {
            shared.telemetry.failed(Failure::AlertsNotStored, &e);
            return;
        }
    }
    // Under half the retention, so that the oldest copy is never the only one
    // deleted; at least daily. A notification in flight at that moment is
    // written as told: at most once rather than at least once, for that one.
    let retention = streamsight_node::clock::time_ms(shared.config.retention).max(2_000);
    if let Err(e) = of(&shared).rewrite(writer, now, (retention / 2).min(86_400_000)).await {
        shared.telemetry.failed(Failure::AlertsNotStored, &e);
    }
    if !holds_the_rules(&shared) {
        return;
    }
    for (n, done, silenced) in of(&shared).due(now) {
        // A silenced alert counts as told: it is not sent when the silence ends.
        if silenced || of(&shared).notifiers().is_empty() {
            lock(&of(&shared).delivered).push(done);
            continue;
        }
        let mut pending = Vec::new();
        for notifier in of(&shared).notifiers() {
            match notifier.send(n.clone()) {
                Some(answer) => pending.push((notifier.config.shown_url(), answer)),
                None => shared.telemetry.failed(
                    Failure::NotificationNotDelivered,
                    &format!("rule {}: the notifier's queue is full", n.rule),
                ),
            }
        }
        let delivered = of(&shared).delivered.clone();
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut told = false;
            for (receiver, p) in pending {
                let ok = p.await.unwrap_or(false);
                if !ok {
                    shared.telemetry.failed(
                        Failure::NotificationNotDelivered,
                        &format!("rule {} to {receiver}", n.rule),
                    );
                }
                told |= ok;
            }
            // Told at least one receiver: never again for this state.
            if told {
                lock(&delivered).push(done);
            }
        });
    }
    let done = std::mem::take(&mut *lock(&of(&shared).delivered));
    if !done.is_empty()
        && let Err(e) = writer.append(done.clone()).await
    {
        shared.telemetry.failed(Failure::AlertsNotStored, &e);
        lock(&of(&shared).delivered).extend(done);
    }
}
