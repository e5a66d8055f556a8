//! Ingest: observations applied to the state, every one counted as accepted or
//! rejected, resets and retention losses detected.

use super::*;
use crate::model::check_offset;

impl Engine {
    /// Counts a point an adapter refused before it reached the engine (a malformed
    /// tag, say), so that every rejection is counted in one place.
    pub fn reject(&mut self, reason: RejectReason) {
        self.stats.rejected.add(reason);
    }

    /// Applies one observation made at `at`. Rejected points are counted and
    /// returned as the error; they never change lag.
    pub fn observe(&mut self, at: Millis, observation: &Observation<'_>) -> Result<(), RejectReason> {
        let result = self.apply(at, observation);
        self.count(result)
    }

    /// Every observation is counted here, whichever door it came in by.
    fn count(&mut self, result: Result<(), RejectReason>) -> Result<(), RejectReason> {
        match result {
            Ok(()) => self.stats.accepted += 1,
            Err(reason) => self.stats.rejected.add(reason),
        }
        result
    }

    /// An acknowledged produce, by partition id (resolved once per payload):
    /// validated and counted as [`Engine::observe`] does.
    pub fn produced(&mut self, pid: PartitionId, offset: i64, at: Millis) -> Result<(), RejectReason> {
        let result = self.apply_produced(pid, offset, at);
        if let Err(reason) = result
            && reason.is_failure_placeholder()
        {
            // A tracer's placeholder for a failed send: a failure, never progress.
            let p = &mut self.partitions[pid.0 as usize];
            p.last_failure_at = p.last_failure_at.max(Some(at));
        }
        self.count(result)
    }

    /// The partition's end offset, by partition id: validated and counted as
    /// [`Engine::observe`] does.
    pub fn end_offset(
        &mut self,
        pid: PartitionId,
        end: i64,
        source: EndOffsetSource,
        at: Millis,
    ) -> Result<(), RejectReason> {
        let result = self.apply_end_offset(pid, end, source, at);
        self.count(result)
    }

    /// A commit, by ids: validated and counted as [`Engine::observe`] does.
    pub fn committed(&mut self, gid: GroupId, pid: PartitionId, offset: i64, at: Millis) -> Result<(), RejectReason> {
        let result = self.apply_committed(gid, pid, offset, at);
        self.count(result)
    }

    pub(super) fn apply(&mut self, at: Millis, observation: &Observation<'_>) -> Result<(), RejectReason> {
        match *observation {
            Observation::Produced { partition, offset } => {
                match self
                    .partition_id(partition)
                    .and_then(|pid| check_offset(offset).map(|()| pid))
                {
                    Ok(pid) => self.apply_produced(pid, offset, at),
                    // A tracer's placeholder for a failed send: a failure, never progress.
                    Err(reason) if reason.is_failure_placeholder() => {
                        self.record_failure(partition, at);
                        Err(reason)
                    }
                    Err(reason) => Err(reason),
                }
            }
            Observation::ProduceFailed { partition, .. } => {
                self.record_failure(partition, at);
                Err(RejectReason::FailedSend)
            }
            Observation::Committed {
                group,
                partition,
                offset,
            }
            | Observation::OffsetsReset {
                group,
                partition,
                offset,
            } => {
                check_offset(offset)?;
                let pid = self.partition_id(partition)?;
                let gid = self.group_id(partition.cluster, group)?;
                if matches!(observation, Observation::OffsetsReset { .. }) {
                    // An operator's reset: judged from here on, what came before
                    // was another position (data loss counted before it stays).
                    let gpid = self.group_partition_id(gid, pid)?;
                    self.group_partitions[gpid.0 as usize].window.clear();
                }
                self.apply_committed(gid, pid, offset, at)
            }
            Observation::EndOffset {
                partition,
                offset,
                source,
            } => {
                check_offset(offset)?;
                let pid = self.partition_id(partition)?;
                self.apply_end_offset(pid, offset, source, at)
            }
            Observation::LogStart { partition, offset } => {
                check_offset(offset)?;
                let pid = self.partition_id(partition)?;
                self.log_start(pid, offset, at);
                Ok(())
            }
            Observation::StableOffset { partition, offset } => {
                check_offset(offset)?;
                let pid = self.partition_id(partition)?;
                let p = &mut self.partitions[pid.0 as usize];
                p.stable = p.stable.observe(offset, p.broker_end, at);
                // A holder named for another offset, or none held: not this one.
                let held = p.stable.held_since().is_some();
                if !held
                    || self
                        .open_transactions
                        .get(&pid)
                        .is_some_and(|t| t.first_offset != offset)
                {
                    self.open_transactions.remove(&pid);
                }
                Ok(())
            }
            Observation::TransactionHolder {
                partition,
                producer_id,
                producer_epoch,
                transactional_id,
                timeout_ms,
            } => {
                let pid = self.partition_id(partition)?;
                // Named for the offset held now; none held, nobody to name.
                let p = &self.partitions[pid.0 as usize];
                let (Some(first_offset), Some(_)) = (p.stable.offset(), p.stable.held_since()) else {
                    return Ok(());
                };
                let holder = OpenTransaction {
                    producer_id,
                    producer_epoch,
                    first_offset,
                    transactional_id: transactional_id.map(|id| Arc::from(truncated(id, MAX_TRANSACTIONAL_ID))),
                    timeout_ms,
                };
                if self.open_transactions.get(&pid).map(|t| &**t) != Some(&holder) {
                    self.open_transactions.insert(pid, Arc::new(holder));
                }
                Ok(())
            }
            Observation::RecordWritten { partition, offset } => {
                check_offset(offset)?;
                let end = offset.checked_add(1).ok_or(RejectReason::OffsetOutOfRange)?;
                let pid = self.partition_id(partition)?;
                let p = &mut self.partitions[pid.0 as usize];
                // The record before it was written by then, and the end passed it at
                // that time: two sightings that pin its produce time exactly. Neither
                // confirms the end offset now, nor is a send that succeeded.
                let before = Millis(at.0.saturating_sub(1));
                let a = p.history.insert(offset, before, Sighting::AtLeast, &self.history);
                let b = p.history.insert(end, at, Sighting::AtLeast, &self.history);
                if !(a || b) {
                    self.stats.redundant += 1;
                }
                Ok(())
            }
            Observation::ControlMarker { partition, offset } => {
                check_offset(offset)?;
                let pid = self.partition_id(partition)?;
                self.partitions[pid.0 as usize].unreadable = Unreadable::new(offset, offset.saturating_add(1));
                Ok(())
            }
            Observation::Unreadable { partition, from, to } => {
                check_offset(from)?;
                check_offset(to)?;
                if to <= from {
                    return Err(RejectReason::OffsetOutOfRange);
                }
                let pid = self.partition_id(partition)?;
                self.partitions[pid.0 as usize].unreadable = Unreadable::new(from, to);
                Ok(())
            }
            Observation::TopicRecreated { cluster, topic } => {
                let tid = self.topic_id(cluster, topic)?;
                for pid in self.topics[tid.0 as usize].partitions.clone() {
                    self.reset(pid, None, at, ResetEvidence::TopicRecreated);
                }
                Ok(())
            }
            Observation::Unreachable { partition } => {
                let pid = self.partition_id(partition)?;
                let p = &mut self.partitions[pid.0 as usize];
                p.unreachable_since = p.unreachable_since.or(Some(at));
                Ok(())
            }
            Observation::GroupDeleted { cluster, group } => {
                if let Some(gid) = self.find_group(cluster, group) {
                    self.delete_group(gid);
                }
                Ok(())
            }
            Observation::GroupMembers {
                cluster,
                group,
                members,
            } => {
                // Only of a group the engine follows: a description makes none.
                if let Some(gid) = self.find_group(cluster, group) {
                    let g = &mut self.groups[gid.0 as usize];
                    g.no_members_since = if members == 0 {
                        g.no_members_since.or(Some(at))
                    } else {
                        None
                    };
                }
                Ok(())
            }
            Observation::TopicDeleted { cluster, topic } => {
                self.delete_topic(cluster, topic);
                Ok(())
            }
            Observation::TopicRetention {
                cluster,
                topic,
                retention_ms,
            } => {
                let tid = self.topic_id(cluster, topic)?;
                self.topics[tid.0 as usize].retention_ms = Some(retention_ms.max(-1));
                Ok(())
            }
            Observation::Assigned { group, partition } => {
                // The row exists, with no commit: its lag is unknown (stale).
                let pid = self.partition_id(partition)?;
                let gid = self.group_id(partition.cluster, group)?;
                self.group_partition_id(gid, pid).map(|_| ())
            }
        }
    }

    pub(super) fn record_failure(&mut self, p: PartitionRef<'_>, at: Millis) {
        if p.partition < 0 {
            if let Ok(tid) = self.topic_id(p.cluster, p.topic) {
                let t = &mut self.topics[tid.0 as usize];
                t.unassigned_failure_at = t.unassigned_failure_at.max(Some(at));
            }
        } else if let Ok(pid) = self.partition_id(p) {
            let s = &mut self.partitions[pid.0 as usize];
            s.last_failure_at = s.last_failure_at.max(Some(at));
        }
    }

    fn apply_produced(&mut self, pid: PartitionId, offset: i64, at: Millis) -> Result<(), RejectReason> {
        check_offset(offset)?;
        let end = offset.checked_add(1).ok_or(RejectReason::OffsetOutOfRange)?;
        let p = &mut self.partitions[pid.0 as usize];
        p.last_success_at = p.last_success_at.max(Some(at));
        // Where the broker is asked, an ack beyond its answer waits for the next
        // one: a tracer cannot raise lag above broker truth.
        if p.broker_end.is_some_and(|b| end > b) {
            if p.unconfirmed.is_none_or(|(held, _)| end < held) {
                p.unconfirmed = Some((end, at));
            }
            return Ok(());
        }
        if !self.insert_ack(pid, end, at) {
            self.stats.redundant += 1;
        }
        Ok(())
    }

    fn insert_ack(&mut self, pid: PartitionId, end: i64, at: Millis) -> bool {
        let p = &mut self.partitions[pid.0 as usize];
        p.acked_end = p.acked_end.max(Some(end));
        let inserted = p.history.insert(end, at, Sighting::AtLeast, &self.history);
        if inserted {
            p.end_seen_at = p.end_seen_at.max(Some(at));
        }
        inserted
    }

    fn apply_end_offset(
        &mut self,
        pid: PartitionId,
        end: i64,
        source: EndOffsetSource,
        at: Millis,
    ) -> Result<(), RejectReason> {
        check_offset(end)?;
        let confirmations = self.config.reset_confirmations;
        let p = &mut self.partitions[pid.0 as usize];
        if source == EndOffsetSource::Broker {
            p.unreachable_since = None;
            p.broker_end = Some(end);
            match p.broker_end_max {
                Some(max) if end < max => {
                    if confirm(&mut p.pending_end_reset, confirmations) {
                        self.reset(pid, Some(end), at, ResetEvidence::EndOffsetDecreased);
                    }
                    return Ok(());
                }
                _ => {
                    p.pending_end_reset = None;
                    p.broker_end_max = p.broker_end_max.max(Some(end));
                }
            }
            // Sightings beyond the broker's own end (a tracer's, before the broker
            // was asked) never happened: the history is corrected to the broker.
            if p.history.truncate_above(end) {
                p.acked_end = p.acked_end.map(|a| a.min(end));
            }
            if let Some((held, held_at)) = p.unconfirmed
                && held <= end
            {
                p.unconfirmed = None;
                self.insert_ack(pid, held, held_at);
            }
        }
        let p = &mut self.partitions[pid.0 as usize];
        if !p.history.insert(end, at, Sighting::Exact, &self.history) {
            self.stats.redundant += 1;
        }
        // An unchanged answer still confirms the end offset is current.
        if p.history.end() == Some(end) || source == EndOffsetSource::Broker {
            p.end_seen_at = p.end_seen_at.max(Some(at));
        }
        Ok(())
    }

    pub(super) fn log_start(&mut self, pid: PartitionId, offset: i64, at: Millis) {
        let confirmations = self.config.reset_confirmations;
        let p = &mut self.partitions[pid.0 as usize];
        if let Some(prev) = p.log_start
            && offset < prev
        {
            if confirm(&mut p.pending_log_start_reset, confirmations) {
                // The new log's end is unknown until the broker is asked again.
                self.reset(pid, None, at, ResetEvidence::LogStartDecreased);
                self.partitions[pid.0 as usize].log_start = Some(offset);
            }
            return;
        }
        p.pending_log_start_reset = None;
        p.log_start = Some(offset);
        for (_, gpid) in p.groups.clone() {
            self.account_loss(gpid, at);
        }
    }

    /// A group committed `offset` (the next offset it will read).
    fn apply_committed(&mut self, gid: GroupId, pid: PartitionId, offset: i64, at: Millis) -> Result<(), RejectReason> {
        check_offset(offset)?;
        let gpid = self.group_partition_id(gid, pid)?;
        let p = &self.partitions[pid.0 as usize];
        let lag = match p.history.end_at(at).or(p.history.end()) {
            Some(end) => {
                let from = offset.max(p.log_start.unwrap_or(offset));
                u32::try_from(end.saturating_sub(from).max(0)).unwrap_or(u32::MAX)
            }
            // Unknown counts as lagging: it must not make a window look healthy.
            None => u32::MAX,
        };
        let gp = &mut self.group_partitions[gpid.0 as usize];
        let recorded = gp
            .window
            .record(Commit { offset, at, lag }, self.min_commit_distance_ms);
        if recorded == crate::window::Recorded::OutOfOrder {
            self.stats.redundant += 1;
        } else {
            self.account_loss(gpid, at);
        }
        Ok(())
    }

    /// Counts records the group can no longer read because retention removed them.
    pub(super) fn account_loss(&mut self, gpid: GroupPartitionId, at: Millis) {
        let gp = &self.group_partitions[gpid.0 as usize];
        let p = &self.partitions[gp.partition.0 as usize];
        let (Some(log_start), Some(last)) = (p.log_start, gp.window.last()) else {
            return;
        };
        if last.offset >= log_start {
            return;
        }
        let loss = self.losses.entry(gpid).or_default();
        let from = last.offset.max(loss.counted_upto);
        if from >= log_start {
            return;
        }
        let messages = log_start - from;
        loss.counted_upto = log_start;
        loss.messages = loss.messages.saturating_add(messages);
        let (group, partition) = (gp.group, gp.partition);
        let event = EngineEvent::DataLoss {
            at,
            cluster: self.names.name(self.groups[group.0 as usize].cluster).to_owned(),
            group: self.names.name(self.groups[group.0 as usize].name).to_owned(),
            topic: self.topic_name(partition).to_owned(),
            partition: p.partition,
            messages,
            committed_offset: last.offset,
            log_start_offset: log_start,
        };
        self.events.push(event);
    }

    /// Forgets a partition's history on broker evidence, and tells users.
    pub(super) fn reset(&mut self, pid: PartitionId, new_end: Option<i64>, at: Millis, evidence: ResetEvidence) {
        let p = &mut self.partitions[pid.0 as usize];
        let previous_end = p.history.end();
        match new_end {
            Some(end) => p.history.reset(end, at, &self.history),
            None => p.history = OffsetHistory::new(&self.history),
        }
        p.end_seen_at = new_end.map(|_| at);
        p.broker_end_max = new_end;
        p.broker_end = new_end;
        p.acked_end = None;
        p.unconfirmed = None;
        p.log_start = None;
        p.unreadable = Unreadable::NONE;
        p.stable = StableOffset::NONE;
        self.open_transactions.remove(&pid);
        p.pending_end_reset = None;
        p.pending_log_start_reset = None;
        let partition = p.partition;
        // Commits against the old log say nothing about the new one.
        for &(_, gpid) in &p.groups {
            self.group_partitions[gpid.0 as usize].window.clear();
            if let Some(loss) = self.losses.get_mut(&gpid) {
                loss.counted_upto = 0;
            }
        }
        self.stats.resets += 1;
        let (cluster, topic) = self.cluster_and_topic(pid);
        self.events.push(EngineEvent::TopicReset {
            at,
            cluster: cluster.to_owned(),
            topic: topic.to_owned(),
            partition,
            previous_end,
            new_end,
            evidence,
        });
    }
}

/// Counts one more lower answer; true once there have been enough in a row.
fn confirm(pending: &mut Option<PendingReset>, needed: u32) -> bool {
    let p = pending.get_or_insert(PendingReset { seen: 0 });
    p.seen += 1;
    if p.seen >= needed {
        *pending = None;
        true
    } else {
        false
    }
}
