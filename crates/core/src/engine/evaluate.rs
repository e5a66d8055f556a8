//! Evaluation: lag, lag seconds and health at a time the caller passes.

use super::*;

impl Engine {
    pub fn evaluate_partition(&self, pid: PartitionId, now: Millis) -> PartitionReport {
        let p = &self.partitions[pid.0 as usize];
        PartitionReport {
            end_offset: p.history.end(),
            produce_offset: p.acked_end.map(|e| e - 1),
            log_start_offset: p.log_start,
            producer_failing: self.producer_failing(p, now),
            end_offset_at: p.end_seen_at,
            last_stable_offset: p.stable.offset(),
            open_transaction_since: self.open_transaction_since(p, now),
            open_transaction: self.open_transaction(pid, p, now),
            history_points: p.history.len(),
            history_precision: p.history.precision(),
        }
    }

    /// The reports at `now` of the group-partitions whose names `keep` accepts,
    /// with their names, sorted by name.
    pub fn reports(
        &self,
        now: Millis,
        keep: impl Fn(&GroupPartitionNames<'_>) -> bool,
    ) -> Vec<(GroupPartitionNames<'_>, LagReport)> {
        let mut rows: Vec<_> = self
            .group_partitions()
            .map(|id| (id, self.names(id)))
            .filter(|(_, names)| keep(names))
            .map(|(id, names)| (names, self.evaluate(id, now)))
            .collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        rows
    }

    /// Lag and health of one group on one partition at `now`.
    pub fn evaluate(&self, id: GroupPartitionId, now: Millis) -> LagReport {
        let gp = &self.group_partitions[id.0 as usize];
        let p = &self.partitions[gp.partition.0 as usize];
        let last = gp.window.last();
        let committed = last.map(|c| c.offset);
        let below_log_start = matches!((committed, p.log_start), (Some(c), Some(s)) if c < s);
        let mut report = LagReport {
            committed_offset: committed,
            end_offset: p.history.end().map(|e| e.max(committed.unwrap_or(e))),
            log_start_offset: p.log_start,
            lag_messages: None,
            lag_seconds: None,
            lag_seconds_lower_bound: false,
            status: Status::Stale,
            producer_failing: self.producer_failing(p, now),
            data_loss_messages: self.losses.get(&id).map_or(0, |l| l.messages),
            at_control_marker: false,
            broker_unreachable: p.unreachable_since.is_some(),
            last_commit_at: last.map(|c| c.at),
            end_offset_at: p.end_seen_at,
            last_stable_offset: p.stable.offset(),
            open_transaction_since: self.open_transaction_since(p, now),
            open_transaction: self.open_transaction(gp.partition, p, now),
            no_members_since: self.groups[gp.group.0 as usize].no_members_since,
        };
        if let (Some(c), Some(end)) = (committed, report.end_offset) {
            // Records below the log start are gone: loss, reported apart, not lag.
            let mut from = c.max(p.log_start.unwrap_or(c));
            // Markers and aborted records after the commit are no lag: a
            // reader is never handed them (and commits only what it was).
            if let Some(readable) = p.unreadable.readable_after(from) {
                from = readable.min(end.max(from));
                report.at_control_marker = true;
            } else if end.saturating_sub(from) == 1 && self.is_acked_marker(p, from) {
                from = end;
                report.at_control_marker = true;
            }
            let lag = end.saturating_sub(from).max(0);
            report.lag_messages = Some(lag);
            report.lag_seconds = if lag == 0 {
                Some(0.0)
            } else {
                match p.history.produce_time(from) {
                    Some(ProduceTime::Interpolated(t)) => Some(((now.0 as f64 - t) / 1000.0).max(0.0)),
                    Some(ProduceTime::NotAfter(t)) => {
                        report.lag_seconds_lower_bound = true;
                        Some(now.since(t) as f64 / 1000.0)
                    }
                    None => None,
                }
            };
        }
        report.status = partition_status(
            &HealthInput {
                window: &gp.window,
                now,
                lag_messages: report.lag_messages,
                lag_seconds: report.lag_seconds,
                below_log_start,
                end_age_ms: p.end_seen_at.map(|t| now.since(t)),
                // A read_committed reader's position stops exactly at the LSO.
                at_open_transaction: report.open_transaction_since.is_some()
                    && committed.is_some()
                    && committed == report.last_stable_offset,
            },
            &self.health,
        );
        // Nothing confirms the last answer: never call it healthy.
        if report.broker_unreachable && report.status == Status::Ok {
            report.status = Status::Stale;
        }
        // The broker describes the group with nobody in it: whatever its
        // commits did (an administrator's reset moves them too), nothing reads
        // what it is behind. A stop, not "consuming".
        if report.no_members_since.is_some()
            && report.lag_messages.is_some_and(|l| l > self.health.allowed_lag)
            && matches!(report.status, Status::Ok | Status::Warn | Status::Stall)
        {
            report.status = Status::Stop;
        }
        report
    }

    /// Why `report`, evaluated for `id` at `now`, has its status, in words.
    pub fn reason(&self, id: GroupPartitionId, report: &LagReport, now: Millis) -> String {
        let window = &self.group_partitions[id.0 as usize].window;
        crate::explain::reason(report, window, now, self.health.stop_grace_ms)
    }

    /// The span rates are measured over where callers have no reason to choose another.
    pub const RATE_WINDOW_MS: i64 = 60_000;

    /// The produce rate over the last `over_ms` (or over as much of it as the
    /// offset history holds, when that is at least a tenth of it): `None` where
    /// the history is too short to say.
    ///
    /// The end offset is read on the line between sightings, as produce times
    /// are: between two of them it rose steadily, not at the second. The window
    /// ends at the newest sighting while that is at most `end_overdue_after`
    /// old, since sources report every few seconds (a poll, a 10 s Data Streams
    /// bucket) and a sighting not come yet is no drop; past that, the time
    /// without one counts as time the end stood still.
    pub fn produce_rate(&self, pid: PartitionId, now: Millis, over_ms: i64) -> Option<f64> {
        let h = &self.partitions[pid.0 as usize].history;
        let (oldest, newest) = (h.oldest()?, h.newest()?);
        let until = Millis(now.0.min(newest.at.0.max(now.0.saturating_sub(self.end_overdue_ms))));
        let from = Millis(until.0.saturating_sub(over_ms)).max(oldest.at);
        let span = until.since(from);
        if span <= 0 || span < over_ms / 10 {
            return None;
        }
        let rose = h.end_interpolated(until)? - h.end_interpolated(from)?;
        Some(rose.max(0.0) * 1000.0 / span as f64)
    }

    /// Offsets a group committed per second on a partition, over the commits the
    /// health window holds; `None` with fewer than two commits apart in time.
    pub fn consume_rate(&self, id: GroupPartitionId) -> Option<f64> {
        let w = &self.group_partitions[id.0 as usize].window;
        let (first, last) = (w.first()?, w.last()?);
        let span = last.at.since(first.at);
        (span > 0).then(|| (last.offset - first.offset).max(0) as f64 * 1000.0 / span as f64)
    }

    /// A marker inferred from acks: the last acked record's next offset is
    /// the broker's last, which no send took.
    pub(super) fn is_acked_marker(&self, p: &PartitionState, offset: i64) -> bool {
        p.acked_end == Some(offset) && p.broker_end == offset.checked_add(1)
    }

    /// Since when an open transaction has held the partition's last stable offset
    /// below its end, once it has for `open_transaction_after`.
    pub(super) fn open_transaction_since(&self, p: &PartitionState, now: Millis) -> Option<Millis> {
        let since = p.stable.held_since()?;
        (now.since(since) >= self.open_transaction_ms).then_some(since)
    }

    /// Who holds the last stable offset, once it counts as an open transaction.
    pub(super) fn open_transaction(
        &self,
        pid: PartitionId,
        p: &PartitionState,
        now: Millis,
    ) -> Option<Arc<OpenTransaction>> {
        self.open_transaction_since(p, now)?;
        self.open_transactions.get(&pid).cloned()
    }

    /// The partitions an open transaction holds at `now` whose holder the
    /// broker named, with it and since when it has held the partition.
    pub fn named_open_transactions(&self, now: Millis) -> Vec<(PartitionId, Arc<OpenTransaction>, Millis)> {
        let mut named: Vec<_> = self
            .open_transactions
            .keys()
            .filter_map(|&pid| {
                let p = &self.partitions[pid.0 as usize];
                Some((
                    pid,
                    self.open_transaction(pid, p, now)?,
                    self.open_transaction_since(p, now)?,
                ))
            })
            .collect();
        named.sort_by_key(|(pid, ..)| *pid);
        named
    }

    /// The time retention (ms) of `pid`'s topic as its settings say: -1 when
    /// nothing is deleted by time, None when unknown.
    pub fn retention_ms(&self, pid: PartitionId) -> Option<i64> {
        let p = &self.partitions[pid.0 as usize];
        self.topics[p.topic.0 as usize].retention_ms
    }

    /// How long a partition stays `producer_failing` after a failure report.
    pub fn producer_failing_window_ms(&self) -> i64 {
        self.producer_failing_ms
    }

    pub(super) fn producer_failing(&self, p: &PartitionState, now: Millis) -> bool {
        let topic_failure = self.topics[p.topic.0 as usize].unassigned_failure_at;
        let Some(failure) = p.last_failure_at.max(topic_failure) else {
            return false;
        };
        now.since(failure) <= self.producer_failing_ms && p.last_success_at.is_none_or(|s| s < failure)
    }

    /// A group's health: the worst status of its partitions.
    pub fn evaluate_group(&self, id: GroupId, now: Millis) -> GroupReport {
        let mut fold = GroupFold::default();
        for &gpid in &self.groups[id.0 as usize].partitions {
            fold.add(gpid, self.evaluate(gpid, now));
        }
        let fold = fold.finish();
        GroupReport {
            group: id,
            status: fold.status,
            partitions: fold.partitions,
            total_lag: fold.total_lag,
            complete: fold.complete,
            max_lag: fold.max_lag,
            max_lag_seconds: fold.max_lag_seconds,
            lag_seconds_lower_bound: fold.lag_seconds_lower_bound,
            producer_failing: fold.producer_failing,
            worst: fold.worst,
        }
    }

    /// Bytes held per partition and per group-partition, index entries included.
    pub fn memory(&self) -> MemoryUsage {
        let partition_bytes = self
            .partitions
            .iter()
            // The partition's list of groups is paid for per group-partition below.
            .map(|p| PARTITION_FIXED_BYTES + p.history.heap_bytes())
            .sum();
        // Its state, and its entries in the group's and the partition's lists.
        let group_partition_bytes = self.group_partitions.len() * std::mem::size_of::<GroupPartitionState>()
            + self.partitions.iter().map(|p| p.groups.capacity()).sum::<usize>()
                * std::mem::size_of::<(GroupId, GroupPartitionId)>()
            + self.groups.iter().map(|g| g.partitions.capacity()).sum::<usize>()
                * std::mem::size_of::<GroupPartitionId>()
            + self.losses.capacity() * (std::mem::size_of::<(GroupPartitionId, Loss)>() + 1);
        MemoryUsage {
            partitions: self.partitions.len(),
            partition_bytes,
            group_partitions: self.group_partitions.len(),
            group_partition_bytes,
        }
    }
}
