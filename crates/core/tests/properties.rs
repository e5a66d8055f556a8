//! Properties of the lag math, over random pipelines.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

use proptest::prelude::*;
use streamsight_core::history::{Compaction, HistoryParams, OffsetHistory, ProduceTime, Sighting};
use streamsight_core::{EndOffsetSource, Engine, EngineConfig, LagReport, Millis, Observation, PartitionRef};

/// An observation with owned data, so that proptest can generate and shrink it.
#[derive(Clone, Debug)]
enum Obs {
    Produced(i32, i64),
    Committed(u8, i32, i64),
    BrokerEnd(i32, i64),
    ClientEnd(i32, i64),
    LogStart(i32, i64),
    Failed(i32),
}

impl Obs {
    fn apply(&self, engine: &mut Engine, at: Millis) {
        let _ = engine.observe(at, &self.observation());
    }

    fn observation(&self) -> Observation<'static> {
        let p = |partition| PartitionRef {
            cluster: "c",
            topic: "t",
            partition,
        };
        let groups = ["g0", "g1"];
        match *self {
            Obs::Produced(part, offset) => Observation::Produced {
                partition: p(part),
                offset,
            },
            Obs::Committed(g, part, offset) => Observation::Committed {
                group: groups[usize::from(g % 2)],
                partition: p(part),
                offset,
            },
            Obs::BrokerEnd(part, offset) => Observation::EndOffset {
                partition: p(part),
                offset,
                source: EndOffsetSource::Broker,
            },
            Obs::ClientEnd(part, offset) => Observation::EndOffset {
                partition: p(part),
                offset,
                source: EndOffsetSource::ClientHighWatermark,
            },
            Obs::LogStart(part, offset) => Observation::LogStart {
                partition: p(part),
                offset,
            },
            Obs::Failed(part) => Observation::ProduceFailed {
                partition: p(part),
                error: "x",
            },
        }
    }
}

fn valid_obs() -> impl Strategy<Value = Obs> {
    let part = 0..3i32;
    let offset = 0..5_000i64;
    prop_oneof![
        4 => (part.clone(), offset.clone()).prop_map(|(p, o)| Obs::Produced(p, o)),
        3 => (any::<u8>(), part.clone(), offset.clone()).prop_map(|(g, p, o)| Obs::Committed(g, p, o)),
        2 => (part.clone(), offset.clone()).prop_map(|(p, o)| Obs::BrokerEnd(p, o)),
        1 => (part.clone(), offset).prop_map(|(p, o)| Obs::ClientEnd(p, o)),
        1 => (part, 0..2_000i64).prop_map(|(p, o)| Obs::LogStart(p, o)),
    ]
}

fn invalid_offset() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(-1i64),
        Just(-1001),
        Just(-2),
        Just(-1000),
        i64::MIN..0,
        Just(i64::MAX)
    ]
}

fn invalid_obs() -> impl Strategy<Value = Obs> {
    prop_oneof![
        (0..3i32, invalid_offset()).prop_map(|(p, o)| Obs::Produced(p, o)),
        (i32::MIN..0, any::<i64>()).prop_map(|(p, o)| Obs::Produced(p, o)),
        (any::<u8>(), 0..3i32, invalid_offset()).prop_map(|(g, p, o)| Obs::Committed(g, p, o)),
        (any::<u8>(), i32::MIN..0, 0..5_000i64).prop_map(|(g, p, o)| Obs::Committed(g, p, o)),
        (0..3i32, invalid_offset()).prop_map(|(p, o)| Obs::BrokerEnd(p, o)),
        (i32::MIN..0, 0..5_000i64).prop_map(|(p, o)| Obs::BrokerEnd(p, o)),
        (0..3i32, invalid_offset()).prop_map(|(p, o)| Obs::LogStart(p, o)),
        (-1..3i32).prop_map(Obs::Failed),
    ]
}

/// Valid observations with non-decreasing times (gaps of 0 to 20 s).
fn timeline() -> impl Strategy<Value = Vec<(i64, Obs)>> {
    prop::collection::vec((0..20_000i64, valid_obs()), 1..120).prop_map(|v| {
        let mut t = 0;
        v.into_iter()
            .map(|(dt, o)| {
                t += dt;
                (t, o)
            })
            .collect()
    })
}

fn run(timeline: &[(i64, Obs)]) -> Engine {
    let mut e = Engine::new(EngineConfig::default()).unwrap();
    for (t, o) in timeline {
        o.apply(&mut e, Millis(*t));
    }
    e
}

fn reports(e: &Engine, now: Millis) -> Vec<LagReport> {
    e.group_partitions().map(|id| e.evaluate(id, now)).collect()
}

/// An offset, a Kafka sentinel, another negative one or the largest.
fn offset_or_sentinel() -> impl Strategy<Value = i64> {
    prop_oneof![
        0..10_000i64,
        prop::sample::select(vec![-1i64, -2, -1000, -1001, -7, i64::MIN, i64::MAX]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// What an intake says of a point before the engine sees it (`check`) is
    /// what the engine then does with it, whatever the engine held.
    #[test]
    fn a_points_check_is_the_engines_verdict(
        timeline in timeline(),
        obs in prop_oneof![
            (-3..4i32, offset_or_sentinel()).prop_map(|(p, o)| Obs::Produced(p, o)),
            (any::<u8>(), -3..4i32, offset_or_sentinel()).prop_map(|(g, p, o)| Obs::Committed(g, p, o)),
            (-3..4i32, offset_or_sentinel()).prop_map(|(p, o)| Obs::BrokerEnd(p, o)),
            (-3..4i32, offset_or_sentinel()).prop_map(|(p, o)| Obs::ClientEnd(p, o)),
            (-3..4i32, offset_or_sentinel()).prop_map(|(p, o)| Obs::LogStart(p, o)),
            (-3..4i32).prop_map(Obs::Failed),
        ],
    ) {
        let mut e = run(&timeline);
        let at = Millis(timeline.last().unwrap().0 + 1);
        let o = obs.observation();
        let verdict = e.observe(at, &o);
        match o.check() {
            Err(reason) => prop_assert_eq!(verdict, Err(reason)),
            Ok(()) => prop_assert!(
                verdict.is_ok() || verdict == Err(streamsight_core::RejectReason::Limited),
                "{o:?}: {verdict:?}"
            ),
        }
    }

    #[test]
    fn lag_is_never_negative(timeline in timeline(), later in 0..1_000_000i64) {
        let e = run(&timeline);
        let now = Millis(timeline.last().unwrap().0 + later);
        for r in reports(&e, now) {
            prop_assert!(r.lag_messages.is_none_or(|l| l >= 0), "{r:?}");
            prop_assert!(r.lag_seconds.is_none_or(|s| s >= 0.0), "{r:?}");
            prop_assert!(r.data_loss_messages >= 0, "{r:?}");
            prop_assert!(r.lag_messages.is_some() == r.lag_seconds.is_some(), "{r:?}");
        }
    }

    #[test]
    fn lag_seconds_never_decrease_while_nothing_changes(
        timeline in timeline(),
        a in 0..1_000_000i64,
        b in 0..1_000_000i64,
    ) {
        let e = run(&timeline);
        let last = timeline.last().unwrap().0;
        let (early, late) = (Millis(last + a.min(b)), Millis(last + a.max(b)));
        for (x, y) in reports(&e, early).into_iter().zip(reports(&e, late)) {
            prop_assert_eq!(x.lag_messages, y.lag_messages);
            if let (Some(s), Some(t)) = (x.lag_seconds, y.lag_seconds) {
                prop_assert!(t >= s, "{s} s at {early:?}, then {t} s at {late:?}");
            }
        }
    }

    #[test]
    fn invalid_points_never_change_any_output(
        timeline in timeline(),
        noise in prop::collection::vec((any::<prop::sample::Index>(), invalid_obs()), 0..60),
        later in 0..100_000i64,
    ) {
        let mut noisy_timeline = timeline.clone();
        for (index, o) in noise {
            let i = index.index(noisy_timeline.len());
            // At its neighbour's time: it lands between two valid points.
            let t = noisy_timeline[i].0;
            noisy_timeline.insert(i, (t, o));
        }
        let mut clean = run(&timeline);
        let mut noisy = run(&noisy_timeline);
        let now = Millis(timeline.last().unwrap().0 + later);
        let strip = |mut r: LagReport| {
            // The one output failed sends are meant to change.
            r.producer_failing = false;
            r
        };
        let a: Vec<_> = reports(&clean, now).into_iter().map(strip).collect();
        let b: Vec<_> = reports(&noisy, now).into_iter().map(strip).collect();
        prop_assert_eq!(a, b);
        prop_assert_eq!(clean.drain_events(), noisy.drain_events());
        prop_assert_eq!(clean.stats().accepted, noisy.stats().accepted);
    }

    #[test]
    fn downsampling_stays_within_its_documented_error(
        // Bursty production: interpolation across a merged gap is then far off, so
        // only the bound itself keeps the answers close.
        steps in prop::collection::vec(
            (1..30_000i64, prop_oneof![3 => Just(0i64), 1 => 1..5_000i64], any::<bool>(), prop_oneof![9 => Just(0i64), 1 => 1..60_000i64]),
            2..3_000,
        ),
        queries in prop::collection::vec((any::<prop::sample::Index>(), 0..10_000_000i64), 1..20),
        capacity in 8..64usize,
        by_age in any::<bool>(),
    ) {
        let compaction = if by_age { Compaction::ByAge } else { Compaction::ByError };
        let full_params = HistoryParams { capacity: 1 << 20, min_resolution_ms: 1_000, initial_precision: 0.01, compaction };
        let small_params = HistoryParams { capacity, ..full_params };
        let mut full = OffsetHistory::new(&full_params);
        let mut small = OffsetHistory::new(&small_params);
        let (mut t, mut end) = (0i64, 0i64);
        for (dt, de, exact, late) in steps {
            t += dt;
            end += de;
            let sighting = if exact { Sighting::Exact } else { Sighting::AtLeast };
            // Some sightings arrive late, after newer ones (delayed buckets).
            let at = (t - late).max(0);
            full.insert(end, Millis(at), sighting, &full_params);
            small.insert(end, Millis(at), sighting, &small_params);
            prop_assert!(small.len() <= capacity);
        }
        prop_assert_eq!(full.end(), small.end());
        prop_assert_eq!(full.oldest(), small.oldest());
        for h in [&full, &small] {
            let runs = h.points().windows(3).filter(|w| w[0].end == w[1].end && w[1].end == w[2].end).count();
            prop_assert_eq!(runs, 0, "a run of equal ends keeps only its first and last sighting");
        }
        let newest = small.newest().unwrap().at.0;
        for (index, later) in queries {
            let offset = index.index(end.max(1) as usize) as i64;
            let now = newest + later;
            match (full.produce_time(offset), small.produce_time(offset)) {
                (Some(ProduceTime::Interpolated(f)), Some(ProduceTime::Interpolated(s))) => {
                    let lag_full = (now as f64 - f) / 1000.0;
                    let bound = f64::max(1.0, f64::from(small.precision()) * lag_full);
                    let err = (f - s).abs() / 1000.0;
                    prop_assert!(err <= bound + 1e-6,
                        "offset {offset}: full {f} ms, downsampled {s} ms, error {err} s > bound {bound} s");
                    let tracked = small.error_bound_ms(offset).unwrap() / 1000.0;
                    prop_assert!(err <= tracked + 1e-6,
                        "offset {offset}: error {err} s > tracked bound {tracked} s");
                }
                (a, b) => prop_assert_eq!(a, b),
            }
        }
    }

    /// A producer at a steady rate reads at that rate, however its sightings
    /// fall: acks or polls, from every second to `end_overdue_after` apart
    /// (a missed Data Streams bucket), read at any moment before the next.
    #[test]
    fn a_steady_producers_rate_is_read_whenever_its_sightings_come(
        per_second in 1i64..20_000,
        gaps in prop::collection::vec(1_000i64..=30_000, 10..300),
        polled in any::<bool>(),
        wait in 0i64..=30_000,
    ) {
        let mut e = Engine::new(EngineConfig::default()).unwrap();
        let obs = |offset| if polled { Obs::BrokerEnd(0, offset) } else { Obs::Produced(0, offset) };
        let mut t = 0;
        for gap in gaps {
            t += gap;
            obs(per_second * t / 1000).apply(&mut e, Millis(t));
        }
        let pid = e.partitions().next().unwrap();
        let now = Millis(t + wait);
        let Some(rate) = e.produce_rate(pid, now, Engine::RATE_WINDOW_MS) else {
            // Only a history shorter than a tenth of the window may say nothing.
            prop_assert!(t - 1_000 < Engine::RATE_WINDOW_MS, "{t}");
            return Ok(());
        };
        // Whole offsets at each end, and the streaming merge's quarter-second
        // tolerance in time, over a window of at least 6 s.
        let slack = 2.0 * 1000.0 / 6_000.0 + per_second as f64 * 2.0 * 250.0 / 6_000.0;
        prop_assert!((rate - per_second as f64).abs() <= slack, "{rate} per second, produced {per_second}");
    }

    /// Rates are finite and never negative, whatever was seen and whenever asked.
    #[test]
    fn produce_rates_are_never_negative(timeline in timeline(), later in 0..1_000_000i64, over in 1..600_000i64) {
        let e = run(&timeline);
        let now = Millis(timeline.last().unwrap().0 + later);
        for pid in e.partitions() {
            if let Some(r) = e.produce_rate(pid, now, over) {
                prop_assert!(r.is_finite() && r >= 0.0, "{r}");
            }
        }
    }
}
