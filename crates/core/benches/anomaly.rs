//! The anomaly detectors on generated series: 7 days at one point a minute,
//! diurnal shape, weekends, noise, and injected anomalies (flow drops, DLQ
//! spikes, lag ramps). Prints recall, false alerts per series per day (the
//! whole week, warm-up included) and detection delay, per kind, and the state
//! per series. Goals (issue 18): recall ≥ 0.9, ≤ 1 false alert per series per day.
//! Then 4 weeks of flows with quiet weekends (35 %), with and without the
//! weekly factors, scored over weeks 3 and 4.
//!
//! `cargo bench -p streamsight-core --bench anomaly`

use std::time::Instant;
use streamsight_core::Millis;
use streamsight_core::anomaly::{Detector, Direction, Sensitivity};

const SERIES: u64 = 200;
const MIN_MS: i64 = 60_000;
/// Alarms this long after an anomaly ends still count as finding it.
const GRACE: usize = 10;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next()
    }

    fn normal(&mut self) -> f64 {
        let (u, v) = (self.next().max(1e-12), self.next());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    FlowDrop,
    DlqSpike,
    LagRamp,
}

#[derive(Clone, Copy)]
struct Scenario {
    days: usize,
    /// Weekend level as a share of weekdays'.
    weekend: f64,
    /// Scored from this minute on (earlier alarms and anomalies are not counted).
    scored_from: usize,
    /// Minutes between anomalies: 600 plus up to this many.
    gap: f64,
}

impl Scenario {
    fn minutes(self) -> usize {
        self.days * 1440
    }
}

const WEEK: Scenario = Scenario {
    days: 7,
    weekend: 0.8,
    scored_from: 0,
    gap: 1400.0,
};

const MONTH: Scenario = Scenario {
    days: 28,
    weekend: 0.35,
    scored_from: 14 * 1440,
    gap: 2800.0,
};

/// A series and its injected anomalies as [start, end) minutes.
fn generate(kind: Kind, seed: u64, sc: Scenario) -> (Vec<f64>, Vec<(usize, usize)>) {
    let minutes = sc.minutes();
    let mut rng = Rng(seed.wrapping_mul(7919) ^ kind as u64);
    // Anomalies after the first day and a half, apart from each other.
    let mut anomalies = Vec::new();
    let mut t = 2160 + rng.range(0.0, 600.0) as usize;
    while t < minutes - 120 && anomalies.len() < 4 * sc.days / 7 {
        let len = rng.range(15.0, 75.0) as usize;
        anomalies.push((t, t + len));
        t += len + 600 + rng.range(0.0, sc.gap) as usize;
    }
    let level = rng.range(200.0, 5000.0);
    let amplitude = rng.range(0.3, 0.8);
    let noise = rng.range(0.03, 0.15);
    let peak_hour = rng.range(10.0, 18.0);
    let mut values = Vec::with_capacity(minutes);
    for m in 0..minutes {
        let hour = (m % 1440) as f64 / 60.0;
        let day = m / 1440;
        let diurnal = 1.0 + amplitude * ((hour - peak_hour) / 24.0 * 2.0 * std::f64::consts::PI).cos();
        let weekend = if day % 7 >= 5 { sc.weekend } else { 1.0 };
        let inside = anomalies.iter().find(|(a, b)| (*a..*b).contains(&m));
        let v = match kind {
            Kind::FlowDrop => {
                let base = level * diurnal * weekend * (1.0 + noise * rng.normal());
                match inside {
                    Some(_) => base * rng.range(0.3, 0.6),
                    None => base,
                }
            }
            Kind::DlqSpike => {
                // A few dead letters a minute, more by day.
                let base = (3.0 * diurnal * weekend + rng.normal() * 1.5).max(0.0);
                match inside {
                    Some(_) => base + rng.range(8.0, 40.0),
                    None => base,
                }
            }
            Kind::LagRamp => {
                let base = (15.0 * diurnal + 4.0 * rng.normal()).max(0.0);
                match inside {
                    Some((a, _)) => base + (m - a) as f64 * rng.range(2.0, 10.0),
                    None => base,
                }
            }
        };
        values.push(v);
    }
    (values, anomalies)
}

#[derive(Default)]
struct Score {
    injected: usize,
    found: usize,
    delays: Vec<usize>,
    false_alerts: usize,
}

fn run(kind: Kind, direction: Direction, s: Sensitivity, sc: Scenario, weekly: bool) -> Score {
    let minutes = sc.minutes();
    let mut score = Score::default();
    for seed in 0..SERIES {
        let (values, anomalies) = generate(kind, seed, sc);
        let mut d = if weekly {
            Detector::new(direction)
        } else {
            Detector::daily_only(direction)
        };
        let alarms: Vec<bool> = values
            .iter()
            .enumerate()
            .map(|(m, v)| d.observe(Millis(m as i64 * MIN_MS), *v, s).anomalous)
            .collect();
        let anomalies: Vec<_> = anomalies.into_iter().filter(|&(a, _)| a >= sc.scored_from).collect();
        score.injected += anomalies.len();
        for &(a, b) in &anomalies {
            if let Some(first) = (a..(b + GRACE).min(minutes)).find(|&m| alarms[m]) {
                score.found += 1;
                score.delays.push(first - a);
            }
        }
        // Alarm episodes that touch no anomaly (with its grace) are false.
        let mut m = sc.scored_from;
        while m < minutes {
            if !alarms[m] {
                m += 1;
                continue;
            }
            let start = m;
            while m < minutes && alarms[m] {
                m += 1;
            }
            let touches = anomalies.iter().any(|&(a, b)| start < b + GRACE && m > a);
            score.false_alerts += usize::from(!touches);
        }
    }
    score
}

fn report(name: &str, kind: Kind, direction: Direction, spreads: f32, sc: Scenario, weekly: bool) {
    let sensitivity = Sensitivity {
        spreads,
        ..Sensitivity::default()
    };
    let started = Instant::now();
    let mut s = run(kind, direction, sensitivity, sc, weekly);
    let rate = (SERIES as f64 * sc.minutes() as f64) / started.elapsed().as_secs_f64();
    s.delays.sort_unstable();
    let q = |p: f64| {
        s.delays
            .get(((s.delays.len() as f64 - 1.0) * p) as usize)
            .copied()
            .unwrap_or(0)
    };
    let scored_days = (sc.minutes() - sc.scored_from) as f64 / 1440.0;
    println!(
        "| {name} | {spreads} | {} | {:.3} | {:.3} | {} min | {} min | {:.1} M |",
        s.injected,
        s.found as f64 / s.injected.max(1) as f64,
        s.false_alerts as f64 / SERIES as f64 / scored_days,
        q(0.5),
        q(0.9),
        rate / 1e6
    );
}

fn main() {
    println!(
        "{} series per kind, 7 days at 1 point a minute; detector state {} bytes per series\n",
        SERIES,
        Detector::state_bytes()
    );
    println!("| kind | spreads | injected | recall | false alerts / series / day | delay p50 | delay p90 | points/s |");
    println!("|---|---|---|---|---|---|---|---|");
    for (name, kind, direction, spreads) in [
        ("flow drop (produce rate)", Kind::FlowDrop, Direction::Drop, 5.0),
        ("flow drop (produce rate)", Kind::FlowDrop, Direction::Drop, 4.0),
        ("flow drop (produce rate)", Kind::FlowDrop, Direction::Drop, 3.5),
        ("DLQ velocity spike", Kind::DlqSpike, Direction::Rise, 5.0),
        ("DLQ velocity spike", Kind::DlqSpike, Direction::Rise, 4.0),
        ("lag growth (lag seconds ramp)", Kind::LagRamp, Direction::Rise, 5.0),
        ("lag growth (lag seconds ramp)", Kind::LagRamp, Direction::Rise, 4.0),
    ] {
        report(name, kind, direction, spreads, WEEK, true);
    }
    println!("\n4 weeks, weekends at 35 %, scored over weeks 3 and 4\n");
    println!(
        "| detector | spreads | injected | recall | false alerts / series / day | delay p50 | delay p90 | points/s |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (name, kind, direction, weekly) in [
        (
            "flow drop, hour of day and day of week",
            Kind::FlowDrop,
            Direction::Drop,
            true,
        ),
        ("flow drop, hour of day only", Kind::FlowDrop, Direction::Drop, false),
        ("DLQ velocity spike", Kind::DlqSpike, Direction::Rise, true),
        ("lag growth", Kind::LagRamp, Direction::Rise, true),
    ] {
        report(name, kind, direction, 4.0, MONTH, weekly);
    }
}
