//! Lag seconds against the truth: generated bursty scenarios (`streamsight::scenario`)
//! replayed through `replay` with each history compaction, every answer compared
//! with the exact acknowledgement time of the record the group reads next.
//!
//! `cargo test --release -p streamsight --test accuracy -- --nocapture` prints the
//! tables BENCHMARKS.md quotes; `STREAMSIGHT_ACCURACY_SEEDS` (default 1) and
//! `STREAMSIGHT_ACCURACY_JITTER` (default 0) change the run.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

use streamsight::replay::{self, Format, ReplayOptions, Row};
use streamsight::scenario::{self, BurstyOptions, Generated};
use streamsight_core::history::Compaction;
use streamsight_core::{Engine, EngineConfig};

#[derive(Copy, Clone, Debug)]
enum History {
    /// Every sighting kept: what the data itself allows.
    Full,
    Compacted(Compaction),
}

impl History {
    fn name(self) -> &'static str {
        match self {
            History::Full => "full history",
            History::Compacted(Compaction::ByError) => "by_error (4 KiB)",
            History::Compacted(Compaction::ByAge) => "by_age (4 KiB)",
        }
    }

    fn config(self) -> EngineConfig {
        match self {
            History::Full => EngineConfig {
                history_bytes: 64 << 20,
                ..EngineConfig::default()
            },
            History::Compacted(compaction) => EngineConfig {
                history_compaction: compaction,
                ..EngineConfig::default()
            },
        }
    }
}

#[derive(Debug, Default)]
struct Errors {
    /// Absolute errors in seconds of every answer the truth can check.
    seconds: Vec<f64>,
    /// Lower bounds, given for records older than the first report.
    lower_bounds: usize,
    /// Unknown, or a bound the truth breaks: none are expected.
    not_exact: usize,
    max_lag: f64,
}

impl Errors {
    fn add(&mut self, generated: &Generated, rows: &[Row]) {
        for row in rows {
            let r = &row.report;
            let now_ms = (row.at * 1000.0).round() as i64;
            let committed = r.committed_offset.unwrap();
            let truth = generated.truth.lag_seconds(row.partition, committed, now_ms).unwrap();
            match r.lag_seconds {
                Some(s) if !r.lag_seconds_lower_bound => {
                    self.seconds.push((s - truth).abs());
                    self.max_lag = self.max_lag.max(truth);
                }
                // Records older than the first report: a bound, and a true one.
                Some(s) if truth >= s - 1e-3 => self.lower_bounds += 1,
                _ => self.not_exact += 1,
            }
        }
    }

    fn mean(&self) -> f64 {
        self.seconds.iter().sum::<f64>() / self.seconds.len() as f64
    }

    fn quantile(&self, q: f64) -> f64 {
        let mut v = self.seconds.clone();
        v.sort_by(f64::total_cmp);
        v[((v.len() - 1) as f64 * q).round() as usize]
    }
}

fn replay(generated: &Generated, history: History) -> Vec<Row> {
    let mut engine = Engine::new(history.config()).unwrap();
    let mut out = Vec::new();
    let options = ReplayOptions {
        sample_every_ms: Some(10_000),
        format: Format::Json,
        events: false,
    };
    replay::run(&mut engine, generated.scenario.as_bytes(), &mut out, &options).unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Every history over the same scenarios: errors per history, and the table.
fn measure(poll_every: u32) -> Vec<Errors> {
    let seeds: u64 = env_or("STREAMSIGHT_ACCURACY_SEEDS", 1);
    let jitter: f64 = env_or("STREAMSIGHT_ACCURACY_JITTER", 0.0);
    let histories = [
        History::Full,
        History::Compacted(Compaction::ByError),
        History::Compacted(Compaction::ByAge),
    ];
    let mut errors: Vec<Errors> = histories.iter().map(|_| Errors::default()).collect();
    for seed in 1..=seeds {
        let generated = scenario::bursty(&BurstyOptions {
            seed,
            jitter,
            poll_every,
            ..BurstyOptions::default()
        });
        for (history, errors) in histories.iter().zip(&mut errors) {
            errors.add(&generated, &replay(&generated, *history));
        }
    }
    println!(
        "\n{seeds} seeds x {} partitions x 8 h, jitter {jitter}, end offset read every {poll_every} s, \
         groups up to {:.1} h behind, sampled every 10 s",
        BurstyOptions::default().partitions,
        errors[0].max_lag / 3600.0
    );
    println!("| history | answers | mean error | p99 | max | true lower bounds |");
    println!("|---|---|---|---|---|---|");
    for (history, e) in histories.iter().zip(&errors) {
        println!(
            "| {} | {} | {:.3} s | {:.3} s | {:.1} s | {} |",
            history.name(),
            e.seconds.len(),
            e.mean(),
            e.quantile(0.99),
            e.quantile(1.0),
            e.lower_bounds
        );
    }
    for e in &errors {
        assert!(e.max_lag > 5.9 * 3600.0, "a group is 6 h behind");
        assert_eq!(e.not_exact, 0, "every answer is an estimate or a true lower bound");
    }
    errors
}

/// The end offset known every second: the data can tell lag to within a second,
/// and the 4 KiB history must too.
#[test]
fn lag_seconds_stay_within_a_second_of_the_truth_hours_behind_a_bursty_producer() {
    let errors = measure(1);
    let (full, by_error, by_age) = (&errors[0], &errors[1], &errors[2]);
    assert!(full.quantile(0.99) <= 1.0, "the data allows {} s", full.quantile(0.99));
    assert!(by_error.mean() <= 1.0, "mean error {} s", by_error.mean());
    assert!(
        by_error.quantile(0.99) <= 5.0,
        "p99 error {} s",
        by_error.quantile(0.99)
    );
    assert!(
        by_age.mean() > 10.0 * by_error.mean(),
        "compacting by age is the bar this improves on"
    );
}

/// The end offset read every 10 s (a poller's default): after an idle stretch the
/// first records are smeared over up to 10 s in the data itself. Compaction must
/// add next to nothing to that.
#[test]
fn compaction_adds_next_to_nothing_to_what_the_data_allows() {
    let errors = measure(10);
    let (full, by_error) = (&errors[0], &errors[1]);
    assert!(
        by_error.mean() <= full.mean() + 0.2,
        "{} s vs {} s",
        by_error.mean(),
        full.mean()
    );
    assert!(by_error.quantile(1.0) <= full.quantile(1.0) + 5.0);
}

/// `streamsight scenario bursty` writes what `replay` reads, and the compaction is
/// a config key.
#[test]
fn the_binary_generates_and_replays_with_either_compaction() {
    let bin = env!("CARGO_BIN_EXE_streamsight");
    let dir = std::env::temp_dir().join(format!("streamsight-accuracy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bursty.jsonl");
    let out = std::process::Command::new(bin)
        .args([
            "scenario",
            "bursty",
            "--hours",
            "0.5",
            "--partitions",
            "2",
            "--seed",
            "3",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let expected = scenario::bursty(&BurstyOptions {
        seed: 3,
        hours: 0.5,
        partitions: 2,
        ..BurstyOptions::default()
    });
    assert_eq!(String::from_utf8(out.stdout.clone()).unwrap(), expected.scenario);
    std::fs::write(&file, &out.stdout).unwrap();
    for compaction in ["by_error", "by_age"] {
        let config = dir.join(format!("{compaction}.toml"));
        std::fs::write(&config, format!("[engine]\nhistory_compaction = \"{compaction}\"\n")).unwrap();
        let out = std::process::Command::new(bin)
            .arg("--config")
            .arg(&config)
            .arg("replay")
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let rows: Vec<Row> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(rows.len(), 2 * scenario::GROUPS.len(), "{compaction}");
    }
    let out = std::process::Command::new(bin)
        .args(["scenario", "bursty", "--hours", "100", "--partitions", "100"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at most 2000"));
    std::fs::remove_dir_all(&dir).unwrap();
}
