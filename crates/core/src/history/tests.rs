use super::*;

fn params(capacity: usize) -> HistoryParams {
    HistoryParams {
        capacity,
        min_resolution_ms: 1000,
        initial_precision: 0.01,
        compaction: Compaction::ByError,
    }
}

fn by_age(capacity: usize) -> HistoryParams {
    HistoryParams {
        compaction: Compaction::ByAge,
        ..params(capacity)
    }
}

const BOTH: [Compaction; 2] = [Compaction::ByError, Compaction::ByAge];

fn history(points: &[(i64, i64)], p: &HistoryParams) -> OffsetHistory {
    let mut h = OffsetHistory::new(p);
    for &(end, at) in points {
        h.insert(end, Millis(at), Sighting::Exact, p);
    }
    h
}

fn interpolated(h: &OffsetHistory, offset: i64) -> f64 {
    match h.produce_time(offset) {
        Some(ProduceTime::Interpolated(t)) => t,
        other => panic!("expected an interpolated time, got {other:?}"),
    }
}

#[test]
fn interpolates_between_sightings() {
    let p = params(64);
    let h = history(&[(0, 0), (100, 10_000)], &p);
    assert_eq!(interpolated(&h, 49), 5_000.0);
    assert_eq!(interpolated(&h, 99), 10_000.0);
    assert_eq!(h.produce_time(100), None);
}

#[test]
fn records_older_than_the_history_are_a_lower_bound() {
    let p = params(64);
    let h = history(&[(100, 5_000), (200, 10_000)], &p);
    assert_eq!(h.produce_time(99), Some(ProduceTime::NotAfter(Millis(5_000))));
    assert_eq!(h.produce_time(3), Some(ProduceTime::NotAfter(Millis(5_000))));
}

#[test]
fn plateau_keeps_first_and_last_sighting() {
    let p = params(64);
    let h = history(
        &[
            (100, 0),
            (100, 10_000),
            (100, 20_000),
            (100, 3_590_000),
            (102, 3_600_000),
        ],
        &p,
    );
    assert_eq!(
        h.points(),
        &[
            Point {
                end: 100,
                at: Millis(0)
            },
            Point {
                end: 100,
                at: Millis(3_590_000)
            },
            Point {
                end: 102,
                at: Millis(3_600_000)
            },
        ]
    );
    // The idle hour is not smeared over the two records produced at its end.
    assert_eq!(interpolated(&h, 100), 3_595_000.0);
}

#[test]
fn an_ack_never_claims_the_end_stayed_put() {
    let p = params(64);
    let mut h = OffsetHistory::new(&p);
    h.insert(100, Millis(0), Sighting::AtLeast, &p);
    assert!(!h.insert(100, Millis(5_000), Sighting::AtLeast, &p));
    assert!(h.insert(100, Millis(5_000), Sighting::Exact, &p));
    assert_eq!(h.len(), 2);
}

#[test]
fn lower_or_repeated_sightings_change_nothing() {
    let p = params(64);
    let mut h = history(&[(10, 0), (20, 1_000)], &p);
    assert!(!h.insert(15, Millis(2_000), Sighting::Exact, &p));
    assert!(!h.insert(20, Millis(1_000), Sighting::Exact, &p));
    assert_eq!(h.end(), Some(20));
    assert_eq!(h.len(), 2);
}

#[test]
fn out_of_order_sighting_fills_a_gap() {
    let p = params(64);
    let mut h = history(&[(0, 0), (100, 10_000)], &p);
    assert!(h.insert(90, Millis(2_000), Sighting::Exact, &p));
    assert_eq!(interpolated(&h, 44), 1_000.0);
}

#[test]
fn out_of_order_sighting_above_later_ones_raises_them() {
    let p = params(64);
    let mut h = history(&[(0, 0), (50, 5_000), (60, 6_000), (200, 10_000)], &p);
    assert!(h.insert(100, Millis(4_000), Sighting::Exact, &p));
    let ends: Vec<i64> = h.points().iter().map(|q| q.end).collect();
    assert_eq!(ends, vec![0, 100, 100, 200]);
    assert_eq!(h.points()[2].at, Millis(6_000));
}

#[test]
fn out_of_order_sighting_below_an_earlier_one_is_stale() {
    let p = params(64);
    let mut h = history(&[(0, 0), (100, 1_000), (200, 10_000)], &p);
    assert!(!h.insert(50, Millis(2_000), Sighting::Exact, &p));
    assert_eq!(h.len(), 3);
}

#[test]
fn compaction_respects_capacity_and_keeps_both_ends() {
    for compaction in BOTH {
        compaction_respects_capacity_and_keeps_both_ends_with(compaction);
    }
}

fn compaction_respects_capacity_and_keeps_both_ends_with(compaction: Compaction) {
    let p = HistoryParams {
        compaction,
        ..params(32)
    };
    let mut h = OffsetHistory::new(&p);
    for i in 0..10_000 {
        h.insert(i * 7, Millis(i * 1_000), Sighting::AtLeast, &p);
        assert!(h.len() <= p.capacity);
    }
    assert_eq!(h.oldest(), Some(Point { end: 0, at: Millis(0) }));
    assert_eq!(
        h.newest(),
        Some(Point {
            end: 9_999 * 7,
            at: Millis(9_999_000)
        })
    );
    assert!(h.heap_bytes() <= p.capacity * OffsetHistory::point_bytes(compaction));
}

#[test]
fn compaction_by_age_keeps_recent_points_denser_than_old_ones() {
    let p = by_age(64);
    let mut h = OffsetHistory::new(&p);
    for i in 0..100_000 {
        h.insert(i, Millis(i * 1_000), Sighting::AtLeast, &p);
    }
    let pts = h.points();
    let n = pts.len();
    let recent_gap = pts[n - 1].at.since(pts[n - 2].at);
    let old_gap = pts[2].at.since(pts[1].at);
    assert!(recent_gap < old_gap, "recent gap {recent_gap} ms, old gap {old_gap} ms");
}

#[test]
fn linear_production_interpolates_exactly_after_compaction() {
    for compaction in BOTH {
        let p = HistoryParams {
            compaction,
            ..params(16)
        };
        let mut h = OffsetHistory::new(&p);
        for o in 0..=1000 {
            h.insert(o + 1, Millis(o * 100), Sighting::AtLeast, &p);
        }
        assert!(h.len() <= 16);
        assert!((interpolated(&h, 500) - 50_000.0).abs() < 1e-6, "{compaction:?}");
    }
}

/// Three steady rates with an idle stretch between two of them, over a long time.
fn bends() -> Vec<(i64, i64)> {
    let mut acks = Vec::new();
    let (mut end, mut t) = (0i64, 0i64);
    // 10/s for an hour, idle 10 min, 100/s for an hour, then 1 every 5 s for an hour.
    for (rate_per_s, every_ms, secs) in [
        (10, 1_000, 3_600),
        (0, 1_000, 600),
        (100, 1_000, 3_600),
        (1, 5_000, 3_600),
    ] {
        let mut elapsed = 0;
        while elapsed < secs * 1000 {
            t += every_ms;
            elapsed += every_ms;
            if rate_per_s > 0 {
                end += rate_per_s * every_ms / 1000;
                acks.push((end, t));
            }
        }
    }
    acks
}

#[test]
fn steady_stretches_collapse_to_their_ends_and_bends_stay() {
    let p = params(16);
    let mut h = OffsetHistory::new(&p);
    for &(end, at) in &bends() {
        h.insert(end, Millis(at), Sighting::AtLeast, &p);
    }
    let kept: Vec<(i64, i64)> = h.points().iter().map(|q| (q.end, q.at.0)).collect();
    // The last ack before the idle stretch and the first after it, and the rate
    // changes, are all still there, three hours later.
    for bend in [(36_000, 3_600_000), (36_100, 4_201_000), (396_000, 7_800_000)] {
        assert!(kept.contains(&bend), "{bend:?} dropped: {kept:?}");
    }
    // Every produce time is exact: the curve is linear between the bends.
    for &(end, at) in &bends()[1..] {
        let t = interpolated(&h, end - 1);
        assert!(
            (t - at as f64).abs() < 1e-6,
            "offset {}: {t} ms, acked at {at} ms",
            end - 1
        );
    }
    assert_eq!(h.precision(), 0.01, "the precision never had to be relaxed");
}

#[test]
fn compaction_by_age_smears_old_bends() {
    let (p, full) = (by_age(16), params(1 << 20));
    let (mut h, mut f) = (OffsetHistory::new(&p), OffsetHistory::new(&full));
    for &(end, at) in &bends() {
        h.insert(end, Millis(at), Sighting::AtLeast, &p);
        f.insert(end, Millis(at), Sighting::AtLeast, &full);
    }
    // The last record before the idle ten minutes, hours later: minutes off by age.
    let off = (interpolated(&h, 35_999) - interpolated(&f, 35_999)).abs();
    assert!(off > 60_000.0, "{off} ms");
}

#[test]
fn error_bounds_cover_the_full_history() {
    let (small, full) = (params(12), params(1 << 20));
    let (mut h, mut f) = (OffsetHistory::new(&small), OffsetHistory::new(&full));
    let mut x: u64 = 42;
    let (mut end, mut t) = (0i64, 0i64);
    for _ in 0..5_000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        t += 1 + (x >> 40) as i64 % 20_000;
        end += [0, 1, 3, 50, 2_000][(x >> 20) as usize % 5];
        h.insert(end, Millis(t), Sighting::AtLeast, &small);
        f.insert(end, Millis(t), Sighting::AtLeast, &full);
    }
    for offset in (0..end).step_by(97) {
        let (Some(ProduceTime::Interpolated(a)), Some(ProduceTime::Interpolated(b))) =
            (h.produce_time(offset), f.produce_time(offset))
        else {
            continue;
        };
        let bound = h.error_bound_ms(offset).unwrap();
        assert!(
            (a - b).abs() <= bound + 1e-6,
            "offset {offset}: {a} vs {b}, bound {bound}"
        );
    }
}

#[test]
fn end_at_looks_back_in_time() {
    let p = params(64);
    let h = history(&[(10, 1_000), (20, 2_000)], &p);
    assert_eq!(h.end_at(Millis(500)), None);
    assert_eq!(h.end_at(Millis(1_500)), Some(10));
    assert_eq!(h.end_at(Millis(9_000)), Some(20));
}

#[test]
fn end_interpolated_reads_the_line_between_sightings_and_holds_after_the_newest() {
    let p = params(64);
    let h = history(&[(10, 1_000), (20, 2_000)], &p);
    assert_eq!(h.end_interpolated(Millis(500)), None);
    assert_eq!(h.end_interpolated(Millis(1_000)), Some(10.0));
    assert_eq!(h.end_interpolated(Millis(1_250)), Some(12.5));
    assert_eq!(h.end_interpolated(Millis(2_000)), Some(20.0));
    assert_eq!(h.end_interpolated(Millis(9_000)), Some(20.0));
}
