//! Health rules for one group on one partition.
//!
//! Burrow's rules (linkedin/Burrow `core/internal/evaluator/caching.go`) as Burrow
//! applies them since its issues 290 and 303, in order of severity, while the
//! group lags now (by more than `allowed_lag`): stop first, whatever the window
//! held before; then a rewind the group has not recovered from; then, when the lag
//! was above `allowed_lag` at every commit in the window, stall and warn. Where
//! streamsight departs from Burrow (docs/engine.md, "Health"):
//! - no lag data, or lag 0 with no fresh confirmation of the end offset: `stale`,
//!   never `ok`;
//! - a committed offset below the log start is `data_loss`, worse than any lag;
//! - `stop` waits for the group's own cadence ([`stop_after_ms`]: three of its
//!   median commit intervals, at most the window's span, which is Burrow's wait,
//!   at least `stop_grace`), and needs the oldest unread record to be older than
//!   that too: a record that just arrived on an idle topic is not a stopped group
//!   (Burrow's issue 303, which Burrow answers with its recent broker offsets);
//! - every rewind in the window must be recovered from, not only the first;
//! - `warn` needs the lag to have grown over the window and the oldest unread
//!   record to be older than the group's usual commit interval: a group keeping
//!   pace at a constant small lag, or whose lag one commit interval explains, is
//!   not falling behind;
//! - `stall` and `warn` need at least two commits to compare.

use crate::model::Status;
use crate::time::Millis;
use crate::window::{CommitWindow, WINDOW};

/// What the rules read, computed by the engine.
#[derive(Copy, Clone, Debug)]
pub struct HealthInput<'a> {
    pub window: &'a CommitWindow,
    pub now: Millis,
    /// Current lag; `None` when unknown.
    pub lag_messages: Option<i64>,
    pub lag_seconds: Option<f64>,
    pub below_log_start: bool,
    /// Milliseconds since any source confirmed the end offset.
    pub end_age_ms: Option<i64>,
    /// The committed offset is the last stable offset, held by a transaction
    /// open for longer than `open_transaction_after`.
    pub at_open_transaction: bool,
}

#[derive(Copy, Clone, Debug)]
pub struct HealthParams {
    pub stale_after_ms: i64,
    pub stop_grace_ms: i64,
    /// Lag at or below this counts as caught up (Burrow's `allowed-lag`).
    pub allowed_lag: i64,
}

/// How many of its median commit intervals a lagging group may stay silent
/// before it is a stop.
pub const STOP_AFTER_INTERVALS: i64 = 3;

pub fn partition_status(input: &HealthInput<'_>, params: &HealthParams) -> Status {
    let (Some(lag), Some(last), Some(end_age)) = (input.lag_messages, input.window.last(), input.end_age_ms) else {
        return Status::Stale;
    };
    if input.below_log_start {
        return Status::DataLoss;
    }
    let end_stale = end_age > params.stale_after_ms;
    if lag <= params.allowed_lag {
        return if end_stale { Status::Stale } else { Status::Ok };
    }
    if end_stale && input.now.since(last.at) > params.stale_after_ms {
        return Status::Stale;
    }
    if input.at_open_transaction {
        return Status::Blocked;
    }
    window_status(input, params)
}

/// The group's usual time between commits: the median of the window's intervals;
/// `None` with fewer than two commits.
pub fn commit_interval_ms(window: &CommitWindow) -> Option<i64> {
    let n = window.len();
    if n < 2 {
        return None;
    }
    let mut gaps = [0i64; WINDOW];
    for (i, gap) in gaps.iter_mut().enumerate().take(n - 1) {
        *gap = window.get(i + 1).at.since(window.get(i).at);
    }
    let gaps = &mut gaps[..n - 1];
    let middle = gaps.len() / 2;
    Some(*gaps.select_nth_unstable(middle).1)
}

/// How long a lagging group may go without a commit before it is a stop:
/// [`STOP_AFTER_INTERVALS`] of its median commit intervals, never longer than the
/// window's span (Burrow's wait, which a group committing every 5 minutes fills
/// only after 45), never shorter than `stop_grace`.
pub fn stop_after_ms(window: &CommitWindow, stop_grace_ms: i64) -> i64 {
    let (Some(first), Some(last), Some(interval)) = (window.first(), window.last(), commit_interval_ms(window)) else {
        return stop_grace_ms;
    };
    interval
        .saturating_mul(STOP_AFTER_INTERVALS)
        .min(last.at.since(first.at))
        .max(stop_grace_ms)
}

/// Whether an offset went back and the group has not since committed at or past
/// where it was before (Burrow's rule 2, applied to every rewind in the window).
pub fn unrecovered_rewind(window: &CommitWindow) -> Option<(i64, i64, Millis)> {
    let n = window.len();
    (1..n).rev().find_map(|i| {
        let (before, back) = (window.get(i - 1), window.get(i));
        let recovered = (i..n).any(|j| window.get(j).offset >= before.offset);
        (back.offset < before.offset && !recovered).then_some((before.offset, back.offset, back.at))
    })
}

fn window_status(input: &HealthInput<'_>, params: &HealthParams) -> Status {
    let w = input.window;
    let n = w.len();
    let Some(last) = w.last() else {
        return Status::Stale;
    };
    let unread_for_ms = input.lag_seconds.map_or(f64::INFINITY, |s| s * 1000.0);
    let silent_for = input.now.since(last.at);
    // The wait is never shorter than the grace: most partitions are decided
    // without computing it.
    if silent_for > params.stop_grace_ms {
        let stop_after = stop_after_ms(w, params.stop_grace_ms);
        if silent_for > stop_after && unread_for_ms > stop_after as f64 {
            return Status::Stop;
        }
    }
    if unrecovered_rewind(w).is_some() {
        return Status::Rewind;
    }
    // Burrow's rule 1: a commit that left no lag (beyond the allowed) says the
    // group kept up within the window.
    if w.iter().any(|c| i64::from(c.lag) <= params.allowed_lag) || n < 2 {
        return Status::Ok;
    }
    let pairs = || (1..n).map(|i| (w.get(i - 1), w.get(i)));
    if pairs().all(|(a, b)| a.offset == b.offset) {
        return Status::Stall;
    }
    let first = w.get(0);
    if last.lag > first.lag
        && pairs().all(|(a, b)| b.lag >= a.lag)
        && unread_for_ms > commit_interval_ms(w).unwrap_or(0) as f64
    {
        return Status::Warn;
    }
    Status::Ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::Commit;

    const PARAMS: HealthParams = HealthParams {
        stale_after_ms: 300_000,
        stop_grace_ms: 60_000,
        allowed_lag: 0,
    };

    fn window(commits: &[(i64, i64, u32)]) -> CommitWindow {
        let mut w = CommitWindow::default();
        for &(offset, at, lag) in commits {
            w.record(
                Commit {
                    offset,
                    at: Millis(at),
                    lag,
                },
                0,
            );
        }
        w
    }

    fn status(w: &CommitWindow, now: i64, lag: i64, lag_seconds: f64) -> Status {
        partition_status(
            &HealthInput {
                window: w,
                now: Millis(now),
                lag_messages: Some(lag),
                lag_seconds: Some(lag_seconds),
                below_log_start: false,
                end_age_ms: Some(0),
                at_open_transaction: false,
            },
            &PARAMS,
        )
    }

    #[test]
    fn caught_up_is_ok() {
        let w = window(&[(10, 0, 5), (20, 5_000, 0)]);
        assert_eq!(status(&w, 6_000, 0, 0.0), Status::Ok);
    }

    #[test]
    fn a_zero_lag_commit_in_the_window_is_ok() {
        let w = window(&[(10, 0, 0), (20, 5_000, 3)]);
        assert_eq!(status(&w, 6_000, 3, 1.0), Status::Ok);
    }

    #[test]
    fn same_offset_while_lagging_is_stall() {
        let w = window(&[(500, 0, 501), (500, 5_000, 501), (500, 10_000, 501)]);
        assert_eq!(status(&w, 11_000, 501, 60.0), Status::Stall);
    }

    #[test]
    fn growing_lag_is_warn() {
        let w = window(&[(100, 0, 10), (110, 5_000, 20), (120, 10_000, 30)]);
        assert_eq!(status(&w, 11_000, 30, 8.0), Status::Warn);
    }

    #[test]
    fn keeping_pace_at_a_small_lag_is_not_warn() {
        // The same lag at every commit while offsets advance: keeping pace.
        let w = window(&[(100, 0, 1), (110, 5_000, 1), (120, 10_000, 1)]);
        assert_eq!(status(&w, 11_000, 1, 0.0), Status::Ok);
        // Lag growing in messages that one commit interval explains.
        let w = window(&[(100, 0, 1), (110, 5_000, 2), (120, 10_000, 3)]);
        assert_eq!(status(&w, 11_000, 3, 0.4), Status::Ok);
    }

    #[test]
    fn a_consumer_that_dies_right_after_a_commit_at_lag_0_is_a_stop() {
        // Commits every 5 s at lag 0, then nothing while the producer goes on.
        let commits: Vec<_> = (0..10).map(|i| (i * 50, i * 5_000, 0)).collect();
        let w = window(&commits);
        let last = 45_000;
        // Within stop_grace: not yet.
        assert_eq!(status(&w, last + 59_000, 600, 59.0), Status::Ok);
        assert_eq!(status(&w, last + 61_000, 610, 61.0), Status::Stop);
        // Records that arrived only 30 s ago are not yet a stop, however long the silence.
        assert_eq!(status(&w, last + 600_000, 30, 30.0), Status::Ok);
    }

    #[test]
    fn a_slow_committer_stops_after_three_of_its_intervals_not_the_windows_span() {
        // Every 5 minutes for 45 minutes, lagging a little at each commit.
        let commits: Vec<_> = (0..10).map(|i| (i * 100, i * 300_000, 5)).collect();
        let w = window(&commits);
        assert_eq!(stop_after_ms(&w, 60_000), 900_000);
        let last = 2_700_000;
        assert_eq!(status(&w, last + 899_000, 50, 1_000.0), Status::Ok);
        assert_eq!(status(&w, last + 901_000, 50, 1_000.0), Status::Stop);
    }

    #[test]
    fn the_wait_is_never_longer_than_the_windows_span_nor_shorter_than_the_grace() {
        // Two commits 5 s apart: three intervals would be 15 s, the span is 5 s,
        // and the grace is 60 s.
        let w = window(&[(100, 0, 1), (110, 5_000, 1)]);
        assert_eq!(stop_after_ms(&w, 60_000), 60_000);
        assert_eq!(stop_after_ms(&w, 1_000), 5_000);
        assert_eq!(stop_after_ms(&CommitWindow::default(), 60_000), 60_000);
    }

    #[test]
    fn a_recovered_rewind_is_not_held_against_the_group() {
        let w = window(&[
            (1_000, 0, 100),
            (3_000, 100_000, 200),
            (2_000, 200_000, 1_250),
            (4_000, 300_000, 300),
        ]);
        assert_eq!(status(&w, 310_000, 300, 20.0), Status::Ok);
        // A second rewind, not recovered from, is.
        let w = window(&[
            (1_000, 0, 100),
            (3_000, 100_000, 200),
            (2_000, 200_000, 1_250),
            (4_000, 300_000, 300),
            (3_500, 310_000, 900),
        ]);
        assert_eq!(status(&w, 311_000, 900, 20.0), Status::Rewind);
        assert_eq!(unrecovered_rewind(&w), Some((4_000, 3_500, Millis(310_000))));
    }

    #[test]
    fn lag_within_the_allowed_lag_is_caught_up() {
        let w = window(&[(1_000, 0, 2), (2_000, 100_000, 1), (2_000, 200_000, 1)]);
        let input = HealthInput {
            window: &w,
            now: Millis(450_000),
            lag_messages: Some(1),
            lag_seconds: Some(350.0),
            below_log_start: false,
            end_age_ms: Some(0),
            at_open_transaction: false,
        };
        assert_eq!(partition_status(&input, &PARAMS), Status::Stop);
        let allowed = HealthParams {
            allowed_lag: 1,
            ..PARAMS
        };
        assert_eq!(partition_status(&input, &allowed), Status::Ok);
    }

    #[test]
    fn waiting_at_an_open_transaction_is_blocked_not_stalled() {
        let w = window(&[(500, 0, 20), (500, 100_000, 40), (500, 200_000, 60)]);
        let mut input = HealthInput {
            window: &w,
            now: Millis(201_000),
            lag_messages: Some(60),
            lag_seconds: Some(150.0),
            below_log_start: false,
            end_age_ms: Some(0),
            at_open_transaction: false,
        };
        assert_eq!(partition_status(&input, &PARAMS), Status::Stall);
        input.at_open_transaction = true;
        assert_eq!(partition_status(&input, &PARAMS), Status::Blocked);
    }

    proptest::proptest! {
        /// Whatever the commits, a group whose oldest unread record is younger than
        /// `stop_grace` is never a stop, and the wait lies between the grace and
        /// the larger of the grace and the window's span.
        #[test]
        fn the_stop_wait_is_bounded(
            gaps in proptest::collection::vec(1_000i64..600_000, 0..12),
            lags in proptest::collection::vec(0u32..1_000, 12),
            silence in 0i64..10_000_000,
            unread_ms in 0i64..60_000,
        ) {
            let mut at = 0;
            let mut commits = vec![(0, 0, lags[0])];
            for (i, gap) in gaps.iter().enumerate() {
                at += gap;
                commits.push((i as i64 * 10, at, lags[i % lags.len()]));
            }
            let w = window(&commits);
            let wait = stop_after_ms(&w, PARAMS.stop_grace_ms);
            let span = w.last().unwrap().at.since(w.first().unwrap().at);
            proptest::prop_assert!(wait >= PARAMS.stop_grace_ms);
            proptest::prop_assert!(wait <= PARAMS.stop_grace_ms.max(span));
            let s = status(&w, at + silence, 5, unread_ms as f64 / 1000.0);
            proptest::prop_assert_ne!(s, Status::Stop);
        }
    }

    #[test]
    fn shrinking_lag_is_ok() {
        let w = window(&[(100, 0, 30), (110, 5_000, 20), (120, 10_000, 25)]);
        assert_eq!(status(&w, 11_000, 25, 5.0), Status::Ok);
    }

    #[test]
    fn going_backwards_is_rewind() {
        let w = window(&[(100, 0, 10), (50, 5_000, 60)]);
        assert_eq!(status(&w, 6_000, 60, 30.0), Status::Rewind);
    }

    #[test]
    fn silence_while_lagging_is_stop() {
        let w = window(&[(100, 0, 10), (110, 5_000, 10)]);
        assert_eq!(status(&w, 70_000, 10, 120.0), Status::Stop);
    }

    #[test]
    fn a_record_that_just_arrived_on_an_idle_topic_is_not_stop() {
        // The group last committed an hour ago, caught up; one record arrived since.
        let w = window(&[(100, 0, 0), (100, 1_000, 0)]);
        assert_eq!(status(&w, 3_600_000, 1, 0.5), Status::Ok);
        // Even with lag at every commit, a fresh record is not a stopped group.
        let w = window(&[(100, 0, 2), (101, 1_000, 1)]);
        assert_eq!(status(&w, 3_600_000, 1, 0.5), Status::Ok);
    }

    #[test]
    fn unknown_lag_is_stale() {
        let w = window(&[(100, 0, 1)]);
        let input = HealthInput {
            window: &w,
            now: Millis(1),
            lag_messages: None,
            lag_seconds: None,
            below_log_start: false,
            end_age_ms: None,
            at_open_transaction: false,
        };
        assert_eq!(partition_status(&input, &PARAMS), Status::Stale);
    }

    #[test]
    fn zero_lag_without_fresh_end_offset_is_stale() {
        let w = window(&[(100, 0, 0)]);
        let input = HealthInput {
            window: &w,
            now: Millis(400_000),
            lag_messages: Some(0),
            lag_seconds: Some(0.0),
            below_log_start: false,
            end_age_ms: Some(400_000),
            at_open_transaction: false,
        };
        assert_eq!(partition_status(&input, &PARAMS), Status::Stale);
    }

    #[test]
    fn below_log_start_is_data_loss() {
        let w = window(&[(100, 0, 0)]);
        let input = HealthInput {
            window: &w,
            now: Millis(1),
            lag_messages: Some(0),
            lag_seconds: Some(0.0),
            below_log_start: true,
            end_age_ms: Some(0),
            at_open_transaction: false,
        };
        assert_eq!(partition_status(&input, &PARAMS), Status::DataLoss);
    }
}
