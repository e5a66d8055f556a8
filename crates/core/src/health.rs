//! Health rules for one group on one partition.
//!
//! Burrow's rules (linkedin/Burrow `core/internal/evaluator`), applied only when the
//! group lags now and lagged at every commit in the window, in order of severity:
//! rewind, stop, stall, warn. Where streamsight departs from Burrow:
//! - no lag data, or lag 0 with no fresh confirmation of the end offset: `stale`,
//!   never `ok`;
//! - a committed offset below the log start is `data_loss`, worse than any lag;
//! - `stop` needs the group to have been silent for longer than both its usual
//!   commit spacing and `stop_grace`, and the oldest unread record to be older
//!   than that: a record that just arrived on an idle topic is not a stopped group
//!   (Burrow's false STOP), and a window of one commit is not a rule;
//! - `stall` and `warn` need at least two commits to compare.

use crate::model::Status;
use crate::time::Millis;
use crate::window::CommitWindow;

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
}

#[derive(Copy, Clone, Debug)]
pub struct HealthParams {
    pub stale_after_ms: i64,
    pub stop_grace_ms: i64,
}

pub fn partition_status(input: &HealthInput<'_>, params: &HealthParams) -> Status {
    let (Some(lag), Some(last), Some(end_age)) = (input.lag_messages, input.window.last(), input.end_age_ms) else {
        return Status::Stale;
    };
    if input.below_log_start {
        return Status::DataLoss;
    }
    let end_stale = end_age > params.stale_after_ms;
    if lag == 0 {
        return if end_stale { Status::Stale } else { Status::Ok };
    }
    if end_stale && input.now.since(last.at) > params.stale_after_ms {
        return Status::Stale;
    }
    window_status(input, params)
}

fn window_status(input: &HealthInput<'_>, params: &HealthParams) -> Status {
    let w = input.window;
    let n = w.len();
    if n == 0 || !w.iter().all(|c| c.lag > 0) {
        return Status::Ok;
    }
    let pairs = || (1..n).map(|i| (w.get(i - 1), w.get(i)));
    if pairs().any(|(a, b)| b.offset < a.offset) {
        return Status::Rewind;
    }
    let (first, last) = (w.get(0), w.get(n - 1));
    let silent_for = input.now.since(last.at);
    let threshold = last.at.since(first.at).max(params.stop_grace_ms);
    let unread_for_ms = input.lag_seconds.map_or(f64::INFINITY, |s| s * 1000.0);
    if silent_for > threshold && unread_for_ms > threshold as f64 {
        return Status::Stop;
    }
    if n >= 2 && pairs().all(|(a, b)| a.offset == b.offset) {
        return Status::Stall;
    }
    if n >= 2 && pairs().all(|(a, b)| b.lag >= a.lag) {
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
        assert_eq!(status(&w, 11_000, 30, 5.0), Status::Warn);
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
        };
        assert_eq!(partition_status(&input, &PARAMS), Status::DataLoss);
    }
}
