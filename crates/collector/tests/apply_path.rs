//! The fuzz target's property in the ordinary test run: any payload, numbers at
//! their extremes included, goes through translation and every service the
//! writer feeds, then the API's and `/metrics`' reads, without a panic (tests
//! build with debug assertions: no arithmetic may overflow).
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use streamsight_collector::ServeConfig;
use streamsight_collector::intake::{Clusters, Dates, translate};
use streamsight_core::{EngineConfig, Millis};
use streamsight_wire::dsm::payload::{
    Backlog, Bucket, ConsumeStart, ConsumedCount, Delivery, FailedSends, Payload, ProducedCount, SkippedRange,
    StatsPoint,
};
use streamsight_wire::dsm::sketch::Mapping;

const NOW: i64 = 1_800_000_000_000;

fn int() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(i64::MIN),
        Just(i64::MAX),
        Just(-1),
        Just(0),
        Just(NOW),
        Just(NOW - 60_000),
        0..1_000i64
    ]
}

fn count() -> impl Strategy<Value = u64> {
    prop_oneof![Just(u64::MAX), Just(0), 0..1_000u64]
}

fn partition() -> impl Strategy<Value = i32> {
    prop_oneof![Just(i32::MIN), Just(i32::MAX), Just(-1), 0..4i32]
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "[a-c]{1,3}", Just("x".repeat(2_000))]
}

fn backlog() -> impl Strategy<Value = Backlog> {
    let kind = prop_oneof![
        Just("type:kafka_produce"),
        Just("type:kafka_commit"),
        Just("type:kafka_high_watermark"),
        Just("type:other")
    ];
    (kind, name(), name(), partition(), int()).prop_map(|(kind, topic, group, p, value)| Backlog {
        tags: vec![
            kind.to_owned(),
            format!("topic:{topic}"),
            format!("consumer_group:{group}"),
            format!("partition:{p}"),
        ],
        value,
    })
}

fn point() -> impl Strategy<Value = StatsPoint> {
    (any::<u64>(), name(), 0.0..1e6f64).prop_map(|(hash, topic, latency)| StatsPoint {
        hash,
        parent_hash: hash / 2,
        edge_tags: vec!["direction:out".into(), format!("topic:{topic}"), "type:kafka".into()],
        pathway_latency: Mapping::default().encode(&[latency]),
        edge_latency: Mapping::default().encode(&[latency]),
        ..StatsPoint::default()
    })
}

fn payload() -> impl Strategy<Value = Payload> {
    let bucket = (
        prop_oneof![Just(0u64), Just(u64::MAX), Just((NOW as u64 - 20_000) * 1_000_000)],
        prop_oneof![Just(0u64), Just(u64::MAX), Just(10_000_000_000u64)],
        prop::collection::vec(backlog(), 0..8),
        prop::collection::vec(point(), 0..3),
    )
        .prop_map(|(start, duration, backlogs, stats)| Bucket {
            start,
            duration,
            stats,
            backlogs,
        });
    let failed = (name(), partition(), count(), int(), any::<bool>()).prop_map(
        |(topic, partition, count, window_ms, recovered)| FailedSends {
            topic,
            partition,
            error: "e".into(),
            count,
            cluster: String::new(),
            window_ms,
            trace_ids: vec!["ab".into()],
            recovered,
        },
    );
    let produced = (name(), partition(), int(), count(), int(), int()).prop_map(
        |(topic, partition, window_ms, count, first_offset, last_offset)| ProducedCount {
            topic,
            partition,
            window_ms,
            count,
            first_offset,
            last_offset,
        },
    );
    let consumed =
        (name(), partition(), int(), count(), count()).prop_map(|(group, partition, window_ms, received, failed)| {
            ConsumedCount {
                group,
                topic: "a".into(),
                partition,
                window_ms,
                received,
                failed,
                dead_lettered: failed,
                trace_ids: vec![],
            }
        });
    let skipped = (partition(), int(), int()).prop_map(|(partition, first_offset, last_offset)| SkippedRange {
        group: "g".into(),
        topic: "a".into(),
        partition,
        first_offset,
        last_offset,
        at_ms: NOW,
    });
    let started = (partition(), int(), int()).prop_map(|(partition, first_offset, at_ms)| ConsumeStart {
        group: "g".into(),
        topic: "a".into(),
        partition,
        first_offset,
        at_ms,
    });
    (
        prop::collection::vec(bucket, 0..3),
        prop::collection::vec(failed, 0..3),
        prop::collection::vec(produced, 0..3),
        prop::collection::vec(consumed, 0..3),
        prop::collection::vec(skipped, 0..2),
        prop::collection::vec(started, 0..2),
    )
        .prop_map(|(stats, failed_sends, produced, consumed, skipped, started)| Payload {
            service: "svc".into(),
            stats,
            failed_sends,
            delivery: Delivery {
                cluster: String::new(),
                produced,
                consumed,
                skipped,
                started,
            },
            ..Payload::default()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn any_payload_goes_through_every_service_without_a_panic(payloads in prop::collection::vec(payload(), 1..4)) {
        let mut engine = EngineConfig::default();
        engine.cardinality.max_topics_per_cluster = 8;
        engine.cardinality.max_groups_per_cluster = 8;
        let shared = streamsight_collector::node(ServeConfig::default(), engine).unwrap();
        let dates = Dates {
            received: Millis(NOW),
            oldest: Millis(NOW - 7 * 86_400_000),
            newest: Millis(NOW + 600_000),
        };
        for p in &payloads {
            let translated = translate(p, dates, &Clusters::none("default"));
            shared.apply(&translated.records);
        }
        for later in [0, 3_600_000, i64::MAX - NOW] {
            let now = Millis(NOW.saturating_add(later));
            shared.deliveries.reconcile(now, &shared.lag);
            let metrics = streamsight_collector::metrics::render(&shared, now, streamsight_collector::config::Granularity::Partition);
            prop_assert!(!metrics.contains("partition=\"-1\""));
        }
        let _ = shared.pathways.graph(i64::MIN, i64::MAX);
    }
}
