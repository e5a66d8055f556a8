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

/// How long without word from the node evaluating the rules on a shared
/// log before the others say nobody does: it says so every
/// [`SAY_EVALUATED_EVERY_MS`](crate::service::SAY_EVALUATED_EVERY_MS), and a
/// dead holder's lease moves within the leases group's 6 s session and a
/// rebalance (6-9 s measured), so a healthy move never trips it.
pub const NOT_EVALUATED_AFTER_MS: i64 = 20_000;

/// Why the rules are not being evaluated now, as this node knows (None: they
/// are): its own last round's reason when it holds their lease (or the log
/// is its own); else from the evaluating node's word in the log, which
/// must be newer than [`NOT_EVALUATED_AFTER_MS`].
pub fn not_evaluated_because(shared: &Shared, now: Millis) -> Option<String> {
    let service = of(shared);
    judge(
        holds_the_rules(shared),
        service.skipped_because(),
        service.heard_evaluated(),
        now,
    )
}

/// [`not_evaluated_because`] from what it depends on: whether this node
/// holds the rules, why its last round skipped them, and when the node that
/// evaluates last said it did.
fn judge(holds: bool, skipped: Option<String>, heard: Option<Millis>, now: Millis) -> Option<String> {
    if holds {
        return skipped;
    }
    match heard {
        None => Some(
            "no node has said that it evaluates the rules since this one started: the node holding their lease may \
             be gone, or skipping rounds"
                .to_owned(),
        ),
        Some(at) if now.since(at) > NOT_EVALUATED_AFTER_MS => Some(format!(
            "no node has evaluated the rules for {} s (the last said so at {}): the node holding their lease may be \
             gone and none has taken it over, or it skips rounds",
            now.since(at) / 1000,
            at.iso()
        )),
        Some(_) => None,
    }
}

/// One round on the housekeeping tick: evaluate, store what changed, notify
/// what is due (never waiting for a receiver), store that it was.
pub async fn round(shared: std::sync::Arc<Shared>, writer: &streamsight_node::Writer, now: Millis) {
    of(&shared).note_open_transactions(&shared, now);
    evaluate_round(shared.clone(), writer, now).await;
    let evaluated = not_evaluated_because(&shared, now).is_none();
    of(&shared)
        .evaluated_now
        .store(evaluated, std::sync::atomic::Ordering::Relaxed);
}

async fn evaluate_round(shared: std::sync::Arc<Shared>, writer: &streamsight_node::Writer, now: Millis) {
    // On a shared log one node at a time evaluates, stores and notifies: the
    // others apply what it stores.
    if !holds_the_rules(&shared) {
        // Why a round this node made earlier was skipped says nothing of
        // the node that evaluates now.
        of(&shared).not_evaluated(&shared.telemetry, None);
        store_delivered(&shared, writer).await;
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
    let mut changed = changed;
    // On a shared log the others learn from this that the rules are evaluated.
    if shared.leases.get().is_some()
        && let Some(said) = of(&shared).say_evaluated(now)
    {
        changed.push(said);
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
        let writer = writer.clone();
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
            // Told at least one receiver: never again for this state. Stored
            // at once, not by the next round: the rules' lease may have moved
            // by then, and the next holder would tell it again.
            if told && let Err(e) = writer.append(vec![done.clone()]).await {
                shared.telemetry.failed(Failure::AlertsNotStored, &e);
                lock(&delivered).push(done);
            }
        });
    }
    store_delivered(&shared, writer).await;
}

/// Stores the records of notifications delivered that could not be stored
/// when they were (and silenced ones'); on every node, whether or not it
/// holds the rules now.
async fn store_delivered(shared: &Shared, writer: &streamsight_node::Writer) {
    let done = std::mem::take(&mut *lock(&of(shared).delivered));
    if !done.is_empty()
        && let Err(e) = writer.append(done.clone()).await
    {
        shared.telemetry.failed(Failure::AlertsNotStored, &e);
        lock(&of(shared).delivered).extend(done);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_not_holding_the_rules_says_they_are_not_evaluated_once_the_holder_falls_silent() {
        let heard = Some(Millis(1_000_000));
        let at = |ms: i64| Millis(1_000_000 + ms);
        assert_eq!(judge(false, None, heard, at(NOT_EVALUATED_AFTER_MS)), None);
        let why = judge(false, None, heard, at(NOT_EVALUATED_AFTER_MS + 1_000)).unwrap();
        assert!(
            why.contains("for 21 s") && why.contains("none has taken it over"),
            "{why}"
        );
        // Never heard of: unknown, not evaluated.
        assert!(
            judge(false, None, None, at(0))
                .unwrap()
                .contains("since this one started")
        );
        // The holder answers for itself: its own rounds' reason, whatever it heard.
        assert_eq!(judge(true, None, None, at(60_000)), None);
        let skipped = Some("2 of 6 shards (1, 4) did not answer".to_owned());
        assert_eq!(judge(true, skipped.clone(), heard, at(0)), skipped);
    }
}
