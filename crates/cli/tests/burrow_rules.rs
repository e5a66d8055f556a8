//! Burrow's own evaluator test table (linkedin/Burrow
//! `core/internal/evaluator/caching_test.go`, `TestCachingEvaluator_CheckRules`,
//! cases 0-15), every case replayed through `streamsight replay` as events: the
//! same verdict as Burrow's, or a better one docs/engine.md ("Health") justifies.
//!
//! How a case becomes a scenario: each commit of the table at its timestamp, the
//! end offset the table implies at it (offset + lag) answered by a broker just
//! before it (Burrow's lags are against the broker's offsets), and the current end offset (the last commit's offset plus the table's
//! `currentLag`) answered by a broker at `timeNow`, where the state is sampled.
//! No end offset is ever reported above the current one (the table's lags and its
//! current lag disagree in cases 8 and 15), and a commit Burrow holds no lag for
//! (`Lag: nil`, case 11) gets no report before it.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

use std::fmt::Write;
use streamsight::replay::{self, Format, ReplayOptions, Row};
use streamsight_core::{Engine, EngineConfig, Status};

struct Case {
    /// (offset, timestamp in ms, lag at the commit; `None` for Burrow's `nil`)
    commits: &'static [(i64, i64, Option<i64>)],
    current_lag: i64,
    /// Burrow's `timeNow`, in seconds.
    now_s: i64,
    allowed_lag: u32,
    burrow: Status,
}

const fn c(offset: i64, at_ms: i64, lag: i64) -> (i64, i64, Option<i64>) {
    (offset, at_ms, Some(lag))
}

const RISING: &[(i64, i64, Option<i64>)] = &[
    c(1000, 100_000, 0),
    c(2000, 200_000, 50),
    c(3000, 300_000, 100),
    c(4000, 400_000, 150),
    c(5000, 500_000, 200),
];
const RISING_NEVER_ZERO: &[(i64, i64, Option<i64>)] = &[
    c(1000, 100_000, 50),
    c(2000, 200_000, 100),
    c(3000, 300_000, 150),
    c(4000, 400_000, 200),
    c(5000, 500_000, 250),
];
const STALLED_NEVER_ZERO: &[(i64, i64, Option<i64>)] = &[
    c(1000, 100_000, 100),
    c(1000, 200_000, 150),
    c(1000, 300_000, 200),
    c(1000, 400_000, 250),
    c(1000, 500_000, 300),
];
const REWIND_RECOVERED: &[(i64, i64, Option<i64>)] = &[
    c(1000, 100_000, 100),
    c(2000, 200_000, 150),
    c(3000, 300_000, 200),
    c(2000, 400_000, 1250),
    c(4000, 500_000, 300),
];
/// Cases 9 and 10: a group committing every second at lag 0.
const EVERY_SECOND_AT_ZERO: &[(i64, i64, Option<i64>)] = &[
    c(792748079, 1512224618356, 0),
    c(792748080, 1512224619362, 0),
    c(792748081, 1512224620366, 0),
    c(792748082, 1512224621367, 0),
    c(792748083, 1512224622370, 0),
    c(792748084, 1512224623373, 0),
    c(792748085, 1512224624378, 0),
    c(792748086, 1512224625379, 0),
    c(792748087, 1512224626383, 0),
    c(792748088, 1512224627383, 0),
    c(792748089, 1512224628383, 0),
    c(792748090, 1512224629388, 0),
    c(792748091, 1512224630391, 0),
    c(792748092, 1512224631394, 0),
    c(792748093, 1512224632397, 0),
];

const STALLED_FROM_ZERO: &[(i64, i64, Option<i64>)] = &[
    c(1000, 100_000, 0),
    c(1000, 200_000, 50),
    c(1000, 300_000, 100),
    c(1000, 400_000, 150),
    c(1000, 500_000, 200),
];
const STALLED_AT_A_CONSTANT_LAG: &[(i64, i64, Option<i64>)] = &[
    c(1000, 100_000, 100),
    c(1000, 200_000, 100),
    c(1000, 300_000, 100),
    c(1000, 400_000, 100),
    c(1000, 500_000, 100),
];
const RISING_WITH_UNKNOWN_LAGS: &[(i64, i64, Option<i64>)] = &[
    c(1000, 100_000, 0),
    (1500, 150_000, None),
    c(2000, 200_000, 50),
    (2500, 250_000, None),
    c(3000, 300_000, 100),
    (3500, 350_000, None),
    c(4000, 400_000, 150),
    (4500, 450_000, None),
    c(5000, 500_000, 200),
    (5500, 550_000, None),
];
const REWIND_NOT_RECOVERED: &[(i64, i64, Option<i64>)] = &[
    c(1000, 100_000, 100),
    c(2000, 200_000, 150),
    c(3000, 300_000, 200),
    c(2000, 400_000, 1250),
    c(2500, 500_000, 300),
];
const A_LAG_OF_ONE: &[(i64, i64, Option<i64>)] = &[c(1000, 100_000, 2), c(2000, 200_000, 1), c(2000, 300_000, 1)];

fn cases() -> Vec<Case> {
    let case = |commits, current_lag, now_s, allowed_lag, burrow| Case {
        commits,
        current_lag,
        now_s,
        allowed_lag,
        burrow,
    };
    vec![
        case(RISING, 200, 600, 0, Status::Ok),
        case(RISING, 200, 900, 0, Status::Ok),
        case(RISING, 200, 1000, 0, Status::Stop),
        case(RISING_NEVER_ZERO, 250, 1000, 0, Status::Stop),
        case(STALLED_FROM_ZERO, 200, 600, 0, Status::Ok),
        case(STALLED_NEVER_ZERO, 300, 600, 0, Status::Stall),
        case(STALLED_AT_A_CONSTANT_LAG, 100, 600, 0, Status::Stall),
        case(REWIND_RECOVERED, 300, 600, 0, Status::Ok),
        case(RISING_NEVER_ZERO, 0, 1000, 0, Status::Ok),
        case(EVERY_SECOND_AT_ZERO, 931, 1512224650, 0, Status::Stop),
        case(EVERY_SECOND_AT_ZERO, 1, 1512224650, 0, Status::Ok),
        case(RISING_WITH_UNKNOWN_LAGS, 200, 600, 0, Status::Ok),
        case(A_LAG_OF_ONE, 1, 550, 1, Status::Ok),
        case(STALLED_NEVER_ZERO, 300, 600, 99, Status::Stall),
        case(REWIND_RECOVERED, 300, 600, 99, Status::Ok),
        case(REWIND_NOT_RECOVERED, 300, 600, 0, Status::Rewind),
    ]
}

/// The case as a scenario, sampled at `timeNow` and at each of `later_s` after it.
fn scenario(case: &Case, later_s: &[i64]) -> String {
    let last = case.commits.last().unwrap().0;
    let current_end = last + case.current_lag;
    let mut out = String::new();
    let mut end = 0;
    let line = |out: &mut String, at_ms: i64, event: &str| {
        writeln!(out, r#"{{"at":{},{event}}}"#, at_ms as f64 / 1000.0).unwrap();
    };
    for &(offset, at_ms, lag) in case.commits {
        if let Some(lag) = lag {
            let at_commit = (offset + lag).min(current_end);
            if at_commit > end {
                end = at_commit;
                let event = format!(r#""event":"high_watermark","topic":"t","partition":0,"offset":{end}"#);
                line(&mut out, at_ms, &event);
            }
        }
        let event = format!(r#""event":"commit","group":"g","topic":"t","partition":0,"offset":{offset}"#);
        line(&mut out, at_ms, &event);
    }
    let now_ms = case.now_s * 1000;
    for t in std::iter::once(0).chain(later_s.iter().copied()) {
        let event = format!(r#""event":"high_watermark","topic":"t","partition":0,"offset":{current_end}"#);
        line(&mut out, now_ms + t * 1000, &event);
        line(&mut out, now_ms + t * 1000, r#""event":"sample""#);
    }
    out
}

/// The status at `timeNow` and at each of `later_s` seconds after it.
fn replayed(case: &Case, later_s: &[i64]) -> Vec<Status> {
    let mut engine = Engine::new(EngineConfig {
        allowed_lag: case.allowed_lag,
        ..EngineConfig::default()
    })
    .unwrap();
    let input = scenario(case, later_s);
    let mut out = Vec::new();
    let options = ReplayOptions {
        sample_every_ms: None,
        format: Format::Json,
        events: false,
    };
    replay::run(&mut engine, input.as_bytes(), &mut out, &options).unwrap();
    let rows: Vec<Row> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1 + later_s.len(), "{input}");
    rows.iter().map(|r| r.report.status).collect()
}

#[test]
fn every_case_of_burrows_table_gets_burrows_verdict_or_a_justified_better_one() {
    let cases = cases();
    assert_eq!(cases.len(), 16);
    for (i, case) in cases.iter().enumerate() {
        let got = replayed(case, &[])[0];
        let expected = match i {
            // Silent for 400 s, four of its 100 s commit intervals, while 200
            // records wait since about 481 s (7 minutes): streamsight's wait is three
            // intervals (300 s), Burrow's the window's span (400 s, not exceeded).
            1 => Status::Stop,
            // 17.6 s without a commit is within `stop_grace` (60 s): streamsight
            // never calls a stop on less. It is a stop once the grace is over
            // (asserted below).
            9 => Status::Ok,
            _ => case.burrow,
        };
        assert_eq!(got, expected, "case {i}: Burrow says {:?}", case.burrow);
    }
}

#[test]
fn burrows_dead_consumer_after_a_commit_at_lag_0_is_a_stop_once_the_grace_is_over() {
    let cases = cases();
    // Case 9: the group committed every second at lag 0, then stopped at
    // 1512224632.397 while the producer wrote 931 records.
    let statuses = replayed(&cases[9], &[10, 42, 44, 600]);
    assert_eq!(
        statuses,
        [Status::Ok, Status::Ok, Status::Ok, Status::Stop, Status::Stop],
        "silence 17.6 s, 27.6 s, 59.6 s, 61.6 s, 617.6 s"
    );
    // Case 10: the same group with one record unread, written at most 17.6 s
    // before `timeNow`: ok while the grace lasts, a stop once that record has
    // waited longer than the grace as well.
    let statuses = replayed(&cases[10], &[42, 100]);
    assert_eq!(statuses, [Status::Ok, Status::Ok, Status::Stop]);
}
