//! The golden scenario (reference.md §2) from the shipped scenario files, replayed
//! as an honest client reports it and as dd-trace-java 1.8.0-1.67.1 reports it.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

use std::path::PathBuf;
use std::process::Command;
use streamsight::replay::{self, Format, ReplayOptions, Row};
use streamsight_core::{Engine, EngineConfig, RejectReason, Status};

fn scenario(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name)
}

fn replay_every_second(name: &str) -> (Vec<Row>, replay::ReplaySummary) {
    let mut engine = Engine::new(EngineConfig::default()).unwrap();
    let file = std::fs::File::open(scenario(name)).unwrap();
    let mut out = Vec::new();
    let options = ReplayOptions {
        sample_every_ms: Some(1000),
        format: Format::Json,
        events: false,
    };
    let summary = replay::run(&mut engine, std::io::BufReader::new(file), &mut out, &options).unwrap();
    let rows = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (rows, summary)
}

fn at(rows: &[Row], t: f64) -> &Row {
    let found: Vec<&Row> = rows.iter().filter(|r| r.at == t).collect();
    assert_eq!(found.len(), 1, "one row at t={t}: {found:?}");
    found[0]
}

fn assert_golden(rows: &[Row]) {
    for t in 110..=209 {
        let r = &at(rows, f64::from(t)).report;
        assert_eq!(r.lag_messages, Some(501), "t={t}");
        let expected = f64::from(t) - 50.0;
        let got = r.lag_seconds.expect("lag seconds known");
        assert!(
            (got - expected).abs() < 1e-6,
            "t={t}: lag {got} s, expected {expected} s"
        );
        assert!(!r.lag_seconds_lower_bound, "t={t}");
        assert_eq!(r.status, Status::Stall, "t={t}");
        assert!(r.producer_failing, "t={t}");
    }
    let after = &at(rows, 210.0).report;
    assert_eq!(after.lag_seconds, Some(160.0), "2 m 40 s right after the recovery");
    assert_eq!(after.lag_messages, Some(502));
    assert_eq!(after.status, Status::Stall);
    assert!(!after.producer_failing, "a successful send ends the failure");
    for row in rows {
        assert!(row.partition >= 0, "{row:?}");
        let r = &row.report;
        for v in [r.committed_offset, r.end_offset, r.lag_messages].into_iter().flatten() {
            assert!(v >= 0, "{r:?}");
        }
        assert!(r.lag_seconds.is_some_and(|s| s >= 0.0), "{r:?}");
    }
}

#[test]
fn golden_scenario_with_correct_client_data() {
    let (rows, summary) = replay_every_second("golden-correct.jsonl");
    assert_golden(&rows);
    assert_eq!(summary.stats.rejected.get(RejectReason::FailedSend), 100);
    assert_eq!(summary.stats.resets, 0);
}

#[test]
fn golden_scenario_as_a_buggy_tracer_sends_it() {
    let (rows, summary) = replay_every_second("golden-buggy.jsonl");
    assert_golden(&rows);
    let r = &summary.stats.rejected;
    assert_eq!(r.get(RejectReason::NegativePartition), 50);
    assert_eq!(r.get(RejectReason::InvalidOffsetSentinel), 50);
    assert_eq!(summary.stats.resets, 0, "a lower produce offset is never a reset");
}

#[test]
fn both_replays_agree_sample_for_sample() {
    let (correct, _) = replay_every_second("golden-correct.jsonl");
    let (buggy, _) = replay_every_second("golden-buggy.jsonl");
    assert_eq!(correct, buggy);
}

/// The README's replay: the consumer keeping up one record behind reads `ok`
/// from its first sample to the incident, never `warn`.
#[test]
fn the_readmes_replay_shows_the_keeping_up_consumer_ok_until_the_incident() {
    let out = Command::new(env!("CARGO_BIN_EXE_streamsight"))
        .args(["replay", "--sample-every", "10", "--format", "table"])
        .arg(scenario("golden-buggy.jsonl"))
        .output()
        .unwrap();
    let table = String::from_utf8(out.stdout).unwrap();
    let samples: Vec<&str> = table.split("at ").skip(1).take(6).collect();
    assert_eq!(samples.len(), 6, "{table}");
    for sample in samples {
        let row = sample.lines().nth(2).unwrap();
        assert!(row.trim_end().ends_with(" ok"), "{sample}");
    }
}

#[test]
fn the_binary_replays_and_reports_bad_lines() {
    let bin = env!("CARGO_BIN_EXE_streamsight");
    let out = Command::new(bin)
        .args(["replay", "--format", "table", "--sample-every", "50"])
        .arg(scenario("golden-buggy.jsonl"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("at 150.000 s"), "{table}");
    assert!(table.contains("501  100.0  stall producer_failing"), "{table}");
    assert!(!table.contains("-1"), "{table}");

    let dir = std::env::temp_dir().join(format!("streamsight-golden-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"at\":0,\"event\":\"sample\"}\n{\"at\":1,\"event\":\"produce\"}\n",
    )
    .unwrap();
    let out = Command::new(bin).arg("replay").arg(&bad).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2: missing field `topic`"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
