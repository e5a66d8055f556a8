//! Three per-group signals no peer computes well, derived from the engine on
//! each housekeeping round: how long until retention deletes messages the group has not
//! read (the margin as a time, from how fast the log start advances), how long
//! until it catches up (from its consume and produce rates, worst partition, so
//! one skewed partition shows), and how many of its partitions it stopped
//! committing while its others move.

use super::LagService;
use crate::sync::lock;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use streamsight_core::{Engine, GroupId, Millis, PartitionId};

/// A partition silent this long while a sibling committed within a minute.
const NOT_COMMITTING_MS: i64 = 300_000;
const SIBLING_RECENT_MS: i64 = 60_000;
/// A group that falls behind forever: its catch-up time, as a number thresholds compare.
pub const NEVER: f64 = 1e12;

/// One group's derived signals; `None` where unknown.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct GroupSignals {
    pub cluster: String,
    pub group: String,
    /// Seconds until retention deletes the oldest unread message, worst partition.
    pub retention_margin_seconds: Option<f64>,
    /// Seconds until the group has read what is there, worst partition ([`NEVER`]
    /// while it falls behind).
    pub catch_up_seconds: Option<f64>,
    /// Partitions with lag the group stopped committing while its others move.
    pub partitions_not_committing: u32,
}

impl GroupSignals {
    /// The group's signals from two nodes' parts of it (a sharded log): the
    /// least margin, the longest catch-up, the partitions left behind added
    /// up; a part unknown on one node is the other's. The same rules as
    /// [`crate::signals::merge`]'s for these signals' series.
    pub fn merge(&mut self, other: &GroupSignals) {
        fn pick(a: Option<f64>, b: Option<f64>, f: fn(f64, f64) -> f64) -> Option<f64> {
            match (a, b) {
                (Some(a), Some(b)) => Some(f(a, b)),
                (x, None) | (None, x) => x,
            }
        }
        self.retention_margin_seconds = pick(self.retention_margin_seconds, other.retention_margin_seconds, f64::min);
        self.catch_up_seconds = pick(self.catch_up_seconds, other.catch_up_seconds, f64::max);
        self.partitions_not_committing = self
            .partitions_not_committing
            .saturating_add(other.partitions_not_committing);
    }
}

/// The derived signals of this node's engine as of the last round: refreshed
/// once per housekeeping round, read by the alert rules, `/metrics`, the API
/// and the dashboard alike.
#[derive(Debug)]
pub struct DerivedSignals {
    starts: Mutex<LogStarts>,
    last: Mutex<Arc<Vec<GroupSignals>>>,
    /// Partitions whose log start is followed at most.
    max_partitions: usize,
}

impl DerivedSignals {
    pub fn new(max_partitions: usize) -> Self {
        Self {
            starts: Mutex::new(LogStarts::default()),
            last: Mutex::new(Arc::new(Vec::new())),
            max_partitions,
        }
    }

    /// Every group's signals at `now`, kept for the readers until the next round.
    pub fn refresh(&self, lag: &LagService, now: Millis) -> Arc<Vec<GroupSignals>> {
        let derived = {
            let mut starts = lock(&self.starts);
            let mut all = compute(lag, &mut starts, now, self.max_partitions);
            all.sort_unstable_by(|a, b| (&a.cluster, &a.group).cmp(&(&b.cluster, &b.group)));
            Arc::new(all)
        };
        *lock(&self.last) = derived.clone();
        derived
    }

    /// The signals of the last round, sorted by cluster and group.
    pub fn groups(&self) -> Arc<Vec<GroupSignals>> {
        lock(&self.last).clone()
    }

    /// One group's signals of the last round, if it has any.
    pub fn group(&self, cluster: &str, group: &str) -> Option<GroupSignals> {
        let all = self.groups();
        all.binary_search_by(|g| (g.cluster.as_str(), g.group.as_str()).cmp(&(cluster, group)))
            .ok()
            .map(|i| all[i].clone())
    }
}

/// The log start of each partition when first and last seen: how fast it advances.
#[derive(Debug, Default)]
pub struct LogStarts {
    seen: HashMap<PartitionId, (i64, Millis, i64, Millis)>,
}

impl LogStarts {
    fn observe(&mut self, pid: PartitionId, offset: i64, at: Millis, max: usize) {
        if !self.seen.contains_key(&pid) && self.seen.len() >= max {
            return;
        }
        let e = self.seen.entry(pid).or_insert((offset, at, offset, at));
        if offset < e.2 {
            // Recreated or truncated: start again.
            *e = (offset, at, offset, at);
        } else {
            e.2 = offset;
            e.3 = at;
        }
    }

    /// Offsets per second the log start advances; `None` until a minute is seen.
    fn rate(&self, pid: PartitionId) -> Option<f64> {
        let &(first, first_at, last, last_at) = self.seen.get(&pid)?;
        let span = last_at.since(first_at);
        (span >= Engine::RATE_WINDOW_MS).then(|| (last - first) as f64 * 1000.0 / span as f64)
    }
}

/// Every group's signals at `now`, updating the log-start rates; the engine
/// is taken in pieces (see [`LagService::each_group`]).
pub fn compute(lag: &LagService, starts: &mut LogStarts, now: Millis, max: usize) -> Vec<GroupSignals> {
    lag.each_partition(|engine, pid| {
        if let Some(s) = engine.evaluate_partition(pid, now).log_start_offset {
            starts.observe(pid, s, now, max);
        }
    });
    lag.each_group(|engine, gid| group(engine, starts, gid, now))
}

/// Seconds until retention deletes the oldest unread message (at the
/// committed offset `c`), the log start `s` advancing `rate` offsets a
/// second: unknown (`None`) while the log start is not seen advancing, for
/// a log whose start never moves deletes nothing. Already behind the log
/// start (`c < s`): 0, the messages are gone (the `data_loss` status says so).
fn retention_margin(c: i64, s: i64, rate: f64) -> Option<f64> {
    if !(rate > 0.0 && rate.is_finite()) {
        return None;
    }
    if c < s {
        return Some(0.0);
    }
    // The message at `c` goes when the log start passes it.
    Some((c - s + 1) as f64 / rate)
}

fn group(engine: &Engine, starts: &LogStarts, gid: GroupId, now: Millis) -> GroupSignals {
    let (cluster, group) = engine.group_name(gid);
    let mut out = GroupSignals {
        cluster: cluster.to_owned(),
        group: group.to_owned(),
        ..GroupSignals::default()
    };
    let members = engine.group_members(gid);
    let last_commits: Vec<Option<Millis>> = members
        .iter()
        .map(|&gp| engine.commits(gp).last().map(|c| c.at))
        .collect();
    let recent = |t: &Option<Millis>| t.is_some_and(|t| now.since(t) <= SIBLING_RECENT_MS);
    let moving = last_commits.iter().filter(|t| recent(t)).count();
    let mut catch_up_unknown = false;
    for (i, &gp) in members.iter().enumerate() {
        let r = engine.evaluate(gp, now);
        let pid = engine.partition_of(gp);
        let lag = r.lag_messages.unwrap_or(0);
        // Retention margin: unread messages between the log start and the commit,
        // eaten at the log start's pace.
        if let (Some(c), Some(s), Some(rate)) = (r.committed_offset, r.log_start_offset, starts.rate(pid))
            && lag > 0
            && let Some(margin) = retention_margin(c, s, rate)
        {
            out.retention_margin_seconds = Some(out.retention_margin_seconds.map_or(margin, |m: f64| m.min(margin)));
        }
        // Time retention: the oldest unread record goes once it is as old as
        // the topic keeps records (its segment's newest record, which is no
        // older, decides: this is the soonest). Known before anything moves.
        if let (Some(retention), Some(age)) = (engine.retention_ms(pid), r.lag_seconds)
            && lag > 0
            && retention >= 0
        {
            let margin = (retention as f64 / 1000.0 - age).max(0.0);
            out.retention_margin_seconds = Some(out.retention_margin_seconds.map_or(margin, |m: f64| m.min(margin)));
        }
        // Catch-up: lag over (consume rate − produce rate), both over the same
        // span (from the window's first commit to now): a produce rate over the
        // last minute against a consume rate over older commits said "never"
        // while producers had stopped and the lag fell.
        let consume = engine.consume_rate(gp);
        let span = engine
            .commits(gp)
            .next()
            .map_or(Engine::RATE_WINDOW_MS, |c| now.since(c.at));
        let produce = engine.produce_rate(pid, now, span.max(1));
        let catch_up = match (r.lag_messages, consume, produce) {
            (Some(0), _, _) => Some(0.0),
            (Some(l), Some(c), Some(p)) if c > p => Some(l as f64 / (c - p)),
            (Some(_), Some(_), Some(_)) => Some(NEVER),
            _ => None,
        };
        // The group's is its worst partition's; one it cannot say makes it unknown.
        catch_up_unknown |= catch_up.is_none();
        if let Some(t) = catch_up {
            out.catch_up_seconds = Some(out.catch_up_seconds.map_or(t, |m: f64| m.max(t)));
        }
        // Silent here while a sibling moves.
        let silent = last_commits[i].is_none_or(|t| now.since(t) > NOT_COMMITTING_MS);
        let sibling_moves = moving > usize::from(recent(&last_commits[i]));
        if lag > 0 && silent && sibling_moves {
            out.partitions_not_committing += 1;
        }
    }
    if catch_up_unknown {
        out.catch_up_seconds = None;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::retention_margin;

    #[test]
    fn a_log_start_that_never_moves_deletes_nothing() {
        // A group at the log start of a log that keeps everything (dev-kafka):
        // unknown, never "deleted in 0 s".
        assert_eq!(retention_margin(0, 0, 0.0), None);
        assert_eq!(retention_margin(500, 0, 0.0), None);
        assert_eq!(retention_margin(0, 0, f64::NAN), None);
    }

    #[test]
    fn the_margin_is_the_distance_to_the_log_start_at_its_pace() {
        assert_eq!(retention_margin(0, 0, 2.0), Some(0.5));
        assert_eq!(retention_margin(119, 0, 2.0), Some(60.0));
        assert_eq!(retention_margin(10, 20, 2.0), Some(0.0), "already deleted");
    }
}
