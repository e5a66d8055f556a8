//! Every group type a Kafka 4 broker lists: classic groups through DescribeGroups,
//! `consumer` groups (KIP-848, Kafka 4's default) through ConsumerGroupDescribe,
//! share groups (KIP-932) listed with their type and their share-group lag from
//! DescribeShareGroupOffsets (API 90). Classic DescribeGroups answers a
//! `consumer` group as unknown; such a group must never read as missing. No broker
//! here lists group types (tansu answers API 69 only for classic groups; the mock
//! has no ListGroups), so this runs against testkit's broker on kafka-protocol's
//! exact encodings.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use streamsight_core::{Engine, EngineConfig, Millis};
use streamsight_poller::{ClusterClient, ClusterConfig, Snapshot, Tracker};
use streamsight_testkit::kafka::{WireBroker, WireCluster, WireGroup, WireMember, WirePartition};

fn estate(without_consumer_group_describe: bool) -> WireCluster {
    let part = WirePartition {
        log_start: 0,
        high_watermark: 100,
        last_stable: 100,
    };
    let offsets = |pairs: &[(i32, i64)]| {
        pairs
            .iter()
            .map(|&(p, o)| (("payments".to_owned(), p), o))
            .collect::<BTreeMap<_, _>>()
    };
    WireCluster {
        topics: BTreeMap::from([("payments".to_owned(), vec![part, part])]),
        groups: BTreeMap::from([
            (
                "legacy".to_owned(),
                WireGroup {
                    state: "Stable".into(),
                    group_type: "classic".into(),
                    offsets: offsets(&[(0, 40)]),
                    ..WireGroup::default()
                },
            ),
            (
                "orders-k4".to_owned(),
                WireGroup {
                    state: "Stable".into(),
                    group_type: "consumer".into(),
                    offsets: offsets(&[(0, 90), (1, 95)]),
                    epoch: 7,
                    members: vec![WireMember {
                        member_id: "m-1".into(),
                        client_id: "orders-app".into(),
                        host: "/10.0.0.5".into(),
                        epoch: 7,
                        assignment: vec![("payments".into(), vec![0, 1])],
                    }],
                },
            ),
            (
                "work-queue".to_owned(),
                WireGroup {
                    state: "Stable".into(),
                    group_type: "share".into(),
                    // Share-partition start offsets; -1: not read yet.
                    offsets: offsets(&[(0, 60), (1, -1)]),
                    ..WireGroup::default()
                },
            ),
        ]),
        without_consumer_group_describe,
    }
}

async fn poll(broker: &WireBroker, engine: &mut Engine, polls: i64) -> Snapshot {
    let mut config = ClusterConfig::new("k4", &broker.addr);
    config.request_timeout = Duration::from_secs(2);
    config.forget_after = Duration::from_secs(20);
    let mut tracker = Tracker::new("k4", config.forget_after);
    let mut client = ClusterClient::new(config);
    let mut last = None;
    // Over longer than `forget_after`: a group read as missing would be forgotten.
    for i in 0..polls {
        let snap = client.poll(Millis(i * 10_000), &BTreeSet::new()).await;
        let update = tracker.update(&snap);
        for r in update.durable.iter().chain(&update.transient) {
            r.apply(engine);
        }
        last = Some(snap);
    }
    last.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_group_type_is_listed_described_and_never_missing() {
    let broker = WireBroker::start(estate(false)).await;
    let mut engine = Engine::new(EngineConfig::default()).unwrap();
    let snap = poll(&broker, &mut engine, 4).await;
    assert!(snap.groups_listed && snap.errors.is_empty(), "{:?}", snap.errors);

    let legacy = snap.group("legacy").unwrap();
    assert_eq!(
        (legacy.group_type.as_deref(), legacy.state.as_deref()),
        (Some("classic"), Some("Stable"))
    );
    let k4 = snap.group("orders-k4").unwrap();
    assert_eq!(
        (k4.group_type.as_deref(), k4.state.as_deref(), k4.group_epoch, &k4.error),
        (Some("consumer"), Some("Stable"), Some(7), &None),
        "{k4:?}"
    );
    assert_eq!(k4.members.len(), 1);
    let m = &k4.members[0];
    assert_eq!(
        (m.client_id.as_str(), m.host.as_str(), m.member_epoch),
        ("orders-app", "/10.0.0.5", Some(7))
    );
    assert_eq!(m.assignment, vec![("payments".to_owned(), vec![0, 1])]);
    let owner = snap.consumer("orders-k4", "payments", 1).unwrap();
    assert_eq!(
        (owner.client_id.as_deref(), owner.group_type.as_deref()),
        (Some("orders-app"), Some("consumer"))
    );
    let share = snap.group("work-queue").unwrap();
    assert_eq!(
        (share.group_type.as_deref(), share.state.as_deref(), share.offsets.len()),
        (Some("share"), Some("Stable"), 0)
    );
    assert!(share.exists());
    let lag: Vec<_> = snap
        .share_lag()
        .into_iter()
        .map(|l| (l.group, l.partition, l.start_offset, l.end_offset, l.lag, l.upper_bound))
        .collect();
    assert_eq!(
        lag,
        vec![
            ("work-queue".to_owned(), 0, Some(60), Some(100), Some(40), true),
            ("work-queue".to_owned(), 1, None, Some(100), None, true),
        ],
        "share-group lag from the start offsets; unknown before the group read any"
    );
    assert!(
        engine.find("k4", "work-queue", "payments", 0).is_none(),
        "a share group's start offset is not a consumer commit"
    );

    for (p, lag) in [(0, 10), (1, 5)] {
        let id = engine
            .find("k4", "orders-k4", "payments", p)
            .expect("the consumer group's lag");
        assert_eq!(engine.evaluate(id, Millis(30_000)).lag_messages, Some(lag));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_group_the_classic_api_calls_unknown_is_still_there_without_api_69() {
    let broker = WireBroker::start(estate(true)).await;
    let mut engine = Engine::new(EngineConfig::default()).unwrap();
    let snap = poll(&broker, &mut engine, 4).await;
    let k4 = snap.group("orders-k4").unwrap();
    assert!(k4.exists(), "{k4:?}");
    // The state ListGroups gave, not DescribeGroups' "Dead"; the gap said.
    assert_eq!(k4.state.as_deref(), Some("Stable"), "{k4:?}");
    assert!(
        k4.error
            .as_deref()
            .is_some_and(|e| e.contains("a consumer group") && e.contains("ConsumerGroupDescribe")),
        "{k4:?}"
    );
    assert_eq!(k4.offsets.len(), 2);
    let id = engine.find("k4", "orders-k4", "payments", 0).expect("not forgotten");
    assert_eq!(engine.evaluate(id, Millis(30_000)).lag_messages, Some(10));
}
