//! Anomalies found without training data, one small detector per series.
//!
//! A detector sees a series' value at each evaluation (time passed in) and keeps:
//! - the last [`RECENT`] values, whose median and MAD are the baseline until the
//!   series has history (it works after a few minutes);
//! - a profile by hour of day (an exponentially weighted level and spread per hour)
//!   that becomes the baseline for an hour once [`SEASON_DAYS`] days have filled
//!   it, so that a nightly trough is not a drop and a daily peak is not a spike;
//! - a factor per day of the week (that day's values over the hour profile's)
//!   that scales the hour's baseline once the day was seen in [`SEASON_WEEKS`]
//!   weeks, so that a quiet Sunday is not a drop either. Seven factors instead
//!   of a profile per hour of the week: 84 bytes instead of 2 KiB, and usable
//!   after one week instead of two per hour.
//!
//! A value is anomalous when it is more than `sensitivity` robust spreads away
//! from its baseline in the watched direction, for [`HOLD`] evaluations in a row
//! (one odd point is noise); once a week of history has settled the baseline,
//! when the last [`HOLD`] values are far off on average ([`SETTLED_MEAN`]).
//! The hour profile learns odd values a hundred times
//! slower than others, so a long outage does not become the new normal. State:
//! under 1 KiB per series.

use crate::time::Millis;
use serde::{Deserialize, Serialize};

/// Recent values kept for the short-term baseline.
pub const RECENT: usize = 48;
/// Days of an hour's history before its seasonal profile is trusted.
pub const SEASON_DAYS: u16 = 2;
/// Weeks in which a day of the week was seen before its factor is trusted
/// (the first week teaches it, from the second on it counts).
pub const SEASON_WEEKS: u16 = 2;
/// Consecutive anomalous evaluations before the detector says so.
pub const HOLD: u8 = 3;
/// Once settled, the last [`HOLD`] scores' mean must pass this share of the
/// sensitivity, and each of them [`SETTLED_FLOOR`] spreads. Three points in a
/// row each beyond 4 spreads miss a drop to 60 % in a series with 15 % noise
/// (recall 0.71 over weeks 3-4 in BENCHMARKS.md); the mean of three has √3 less
/// noise (0.98, false alerts unchanged).
pub const SETTLED_MEAN: f32 = 0.7;
pub const SETTLED_FLOOR: f32 = 1.5;

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Far below the baseline: a flow drop.
    Drop,
    /// Far above: a spike (DLQ velocity) or growth (lag).
    Rise,
}

#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sensitivity {
    /// Robust spreads from the baseline (default 4: see BENCHMARKS.md).
    pub spreads: f32,
    /// The spread is at least this share of the baseline (default 0.1): a very
    /// steady series does not alarm on a 2 % wobble.
    pub min_relative_spread: f32,
    /// And at least this much in the series' own unit (default 1).
    pub min_spread: f32,
}

impl Default for Sensitivity {
    fn default() -> Self {
        Self {
            spreads: 4.0,
            min_relative_spread: 0.1,
            min_spread: 1.0,
        }
    }
}

#[derive(Copy, Clone, Debug, Default, PartialEq)]
struct HourProfile {
    level: f32,
    spread: f32,
    /// Distinct days that contributed (saturating).
    days: u16,
    last_day: i32,
}

/// A day of the week's level over the hour profile's.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
struct DayProfile {
    factor: f32,
    /// Distinct weeks that contributed (saturating).
    weeks: u16,
    last_week: i32,
}

/// What a detector says about one value.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Verdict {
    pub anomalous: bool,
    /// How many spreads from the baseline, in the watched direction.
    pub score: f32,
    pub baseline: f32,
}

#[derive(Clone, Debug)]
pub struct Detector {
    direction: Direction,
    recent: [f32; RECENT],
    len: u8,
    next: u8,
    hours: [HourProfile; 24],
    days: [DayProfile; 7],
    weekly: bool,
    streak: u8,
    /// The last [`HOLD`] scores, newest at `streak % HOLD`.
    scores: [f32; HOLD as usize],
    seen: u8,
}

impl Detector {
    pub fn new(direction: Direction) -> Self {
        Self {
            direction,
            recent: [0.0; RECENT],
            len: 0,
            next: 0,
            hours: [HourProfile::default(); 24],
            days: [DayProfile::default(); 7],
            weekly: true,
            streak: 0,
            scores: [0.0; HOLD as usize],
            seen: 0,
        }
    }

    /// A detector with the hour-of-day profile only, for series known to have
    /// no weekly rhythm (and to measure what the weekly factors are worth).
    pub fn daily_only(direction: Direction) -> Self {
        Self {
            weekly: false,
            ..Self::new(direction)
        }
    }

    /// Bytes of state (the struct is all of it: no heap).
    pub const fn state_bytes() -> usize {
        std::mem::size_of::<Self>()
    }

    /// Judges `value` seen at `at` and learns from it unless it is anomalous.
    pub fn observe(&mut self, at: Millis, value: f64, s: Sensitivity) -> Verdict {
        let v = value as f32;
        let hour = (at.0.div_euclid(3_600_000).rem_euclid(24)) as usize;
        let day = at.0.div_euclid(86_400_000) as i32;
        let (baseline, spread) = self.baseline(hour, day, s);
        let score = match (baseline, self.direction) {
            (None, _) => 0.0,
            (Some(b), Direction::Drop) => (b - v) / spread,
            (Some(b), Direction::Rise) => (v - b) / spread,
        };
        let odd = baseline.is_some() && score > s.spreads;
        self.scores[usize::from(self.seen % HOLD)] = score;
        self.seen = self.seen.wrapping_add(1) % (HOLD * 50);
        let mean = self.scores.iter().sum::<f32>() / f32::from(HOLD);
        let lo = self.scores.iter().copied().fold(f32::INFINITY, f32::min);
        self.streak = if odd { self.streak.saturating_add(1) } else { 0 };
        let anomalous = if self.settled(hour, day) {
            mean > s.spreads * SETTLED_MEAN && lo > SETTLED_FLOOR
        } else {
            self.streak >= HOLD
        };
        let odd = odd || anomalous;
        self.learn(v, hour, day, odd);
        Verdict {
            anomalous,
            score,
            baseline: baseline.unwrap_or(v),
        }
    }

    /// A week of this hour's history (and the day's factor, when weekly): the
    /// profile's spread is then the series' own noise, not a guess.
    fn settled(&self, hour: usize, day: i32) -> bool {
        self.hours[hour].days >= 7 && (!self.weekly || self.day_factor(day).is_some())
    }

    /// The day of the week's factor once trusted.
    fn day_factor(&self, day: i32) -> Option<f32> {
        let d = self.days[day.rem_euclid(7) as usize];
        (self.weekly && d.weeks >= SEASON_WEEKS).then_some(d.factor)
    }

    fn baseline(&self, hour: usize, day: i32, s: Sensitivity) -> (Option<f32>, f32) {
        let h = self.hours[hour];
        let (level, spread) = if h.days >= SEASON_DAYS {
            let f = self.day_factor(day).unwrap_or(1.0);
            (Some(h.level * f), h.spread * 1.25 * f)
        } else if usize::from(self.len) >= RECENT / 4 {
            // On the stack: this runs for every series every round.
            let n = usize::from(self.len);
            let mut xs = self.recent;
            let m = median(&mut xs[..n]);
            for x in &mut xs[..n] {
                *x = (*x - m).abs();
            }
            (Some(m), 1.4826 * median(&mut xs[..n]))
        } else {
            (None, 0.0)
        };
        let floor = level.map_or(s.min_spread, |l| (l.abs() * s.min_relative_spread).max(s.min_spread));
        (level, spread.max(floor))
    }

    /// The recent window takes every value (its median shrugs off a few odd
    /// ones, and accepts a lasting shift after half a window); the hour's profile
    /// takes odd values a hundred times slower, so an outage stays an outage for
    /// days but a lasting change of level is learned in the end.
    fn learn(&mut self, v: f32, hour: usize, day: i32, odd: bool) {
        self.recent[usize::from(self.next)] = v;
        self.next = (self.next + 1) % RECENT as u8;
        self.len = (self.len + 1).min(RECENT as u8);
        let factor = self.day_factor(day);
        if self.weekly {
            self.learn_day(v, hour, day, odd && factor.is_some());
        }
        // The hour profile learns the value as it would be on an average day.
        let v = factor.filter(|f| *f > 1e-3).map_or(v, |f| v / f);
        let h = &mut self.hours[hour];
        if h.days == 0 && h.last_day == 0 {
            *h = HourProfile {
                level: v,
                spread: 0.0,
                days: 1,
                last_day: day,
            };
            return;
        }
        if day != h.last_day {
            h.days = h.days.saturating_add(1);
            h.last_day = day;
        }
        // An hour's 60 points a day move the level by about a quarter: the
        // profile follows days, not minutes.
        let alpha: f32 = if odd { 0.0005 } else { 0.005 };
        let dev = (v - h.level).abs();
        h.level += alpha * (v - h.level);
        h.spread += alpha * (dev - h.spread);
    }
}

impl Detector {
    /// A day's factor follows the ratio of its values to the hour profile's,
    /// over about a day's points (a one-hour outage moves it ~10 %); odd values
    /// count ten times less once the factor is trusted. Before that, every value
    /// counts: a first quiet Sunday reads odd against weekdays, and is what the
    /// factor must learn.
    fn learn_day(&mut self, v: f32, hour: usize, day: i32, odd: bool) {
        let h = self.hours[hour];
        if h.days < SEASON_DAYS || h.level.abs() < 1e-3 {
            return;
        }
        let week = day.div_euclid(7);
        let d = &mut self.days[day.rem_euclid(7) as usize];
        if d.weeks == 0 {
            *d = DayProfile {
                factor: 1.0,
                weeks: 1,
                last_week: week,
            };
        } else if week != d.last_week {
            d.weeks = d.weeks.saturating_add(1);
            d.last_week = week;
        }
        let beta: f32 = if odd { 0.0002 } else { 0.002 };
        let ratio = (v / h.level).clamp(0.0, 100.0);
        d.factor += beta * (ratio - d.factor);
    }
}

fn median(xs: &mut [f32]) -> f32 {
    let mid = xs.len() / 2;
    let (_, m, _) = xs.select_nth_unstable_by(mid, f32::total_cmp);
    *m
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    #[test]
    fn state_stays_under_a_kibibyte() {
        assert!(Detector::state_bytes() <= 1024, "{}", Detector::state_bytes());
    }

    #[test]
    fn a_drop_is_found_after_the_hold_and_one_odd_point_is_not() {
        let mut d = Detector::new(Direction::Drop);
        let s = Sensitivity::default();
        let mut t = 0;
        for i in 0..100 {
            t += MIN;
            let v = 100.0 + f64::from(i % 5);
            assert!(!d.observe(Millis(t), v, s).anomalous);
        }
        t += MIN;
        assert!(!d.observe(Millis(t), 5.0, s).anomalous, "one point is noise");
        t += MIN;
        assert!(!d.observe(Millis(t), 100.0, s).anomalous);
        let mut found = None;
        for i in 0..10 {
            t += MIN;
            if d.observe(Millis(t), 10.0, s).anomalous {
                found = Some(i);
                break;
            }
        }
        assert_eq!(found, Some(2), "the third point in a row");
    }

    #[test]
    fn the_nightly_trough_is_not_a_drop_once_the_days_are_learned() {
        let mut d = Detector::new(Direction::Drop);
        let s = Sensitivity::default();
        let mut alarms_after_day_two = 0;
        for m in 0..(5 * 1440) {
            let hour = f64::from((m / 60) % 24);
            // 1,000 a minute by day, 50 at night.
            let v = if (8.0..20.0).contains(&hour) { 1000.0 } else { 50.0 };
            let verdict = d.observe(Millis(i64::from(m) * MIN), v, s);
            if m >= 2 * 1440 && verdict.anomalous {
                alarms_after_day_two += 1;
            }
        }
        assert_eq!(alarms_after_day_two, 0);
        // A drop at noon on day 6 is found.
        let noon = (5 * 1440 + 12 * 60) * MIN;
        let found = (0..10).any(|i| d.observe(Millis(noon + i * MIN), 40.0, s).anomalous);
        assert!(found);
    }

    /// Weekdays at 1,000 a minute, weekends at 300: the first weekend is news,
    /// the third is not, and a weekday drop to the weekend's level still is.
    #[test]
    fn a_quiet_weekend_is_learned_in_a_week_and_a_drop_still_found() {
        let s = Sensitivity::default();
        let value = |m: i64| {
            let weekday = (m / 1440).rem_euclid(7);
            let wiggle = 20.0 * ((m % 37) as f64 / 37.0 - 0.5);
            if weekday >= 5 { 300.0 + wiggle } else { 1000.0 + wiggle }
        };
        let alarms_in_week = |d: &mut Detector, week: i64| {
            (week * 7 * 1440..(week + 1) * 7 * 1440)
                .filter(|&m| d.observe(Millis(m * MIN), value(m), s).anomalous)
                .count()
        };
        let mut weekly = Detector::new(Direction::Drop);
        let mut daily = Detector::daily_only(Direction::Drop);
        let first = alarms_in_week(&mut weekly, 0);
        assert!(first > 0, "the first weekend is a drop against the weekdays");
        for week in 1..3 {
            alarms_in_week(&mut weekly, week);
            alarms_in_week(&mut daily, week - 1);
        }
        alarms_in_week(&mut daily, 2);
        assert_eq!(alarms_in_week(&mut weekly, 3), 0, "the fourth week is as usual");
        assert!(
            alarms_in_week(&mut daily, 3) > 0,
            "without the weekly factors the weekend still reads as a drop"
        );
        // Week 5, Tuesday noon: the weekend's level on a weekday is a drop.
        let tuesday = 4 * 7 * 1440 + 1440 + 12 * 60;
        let found = (0..10).any(|i| weekly.observe(Millis((tuesday + i) * MIN), 300.0, s).anomalous);
        assert!(found);
    }
}
