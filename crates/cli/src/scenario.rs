//! Generated scenarios for `replay`: a bursty producer and consumer groups minutes
//! to hours behind it, with the exact time every record was acknowledged, so that
//! lag seconds can be checked against the truth rather than against another
//! estimate.
//!
//! Each partition's producer goes through stretches of 1 to 15 minutes: idle,
//! trickling (one record every 50 s to one a second), steady (5 to 200 a second) or
//! bursting (200 to 3,000 a second). Within a second its records are acknowledged
//! evenly spaced, the last one on the second, which is when the producer reports
//! the highest acknowledged offset (a `produce` event), as a tracer's or the SDK's
//! per-interval report does. A poller reads the broker's end offset every
//! `poll_every` seconds (`high_watermark`). Groups commit every 3 to 7 s the offset
//! after the last record acknowledged `D` before, with `D` 5 minutes, 30 minutes,
//! 2 hours, 6 hours, and for one group three quarters of the time elapsed.

use std::fmt::Write;

/// The topic every generated partition belongs to.
pub const TOPIC: &str = "orders";

/// What to generate.
#[derive(Clone, Debug)]
pub struct BurstyOptions {
    pub seed: u64,
    /// Scenario length.
    pub hours: f64,
    pub partitions: u32,
    /// Each second's rate is the stretch's rate times `1 ± jitter` (uniform); 0
    /// gives constant rates between changes.
    pub jitter: f64,
    /// Seconds between two readings of the broker's end offset.
    pub poll_every: u32,
}

impl Default for BurstyOptions {
    fn default() -> Self {
        Self {
            seed: 1,
            hours: 8.0,
            partitions: 4,
            jitter: 0.0,
            poll_every: 10,
        }
    }
}

/// The consumer groups and how far behind each one reads, in ms at time `t` ms.
pub const GROUPS: [(&str, Behind); 5] = [
    ("behind-5m", Behind::Fixed(300_000)),
    ("behind-30m", Behind::Fixed(1_800_000)),
    ("behind-2h", Behind::Fixed(7_200_000)),
    ("behind-6h", Behind::Fixed(21_600_000)),
    ("falling-behind", Behind::ShareOfElapsed(0.75)),
];

#[derive(Copy, Clone, Debug)]
pub enum Behind {
    Fixed(i64),
    ShareOfElapsed(f64),
}

impl Behind {
    fn at(self, t_ms: i64) -> i64 {
        match self {
            Behind::Fixed(d) => d,
            Behind::ShareOfElapsed(share) => (t_ms as f64 * share) as i64,
        }
    }
}

/// A scenario and the exact acknowledgement time of each of its records.
#[derive(Debug)]
pub struct Generated {
    /// JSON Lines for `replay`.
    pub scenario: String,
    pub truth: Truth,
}

/// Per partition, every second in which records were acknowledged: `(second, end
/// offset after it)`. Records of one second are evenly spaced, the last on the
/// second's end.
#[derive(Debug)]
pub struct Truth {
    partitions: Vec<Vec<(i64, i64)>>,
}

impl Truth {
    /// When the record at `offset` was acknowledged, in ms.
    pub fn produce_time_ms(&self, partition: i32, offset: i64) -> Option<f64> {
        let seconds = self.partitions.get(usize::try_from(partition).ok()?)?;
        let idx = seconds.partition_point(|&(_, end)| end <= offset);
        let &(second, end) = seconds.get(idx)?;
        let start = if idx == 0 { 0 } else { seconds[idx - 1].1 };
        let (count, index) = ((end - start) as f64, (offset - start) as f64);
        Some(second as f64 * 1000.0 + (index + 1.0) * 1000.0 / count)
    }

    /// Records acknowledged at or before `t_ms`: the end offset then.
    pub fn end_at(&self, partition: i32, t_ms: i64) -> i64 {
        usize::try_from(partition)
            .ok()
            .and_then(|p| self.partitions.get(p))
            .map_or(0, |seconds| end_at(seconds, t_ms))
    }

    /// The true lag in seconds at `now_ms` of a group that will read `committed`
    /// next: 0 when nothing is waiting.
    pub fn lag_seconds(&self, partition: i32, committed: i64, now_ms: i64) -> Option<f64> {
        if committed >= self.end_at(partition, now_ms) {
            return Some(0.0);
        }
        Some((now_ms as f64 - self.produce_time_ms(partition, committed)?) / 1000.0)
    }
}

fn end_at(seconds: &[(i64, i64)], t_ms: i64) -> i64 {
    let second = t_ms.div_euclid(1000);
    let idx = seconds.partition_point(|&(s, _)| s < second);
    let before = if idx == 0 { 0 } else { seconds[idx - 1].1 };
    match seconds.get(idx) {
        Some(&(s, end)) if s == second => before + (end - before) * (t_ms - s * 1000) / 1000,
        _ => before,
    }
}

/// A small deterministic generator (SplitMix64): scenarios are reproducible from
/// their seed on every platform.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn between(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    fn log_between(&mut self, lo: f64, hi: f64) -> f64 {
        (lo.ln() + (hi.ln() - lo.ln()) * self.unit()).exp()
    }
}

/// One partition's producer: the current stretch's rate and when it ends.
struct Producer {
    rate: f64,
    until: i64,
    /// Records owed but not yet whole, carried between seconds.
    carry: f64,
    end: i64,
}

impl Producer {
    fn records_in(&mut self, second: i64, rng: &mut Rng, jitter: f64) -> i64 {
        if second >= self.until {
            let kind = rng.unit();
            self.rate = if kind < 0.2 {
                0.0
            } else if kind < 0.45 {
                rng.log_between(0.02, 1.0)
            } else if kind < 0.8 {
                rng.log_between(5.0, 200.0)
            } else {
                rng.log_between(200.0, 3_000.0)
            };
            self.until = second + rng.between(60.0, 900.0) as i64;
        }
        let rate = self.rate * (1.0 + jitter * rng.between(-1.0, 1.0));
        self.carry += rate.max(0.0);
        let whole = self.carry.floor();
        self.carry -= whole;
        whole as i64
    }
}

/// Generates the scenario in memory, with its truth.
pub fn bursty(options: &BurstyOptions) -> Generated {
    let mut scenario = Vec::new();
    let truth = bursty_to(options, &mut scenario).expect("writing to memory cannot fail");
    Generated {
        scenario: String::from_utf8(scenario).expect("the scenario is ASCII"),
        truth,
    }
}

/// Writes the scenario to `out` as it is generated, and returns its truth.
pub fn bursty_to(options: &BurstyOptions, out: &mut impl std::io::Write) -> std::io::Result<Truth> {
    let mut rng = Rng(options.seed);
    let partitions = options.partitions as usize;
    let seconds = (options.hours * 3600.0) as i64;
    let mut producers: Vec<Producer> = (0..partitions)
        .map(|_| Producer {
            rate: 0.0,
            until: 0,
            carry: 0.0,
            end: 0,
        })
        .collect();
    let mut truth: Vec<Vec<(i64, i64)>> = vec![Vec::new(); partitions];
    // Next commit time per (group, partition), staggered.
    let mut next_commit: Vec<i64> = (0..GROUPS.len() * partitions)
        .map(|_| rng.between(0.0, 5_000.0) as i64)
        .collect();
    let mut scenario = String::new();
    let mut commits: Vec<(i64, usize, usize)> = Vec::new();
    let poll_every = i64::from(options.poll_every.max(1));
    for second in 0..seconds {
        let (from, to) = (second * 1000, second * 1000 + 1000);
        // Commits inside this second, from what was acknowledged up to D before.
        commits.clear();
        for (k, next) in next_commit.iter_mut().enumerate() {
            while *next < to {
                commits.push((*next, k / partitions, k % partitions));
                *next += rng.between(3_000.0, 7_000.0) as i64;
            }
        }
        commits.sort_unstable();
        for &(at, group, partition) in &commits {
            let (name, behind) = GROUPS[group];
            let offset = end_at(&truth[partition], at - behind.at(at));
            line(&mut scenario, at, "commit", Some(name), partition, offset);
        }
        debug_assert!(commits.iter().all(|&(at, _, _)| at >= from));
        for (p, producer) in producers.iter_mut().enumerate() {
            let n = producer.records_in(second, &mut rng, options.jitter);
            if n > 0 {
                producer.end += n;
                truth[p].push((second, producer.end));
                line(&mut scenario, to, "produce", None, p, producer.end - 1);
            }
            if (second + 1) % poll_every == 0 {
                line(&mut scenario, to, "high_watermark", None, p, producer.end);
            }
        }
        out.write_all(scenario.as_bytes())?;
        scenario.clear();
    }
    Ok(Truth { partitions: truth })
}

fn line(out: &mut String, at_ms: i64, event: &str, group: Option<&str>, partition: usize, offset: i64) {
    let at = at_ms as f64 / 1000.0;
    let group = group.map(|g| format!(r#","group":"{g}""#)).unwrap_or_default();
    let _ = writeln!(
        out,
        r#"{{"at":{at},"event":"{event}"{group},"topic":"{TOPIC}","partition":{partition},"offset":{offset}}}"#
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truth_agrees_with_itself() {
        let g = bursty(&BurstyOptions {
            hours: 0.5,
            partitions: 2,
            ..BurstyOptions::default()
        });
        for p in 0..2 {
            let end = g.truth.end_at(p, 1_800_000);
            assert!(end > 0, "partition {p} produced nothing");
            for offset in (0..end).step_by(((end / 500) as usize).max(1)) {
                let t = g.truth.produce_time_ms(p, offset).unwrap();
                // Acknowledged at t: counted by then, not a moment before.
                assert!(g.truth.end_at(p, t.ceil() as i64) > offset, "offset {offset} at {t}");
                assert!(
                    g.truth.end_at(p, t.floor() as i64 - 1) <= offset,
                    "offset {offset} at {t}"
                );
            }
            assert_eq!(g.truth.produce_time_ms(p, end), None);
        }
    }

    #[test]
    fn same_seed_same_scenario() {
        let options = BurstyOptions {
            hours: 0.1,
            ..BurstyOptions::default()
        };
        assert_eq!(bursty(&options).scenario, bursty(&options).scenario);
        let other = BurstyOptions {
            seed: 2,
            ..options.clone()
        };
        assert_ne!(bursty(&options).scenario, bursty(&other).scenario);
    }
}
