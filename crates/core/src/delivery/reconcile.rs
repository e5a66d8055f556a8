//! Reconciliation: a closed window's sends against what each group saw, every
//! missing message attributed to its cause (see the module above).

use super::*;

impl Ledger {
    /// Reconciles every window that is due at `now`. `committed` gives a group's
    /// committed offset on a partition (the next it will read), if known.
    pub fn reconcile(
        &mut self,
        now: Millis,
        committed: impl Fn(&str, &str, &str, i32) -> Option<i64>,
    ) -> Vec<WindowReport> {
        let mut out = Vec::new();
        let due: Vec<(PartitionKey, i64)> = self
            .produced
            .keys()
            .filter(|(_, w)| now.0 >= w.saturating_add(WINDOW_MS))
            .cloned()
            .collect();
        for (key, window) in due {
            let Some(groups) = self.groups.get(&(key.cluster.clone(), key.topic.clone())).cloned() else {
                continue;
            };
            let produced = self.produced[&(key.clone(), window)].clone();
            let partition = key.partition.unwrap_or(-1);
            for group in groups {
                let id = gp(&key.cluster, &group, &key.topic, partition);
                if self.done.contains(&(id.clone(), window)) {
                    continue;
                }
                let end = window.saturating_add(WINDOW_MS);
                let caught_up = match (produced.last_offset, key.partition) {
                    (Some(last), Some(p)) => committed(&key.cluster, &group, &key.topic, p).is_some_and(|c| c > last),
                    // Nothing landed: nothing to wait for.
                    (None, _) => true,
                    (Some(_), None) => true,
                };
                let closed_by = if caught_up && now.0 >= end.saturating_add(self.params.settle_ms) {
                    ClosedBy::CaughtUp
                } else if now.0 >= end.saturating_add(self.params.grace_ms) {
                    ClosedBy::Grace
                } else {
                    continue;
                };
                let consumed = self.consumed.get(&(id.clone(), window)).cloned().unwrap_or_default();
                let report = self.attribute(&key, &group, window, &produced, &consumed, closed_by, now);
                let t = self
                    .totals
                    .entry((key.cluster.clone(), group.clone(), key.topic.clone()))
                    .or_default();
                t.sent = t.sent.saturating_add(report.sent);
                t.received = t.received.saturating_add(report.received);
                t.delivered = t.delivered.saturating_add(report.delivered);
                t.missing.add(&report.missing);
                t.duplicates = t.duplicates.saturating_add(report.duplicates);
                let kept = self.reports.entry(id.clone()).or_default();
                kept.push(report.clone());
                if kept.len() > self.params.keep_windows {
                    kept.remove(0);
                }
                self.done.insert((id, window));
                out.push(report);
            }
        }
        self.forget_settled(now);
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn attribute(
        &self,
        key: &PartitionKey,
        group: &str,
        window: i64,
        produced: &Produced,
        consumed: &Consumed,
        closed_by: ClosedBy,
        now: Millis,
    ) -> WindowReport {
        let id = gp(&key.cluster, group, &key.topic, key.partition.unwrap_or(-1));
        let in_kafka_missing = produced.acked.saturating_sub(consumed.received);
        let (mut skipped, mut skipped_ranges, mut expired, mut expired_ranges) = (0, Vec::new(), 0, Vec::new());
        if let (Some(first), Some(last)) = (produced.first_offset, produced.last_offset) {
            let none = Vec::new();
            (skipped, skipped_ranges) = overlap(self.skipped.get(&id).unwrap_or(&none), first, last);
            (expired, expired_ranges) = overlap(self.expired.get(&id).unwrap_or(&none), first, last);
        }
        // Retention first: a consumer that jumps past deleted records (an
        // out-of-range reset) skipped what had already expired.
        let expired = expired.min(in_kafka_missing);
        let skipped = skipped.min(in_kafka_missing - expired);
        let processed_out = consumed.failed.saturating_add(consumed.dead_lettered);
        let mut trace_ids = produced.failed_trace_ids.clone();
        for id in &consumed.trace_ids {
            keep_sample(&mut trace_ids, Some(id));
        }
        WindowReport {
            cluster: key.cluster.clone(),
            group: group.to_owned(),
            topic: key.topic.clone(),
            partition: key.partition,
            window_start_ms: window,
            sent: produced.acked.saturating_add(produced.failed),
            acked: produced.acked,
            received: consumed.received,
            delivered: consumed.received.saturating_sub(processed_out),
            missing: Causes {
                never_reached_kafka: produced.failed,
                expired_by_retention: expired,
                skipped,
                failed_in_processing: consumed.failed,
                dead_lettered: consumed.dead_lettered,
                unexplained: in_kafka_missing - skipped - expired,
            },
            duplicates: consumed.received.saturating_sub(produced.acked),
            first_offset: produced.first_offset,
            last_offset: produced.last_offset,
            skipped_ranges,
            expired_ranges,
            trace_ids,
            closed_by,
            reconciled_at: now,
        }
    }

    /// Windows every group has reconciled, and old enough that no telemetry can
    /// still arrive for them, are dropped: memory stays bounded.
    fn forget_settled(&mut self, now: Millis) {
        let horizon = now
            .0
            .saturating_sub(self.params.grace_ms.saturating_add(WINDOW_MS).saturating_mul(2));
        self.produced.retain(|(_, w), _| *w >= horizon);
        self.consumed.retain(|(_, w), _| *w >= horizon);
        self.done.retain(|(_, w)| *w >= horizon);
    }
}

fn overlap(ranges: &[(i64, i64)], first: i64, last: i64) -> (u64, Vec<(i64, i64)>) {
    let mut n = 0u64;
    let mut hit = Vec::new();
    for &(a, b) in ranges {
        let (lo, hi) = (a.max(first), b.min(last));
        if lo <= hi {
            let len = u64::try_from(hi.saturating_sub(lo)).unwrap_or(0).saturating_add(1);
            n = n.saturating_add(len);
            hit.push((lo, hi));
        }
    }
    (n, hit)
}
