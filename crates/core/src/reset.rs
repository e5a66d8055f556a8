//! Planning an offset reset before anything is changed: per partition, where the
//! group is, where it would be, and how many offsets it would skip or read
//! again. Pure: the broker's answers (committed offsets, log start and end, the
//! offset for a time, record times) are handed in by an adapter.
//!
//! The targets clamp as `kafka-consumer-groups --reset-offsets` does: an offset
//! outside the log is moved to its nearest end, and a time past the last record
//! is the end. Counts are of offsets, an upper bound on messages (compaction
//! and transaction markers leave gaps).

use crate::time::Millis;
use serde::{Deserialize, Serialize};

/// Where to move a group's offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResetTo {
    /// This offset, clamped to the log.
    Offset(i64),
    /// The first offset still in the log.
    Earliest,
    /// The end of the log: read only what is written from now on.
    Latest,
    /// The committed offset moved by this many (negative: read again).
    ShiftBy(i64),
    /// The first offset whose record was written at or after this time.
    Time(Millis),
}

impl std::fmt::Display for ResetTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResetTo::Offset(o) => write!(f, "offset {o}"),
            ResetTo::Earliest => f.write_str("the earliest offset"),
            ResetTo::Latest => f.write_str("the latest offset"),
            ResetTo::ShiftBy(n) if *n < 0 => write!(f, "{} offset(s) back from the committed offset", n.unsigned_abs()),
            ResetTo::ShiftBy(n) => write!(f, "{n} offset(s) on from the committed offset"),
            ResetTo::Time(t) => write!(f, "the first record at or after {}", t.iso()),
        }
    }
}

/// What the broker says of one partition the reset touches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionState {
    pub topic: String,
    pub partition: i32,
    /// The group's committed offset; `None` when it has none here.
    pub committed: Option<i64>,
    pub log_start: Option<i64>,
    pub end: Option<i64>,
    /// For [`ResetTo::Time`]: the broker's offset for the time; `None` when no
    /// record is that recent (the target is then the end).
    pub offset_for_time: Option<i64>,
}

/// One partition of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionPlan {
    pub topic: String,
    pub partition: i32,
    pub committed: Option<i64>,
    pub target: i64,
    pub log_start: i64,
    pub end: i64,
    /// Offsets the group would jump over that are still in the log.
    pub skip: u64,
    /// Offsets the group would read a second time.
    pub reread: u64,
    /// Offsets below the log start the group had not read: retention deleted
    /// them already, the reset does not.
    pub already_expired: u64,
    /// When the first and the last of the skipped or re-read records were
    /// written (the record batches holding them), when the broker said.
    pub first_time_ms: Option<i64>,
    pub last_time_ms: Option<i64>,
    /// Why the target is not what was asked ("clamped to the log end").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl PartitionPlan {
    /// The offsets whose record times say the span the reset covers: the first
    /// and last skipped or re-read, `None` when it moves nothing.
    pub fn span_offsets(&self) -> Option<(i64, i64)> {
        let from = self.committed?.max(self.log_start);
        match self.target.cmp(&from) {
            std::cmp::Ordering::Greater => Some((from, self.target - 1)),
            std::cmp::Ordering::Less => Some((self.target, from.min(self.end) - 1)).filter(|(a, b)| a <= b),
            std::cmp::Ordering::Equal => None,
        }
    }
}

/// Why a partition cannot be planned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("{topic}/{partition}: the broker gave no log start or end offset")]
    OffsetsUnknown { topic: String, partition: i32 },
    #[error("{topic}/{partition}: the group has no committed offset to shift from")]
    NothingToShift { topic: String, partition: i32 },
}

/// The plan of one partition.
pub fn plan_partition(state: &PartitionState, to: ResetTo) -> Result<PartitionPlan, PlanError> {
    let (Some(start), Some(end)) = (state.log_start, state.end) else {
        return Err(PlanError::OffsetsUnknown {
            topic: state.topic.clone(),
            partition: state.partition,
        });
    };
    let end = end.max(start);
    let wanted = match to {
        ResetTo::Offset(o) => o,
        ResetTo::Earliest => start,
        ResetTo::Latest => end,
        ResetTo::ShiftBy(n) => state
            .committed
            .ok_or_else(|| PlanError::NothingToShift {
                topic: state.topic.clone(),
                partition: state.partition,
            })?
            .saturating_add(n),
        ResetTo::Time(_) => state.offset_for_time.unwrap_or(end),
    };
    let target = wanted.clamp(start, end);
    let mut note = match to {
        ResetTo::Time(_) if state.offset_for_time.is_none() => Some("no record is that recent: the log end".into()),
        _ if wanted < start => Some(format!("{wanted} is below the log start: clamped to {start}")),
        _ if wanted > end => Some(format!("{wanted} is past the log end: clamped to {end}")),
        _ => None,
    };
    let (mut skip, mut reread, mut already_expired) = (0, 0, 0);
    if let Some(c) = state.committed {
        // What retention deleted before the group read it is gone either way.
        let from = c.clamp(start, end);
        already_expired = start.saturating_sub(c).max(0) as u64;
        if target > from {
            skip = (target - from) as u64;
        } else if c > end && target < c {
            // The group read up to `c`, past the end the broker reports: an
            // end under-reported (tansu's memory engine), or a log truncated
            // under it. Which is unknown, so the most that may be read again
            // is said, never 0 for a move backwards.
            reread = (c - target) as u64;
            let least = (end - target).max(0);
            let past = format!(
                "committed {c} is past the log end {end} the broker reports (an end under-reported, or a log truncated): {least} to {reread} offsets are read again"
            );
            note = Some(match note {
                Some(n) => format!("{n}; {past}"),
                None => past,
            });
        } else {
            reread = (c.min(end) - target).max(0) as u64;
        }
    }
    Ok(PartitionPlan {
        topic: state.topic.clone(),
        partition: state.partition,
        committed: state.committed,
        target,
        log_start: start,
        end,
        skip,
        reread,
        already_expired,
        first_time_ms: None,
        last_time_ms: None,
        note,
    })
}

/// A group's reset, planned: what `--execute` would commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResetPlan {
    pub cluster: String,
    pub group: String,
    pub to: ResetTo,
    pub partitions: Vec<PartitionPlan>,
    /// Partitions that could not be planned, and why.
    pub unplanned: Vec<String>,
    /// Members of the group: a reset is refused while it has any.
    pub members: Vec<String>,
    /// The group's state as the coordinator named it.
    pub state: Option<String>,
    /// Why the coordinator did not describe the group: then whether it has
    /// live members is unknown, and the reset is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub describe_error: Option<String>,
    /// The broker knows no such group (not listed, nothing committed):
    /// executing creates it with these offsets.
    #[serde(default)]
    pub new_group: bool,
    pub skip: u64,
    pub reread: u64,
}

impl ResetPlan {
    pub fn new(cluster: &str, group: &str, to: ResetTo, states: &[PartitionState]) -> Self {
        let mut plan = ResetPlan {
            cluster: cluster.to_owned(),
            group: group.to_owned(),
            to,
            partitions: Vec::with_capacity(states.len()),
            unplanned: Vec::new(),
            members: Vec::new(),
            state: None,
            describe_error: None,
            new_group: false,
            skip: 0,
            reread: 0,
        };
        for s in states {
            match plan_partition(s, to) {
                Ok(p) => {
                    plan.skip = plan.skip.saturating_add(p.skip);
                    plan.reread = plan.reread.saturating_add(p.reread);
                    plan.partitions.push(p);
                }
                Err(e) => plan.unplanned.push(e.to_string()),
            }
        }
        plan
    }

    /// Why executing this plan is refused, if it is.
    pub fn refusal(&self) -> Option<String> {
        if !self.members.is_empty() {
            return Some(format!(
                "group {} has {} live member(s): {}; stop its consumers first (Kafka accepts a reset only of a group without members)",
                self.group,
                self.members.len(),
                self.members.join(", ")
            ));
        }
        if let Some(why) = &self.describe_error {
            return Some(format!(
                "whether group {} has live members is unknown ({why}): nothing is reset blind",
                self.group
            ));
        }
        if !self.unplanned.is_empty() {
            return Some(format!(
                "{} partition(s) could not be planned: {}",
                self.unplanned.len(),
                self.unplanned.join("; ")
            ));
        }
        if self.partitions.is_empty() {
            return Some(format!(
                "group {} has no committed offsets here and no topic was named: nothing to reset",
                self.group
            ));
        }
        None
    }

    /// The partitions that move, with the offsets they move to.
    pub fn moves(&self) -> impl Iterator<Item = &PartitionPlan> {
        self.partitions.iter().filter(|p| p.committed != Some(p.target))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_move_back_from_past_the_reported_end_never_reads_as_zero() {
        let p = plan_partition(&state(Some(10), 0, 1), ResetTo::Latest).unwrap();
        assert_eq!((p.target, p.skip, p.reread), (1, 0, 9));
        let note = p.note.unwrap();
        assert!(note.contains("past the log end 1") && note.contains("0 to 9"), "{note}");
        // Within the log, as before.
        let p = plan_partition(&state(Some(10), 0, 20), ResetTo::Offset(4)).unwrap();
        assert_eq!((p.reread, p.note), (6, None));
    }

    fn state(committed: Option<i64>, start: i64, end: i64) -> PartitionState {
        PartitionState {
            topic: "orders".into(),
            partition: 0,
            committed,
            log_start: Some(start),
            end: Some(end),
            offset_for_time: None,
        }
    }

    #[test]
    fn each_target_as_kafka_consumer_groups_clamps_it() {
        let s = state(Some(500), 100, 1_000);
        let p = plan_partition(&s, ResetTo::Latest).unwrap();
        assert_eq!((p.target, p.skip, p.reread), (1_000, 500, 0));
        let p = plan_partition(&s, ResetTo::Earliest).unwrap();
        assert_eq!((p.target, p.skip, p.reread), (100, 0, 400));
        let p = plan_partition(&s, ResetTo::ShiftBy(-50)).unwrap();
        assert_eq!((p.target, p.reread), (450, 50));
        let p = plan_partition(&s, ResetTo::Offset(5_000)).unwrap();
        assert_eq!(p.target, 1_000);
        assert!(p.note.unwrap().contains("clamped to 1000"));
        let p = plan_partition(&s, ResetTo::Offset(7)).unwrap();
        assert_eq!((p.target, p.reread), (100, 400));
        let mut timed = s.clone();
        timed.offset_for_time = Some(800);
        let p = plan_partition(&timed, ResetTo::Time(Millis(1))).unwrap();
        assert_eq!((p.target, p.skip), (800, 300));
        let p = plan_partition(&s, ResetTo::Time(Millis(1))).unwrap();
        assert_eq!(p.target, 1_000, "no record that recent: the end");
    }

    #[test]
    fn what_retention_took_is_not_counted_as_skipped() {
        // Committed 50, the log now starts at 100: 50 offsets were gone already.
        let p = plan_partition(&state(Some(50), 100, 1_000), ResetTo::Offset(300)).unwrap();
        assert_eq!((p.skip, p.already_expired, p.reread), (200, 50, 0));
        assert_eq!(p.span_offsets(), Some((100, 299)));
    }

    #[test]
    fn no_commit_moves_nothing_it_can_count_and_shift_needs_one() {
        let p = plan_partition(&state(None, 0, 10), ResetTo::Latest).unwrap();
        assert_eq!((p.skip, p.reread, p.span_offsets()), (0, 0, None));
        assert!(matches!(
            plan_partition(&state(None, 0, 10), ResetTo::ShiftBy(1)),
            Err(PlanError::NothingToShift { .. })
        ));
        let unknown = PartitionState {
            end: None,
            ..state(Some(1), 0, 10)
        };
        assert!(matches!(
            plan_partition(&unknown, ResetTo::Latest),
            Err(PlanError::OffsetsUnknown { .. })
        ));
    }

    #[test]
    fn a_plan_with_members_or_gaps_is_refused_saying_why() {
        let mut plan = ResetPlan::new("c", "g", ResetTo::Latest, &[state(Some(5), 0, 10)]);
        assert_eq!((plan.skip, plan.refusal()), (5, None));
        plan.members = vec!["consumer-1 (10.0.0.7)".into()];
        assert!(plan.refusal().unwrap().contains("consumer-1 (10.0.0.7)"));
        let gap = ResetPlan::new("c", "g", ResetTo::ShiftBy(1), &[state(None, 0, 10)]);
        assert!(gap.refusal().unwrap().contains("no committed offset"));
        assert!(ResetPlan::new("c", "g", ResetTo::Latest, &[]).refusal().is_some());
        let mut blind = ResetPlan::new("c", "g", ResetTo::Latest, &[state(Some(5), 0, 10)]);
        blind.describe_error = Some("DescribeGroups is not supported".into());
        assert!(
            blind
                .refusal()
                .unwrap()
                .contains("unknown (DescribeGroups is not supported)")
        );
    }

    proptest! {
        #[test]
        fn targets_stay_in_the_log_and_counts_add_up(
            start in 0i64..1_000,
            len in 0i64..1_000,
            committed in proptest::option::of(-10i64..3_000),
            wanted in -100i64..3_000,
            kind in 0u8..5,
            for_time in proptest::option::of(0i64..3_000),
        ) {
            let end = start + len;
            let to = match kind {
                0 => ResetTo::Offset(wanted),
                1 => ResetTo::Earliest,
                2 => ResetTo::Latest,
                3 => ResetTo::ShiftBy(wanted - 1_000),
                _ => ResetTo::Time(Millis(wanted)),
            };
            let s = PartitionState { offset_for_time: for_time, ..state(committed, start, end) };
            let Ok(p) = plan_partition(&s, to) else {
                prop_assert!(committed.is_none() && kind == 3);
                return Ok(());
            };
            prop_assert!((start..=end).contains(&p.target));
            prop_assert!(p.skip == 0 || p.reread == 0);
            if let Some(c) = committed {
                let from = c.clamp(start, end);
                if p.skip > 0 {
                    prop_assert_eq!(from + p.skip as i64, p.target);
                }
                if p.reread > 0 {
                    // From past the reported end: all it read, at most.
                    prop_assert_eq!(p.target + p.reread as i64, if c > end { c } else { c.min(end) });
                }
                prop_assert_eq!(p.already_expired, (start - c).max(0) as u64);
                if let Some((a, b)) = p.span_offsets() {
                    prop_assert!(a <= b && a >= start && b < end);
                    let in_log = if p.skip > 0 { p.skip as i64 } else { c.min(end) - p.target };
                    prop_assert_eq!(b - a + 1, in_log);
                }
            }
        }
    }
}
