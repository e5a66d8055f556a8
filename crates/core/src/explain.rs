//! Health in words: why a group-partition has its status, as a person on call
//! would say it ("committed offset unchanged for 4 m while 501 messages wait").
//! The dashboard and alerts show these; the status itself is decided in
//! [`crate::health`], and the words only ever describe what the report says.

use crate::model::{LagReport, Status};
use crate::time::Millis;
use crate::window::CommitWindow;
use std::fmt::Write;

/// A duration in ms, the way the dashboard prints it: "45 s", "2 m 40 s", "4 m",
/// "2 h 5 m", "3 d 4 h".
pub fn duration(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..60 => format!("{s} s"),
        60..3_600 => match s % 60 {
            0 => format!("{} m", s / 60),
            rest => format!("{} m {rest} s", s / 60),
        },
        3_600..86_400 => match (s % 3_600) / 60 {
            0 => format!("{} h", s / 3_600),
            m => format!("{} h {m} m", s / 3_600),
        },
        _ => match (s % 86_400) / 3_600 {
            0 => format!("{} d", s / 86_400),
            h => format!("{} d {h} h", s / 86_400),
        },
    }
}

/// A time as people read it in a terminal: ISO-8601 UTC and how long ago
/// ("2026-12-07T05:04:39Z, 3 m ago"; "…, in 2 m" for one to come).
pub fn at_ago(at: Millis, now: Millis) -> String {
    if at.0 > now.0 {
        format!("{}, in {}", at.iso(), duration(at.0 - now.0))
    } else {
        format!("{}, {} ago", at.iso(), duration(now.0 - at.0))
    }
}

/// Lag seconds as words: "unknown", "≥ 4 m" for a lower bound.
pub fn lag_seconds(report: &LagReport) -> String {
    match report.lag_seconds {
        None => "unknown".to_owned(),
        Some(s) if report.lag_seconds_lower_bound => format!("≥ {}", duration((s * 1000.0) as i64)),
        Some(s) => duration((s * 1000.0) as i64),
    }
}

fn messages(n: i64) -> String {
    if n == 1 {
        "1 message".to_owned()
    } else {
        format!("{n} messages")
    }
}

/// Why `report` (with the commits it was computed from) has its status at `now`;
/// `stop_grace_ms` is the engine's, from which a stop's wait is said.
pub fn reason(report: &LagReport, window: &CommitWindow, now: Millis, stop_grace_ms: i64) -> String {
    let mut out = status_reason(report, window, now, stop_grace_ms);
    if let (Some(since), Some(held), false) = (
        report.open_transaction_since,
        report.last_stable_offset,
        report.status == Status::Blocked,
    ) {
        let _ = write!(
            out,
            "; an open transaction{} has held offset {held} for {}{}: read_committed consumers cannot pass it",
            report
                .open_transaction
                .as_ref()
                .map_or_else(String::new, |t| format!(" of {}", t.holder())),
            duration(now.since(since)),
            timeout(report, now),
        );
    }
    if report.producer_failing {
        out.push_str("; producers are failing, so the end offset and lag may read low");
    }
    out
}

/// How the transaction's timeout stands, where the coordinator said: the
/// coordinator aborts it then, and a transaction open past it is stuck.
fn timeout(report: &LagReport, now: Millis) -> String {
    match (&report.open_transaction, report.open_transaction_since) {
        (Some(t), Some(since)) => transaction_timeout(t, since, now),
        _ => String::new(),
    }
}

/// Who holds an open transaction (held since `since`) and how its timeout
/// stands, in words: `transactional id "tx" (producer 7, epoch 0) (open 5 m; ...)`.
pub fn open_transaction(t: &crate::model::OpenTransaction, since: Millis, now: Millis) -> String {
    format!("{}{}", t.holder(), transaction_timeout(t, since, now))
}

fn transaction_timeout(t: &crate::model::OpenTransaction, since: Millis, now: Millis) -> String {
    let open = now.since(since);
    match t.timeout_ms.map(i64::from) {
        Some(limit) if open > limit => format!(" (open {}, past its {} timeout)", duration(open), duration(limit)),
        Some(limit) => format!(
            " (open {}; its coordinator aborts it at its {} timeout)",
            duration(open),
            duration(limit)
        ),
        None => format!(" (open {})", duration(open)),
    }
}

fn status_reason(report: &LagReport, window: &CommitWindow, now: Millis, stop_grace_ms: i64) -> String {
    let lag = report.lag_messages;
    let waiting = || {
        let mut s = format!("while {} wait", messages(lag.unwrap_or(0)));
        if let Some(secs) = report.lag_seconds {
            let _ = write!(
                s,
                " (oldest {} old)",
                lag_seconds(&LagReport {
                    lag_seconds: Some(secs),
                    ..report.clone()
                })
            );
        }
        s
    };
    match report.status {
        Status::DataLoss => match (report.committed_offset, report.log_start_offset) {
            (Some(c), Some(s)) => format!(
                "retention deleted unread messages: committed offset {c} is below the log start {s} ({} lost so far)",
                report.data_loss_messages.max(s.saturating_sub(c))
            ),
            _ => "retention deleted unread messages".to_owned(),
        },
        Status::Stale => {
            if report.broker_unreachable {
                "the partition's leader did not answer the last poll: lag unconfirmed".to_owned()
            } else if report.committed_offset.is_none() {
                "lag unknown: no committed offset seen for this group".to_owned()
            } else if report.end_offset.is_none() {
                "lag unknown: no end offset seen (no producer report and no poll)".to_owned()
            } else if let Some(at) = report.end_offset_at {
                format!(
                    "lag unconfirmed: the end offset was last confirmed {} ago",
                    duration(now.since(at))
                )
            } else {
                "lag unconfirmed: no fresh end offset".to_owned()
            }
        }
        Status::Stop if report.no_members_since.is_some() => {
            let since = report.no_members_since.map_or(0, |t| now.since(t));
            let for_how_long = if since == 0 {
                String::new()
            } else {
                format!(" for {}", duration(since))
            };
            format!(
                "no live members: its coordinator describes the group with none{for_how_long}, so nothing reads the {} it is behind",
                messages(lag.unwrap_or(0))
            )
        }
        Status::Stop => {
            // A commit seen only as far back as the window reaches (made
            // before the collector started, say) is at least that old.
            let at_least = match unchanged_since(window) {
                Some((_, true)) => "at least ",
                _ => "",
            };
            let since = report.last_commit_at.map_or_else(
                || "a while".to_owned(),
                |t| format!("{at_least}{}", duration(now.since(t))),
            );
            let cadence = match crate::health::commit_interval_ms(window) {
                Some(every) => format!("it usually commits every {}, so ", duration(every)),
                None => String::new(),
            };
            format!(
                "no commit for {since} {}; {cadence}over {} without one is a stop",
                waiting(),
                duration(crate::health::stop_after_ms(window, stop_grace_ms))
            )
        }
        Status::Blocked => {
            let held = report.last_stable_offset.unwrap_or(-1);
            let since = report
                .open_transaction_since
                .map_or_else(|| "a while".to_owned(), |t| duration(now.since(t)));
            let who = report
                .open_transaction
                .as_ref()
                .map_or_else(|| "it".to_owned(), |t| t.holder());
            format!(
                "blocked by an open transaction: {who} has held offset {held} for {since}{}; \
                 read_committed consumers cannot pass it {}",
                timeout(report, now),
                waiting()
            )
        }
        Status::Stall => {
            let unchanged = match unchanged_since(window) {
                Some((t, true)) => format!("at least {}", duration(now.since(t))),
                Some((t, false)) => duration(now.since(t)),
                None => "a while".to_owned(),
            };
            format!(
                "committed offset {} unchanged for {unchanged} {}",
                report.committed_offset.unwrap_or(-1),
                waiting()
            )
        }
        Status::Rewind => match crate::health::unrecovered_rewind(window) {
            Some((before, back, at)) => format!(
                "committed offset went back from {before} to {back} {} ago and has not reached {before} again",
                duration(now.since(at))
            ),
            None => "committed offset went backwards".to_owned(),
        },
        Status::Warn => format!(
            "lag grew over the last {} commits, from {} to {}, and never decreased: {} behind, oldest unread {}",
            window.len(),
            window.first().map_or(0, |c| c.lag),
            window.last().map_or(0, |c| c.lag),
            messages(lag.unwrap_or(0)),
            lag_seconds(report)
        ),
        Status::Ok => match lag {
            Some(0) if report.at_control_marker => "caught up (only a transaction marker left)".to_owned(),
            Some(0) => "caught up".to_owned(),
            Some(n) => format!(
                "consuming: {} behind, oldest unread {}",
                messages(n),
                lag_seconds(report)
            ),
            None => "consuming".to_owned(),
        },
    }
}

/// When the committed offset last changed to its current value, and whether that
/// is only as far as the window reaches back (every commit in it is the same).
fn unchanged_since(window: &CommitWindow) -> Option<(Millis, bool)> {
    let last = window.last()?;
    let mut since = last.at;
    for c in (0..window.len()).rev().map(|i| window.get(i)) {
        if c.offset != last.offset {
            return Some((since, false));
        }
        since = c.at;
    }
    Some((since, true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::Commit;

    fn report(status: Status) -> LagReport {
        LagReport {
            committed_offset: Some(1_000),
            end_offset: Some(1_501),
            log_start_offset: Some(0),
            lag_messages: Some(501),
            lag_seconds: Some(245.0),
            lag_seconds_lower_bound: false,
            status,
            producer_failing: false,
            data_loss_messages: 0,
            at_control_marker: false,
            broker_unreachable: false,
            last_commit_at: Some(Millis(290_000)),
            end_offset_at: Some(Millis(299_000)),
            last_stable_offset: None,
            open_transaction_since: None,
            open_transaction: None,
            no_members_since: None,
        }
    }

    fn window(commits: &[(i64, i64)]) -> CommitWindow {
        let mut w = CommitWindow::default();
        for &(offset, at) in commits {
            w.record(
                Commit {
                    offset,
                    at: Millis(at),
                    lag: 1,
                },
                0,
            );
        }
        w
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(duration(45_000), "45 s");
        assert_eq!(duration(240_000), "4 m");
        assert_eq!(duration(160_000), "2 m 40 s");
        assert_eq!(duration(7_500_000), "2 h 5 m");
        assert_eq!(duration(7_200_000), "2 h");
        assert_eq!(duration(273_600_000), "3 d 4 h");
        assert_eq!(duration(-5), "0 s");
    }

    #[test]
    fn times_read_as_iso_utc_with_their_age() {
        let at = Millis(1_796_620_010_809);
        assert_eq!(at.iso(), "2026-12-07T05:06:50Z");
        assert_eq!(at_ago(at, Millis(at.0 + 208_000)), "2026-12-07T05:06:50Z, 3 m 28 s ago");
        assert_eq!(at_ago(at, Millis(at.0 - 120_000)), "2026-12-07T05:06:50Z, in 2 m");
        assert_eq!(
            crate::reset::ResetTo::ShiftBy(-5).to_string(),
            "5 offset(s) back from the committed offset"
        );
        assert_eq!(
            crate::reset::ResetTo::Time(at).to_string(),
            "the first record at or after 2026-12-07T05:06:50Z"
        );
    }

    #[test]
    fn a_stall_says_for_how_long_the_offset_has_not_moved() {
        let w = window(&[(900, 10_000), (1_000, 50_000), (1_000, 170_000), (1_000, 290_000)]);
        assert_eq!(
            reason(&report(Status::Stall), &w, Millis(290_000), 60_000),
            "committed offset 1000 unchanged for 4 m while 501 messages wait (oldest 4 m 5 s old)"
        );
    }

    #[test]
    fn a_stall_older_than_the_window_is_at_least_the_window() {
        let w = window(&[(1_000, 50_000), (1_000, 170_000), (1_000, 290_000)]);
        assert!(
            reason(&report(Status::Stall), &w, Millis(290_000), 60_000)
                .starts_with("committed offset 1000 unchanged for at least 4 m while")
        );
    }

    #[test]
    fn a_stop_whose_commit_was_only_ever_seen_once_is_at_least_that_old() {
        // One sighting, by the collector's first poll: the commit is older.
        let mut r = report(Status::Stop);
        r.last_commit_at = Some(Millis(10_000));
        let once = window(&[(1_000, 10_000)]);
        let said = reason(&r, &once, Millis(289_000), 60_000);
        assert!(said.starts_with("no commit for at least 4 m 39 s"), "{said}");
        // Seen moving to it: exact.
        let moved = window(&[(900, 5_000), (1_000, 10_000)]);
        let said = reason(&r, &moved, Millis(289_000), 60_000);
        assert!(said.starts_with("no commit for 4 m 39 s"), "{said}");
    }

    #[test]
    fn a_lower_bound_and_an_unknown_lag_never_read_as_a_number_of_seconds() {
        let mut r = report(Status::Ok);
        r.lag_seconds_lower_bound = true;
        assert_eq!(lag_seconds(&r), "≥ 4 m 5 s");
        r.lag_seconds = None;
        assert_eq!(lag_seconds(&r), "unknown");
        let mut stale = report(Status::Stale);
        stale.committed_offset = None;
        stale.lag_messages = None;
        assert_eq!(
            reason(&stale, &CommitWindow::default(), Millis(300_000), 60_000),
            "lag unknown: no committed offset seen for this group"
        );
    }

    #[test]
    fn every_status_has_words_and_a_failing_producer_is_always_said() {
        let w = window(&[(1_000, 100_000), (800, 200_000)]);
        for status in [
            Status::Ok,
            Status::Stale,
            Status::Blocked,
            Status::Warn,
            Status::Rewind,
            Status::Stall,
            Status::Stop,
            Status::DataLoss,
        ] {
            let mut r = report(status);
            r.producer_failing = true;
            let text = reason(&r, &w, Millis(300_000), 60_000);
            assert!(text.len() > 10, "{status:?}: {text}");
            assert!(text.ends_with("may read low"), "{status:?}: {text}");
        }
        assert!(
            reason(&report(Status::Rewind), &w, Millis(300_000), 60_000)
                .starts_with("committed offset went back from 1000 to 800")
        );
        assert_eq!(
            reason(&report(Status::Stop), &w, Millis(300_000), 300_000),
            "no commit for 10 s while 501 messages wait (oldest 4 m 5 s old); \
             it usually commits every 1 m 40 s, so over 5 m without one is a stop"
        );
    }
}
