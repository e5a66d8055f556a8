//! Open transactions: the poller reads the last stable offset beside the high
//! watermark, and the engine names a transaction that holds it. No broker on this
//! machine holds a `read_committed` reader at an open transaction (librdkafka's
//! mock answers LSO = high watermark, tansu 0.6.0 has no EndTxn), so this runs
//! against testkit's broker on kafka-protocol's exact encodings, with one open,
//! one committed and one aborted transaction.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use streamsight_core::{Engine, EngineConfig, Millis, Status};
use streamsight_poller::{ClusterClient, ClusterConfig, Tracker};
use streamsight_testkit::kafka::{WireBroker, WireCluster, WireGroup, WirePartition};

fn secs(s: i64) -> Millis {
    Millis(s * 1000)
}

fn partition(high_watermark: i64, last_stable: i64) -> WirePartition {
    WirePartition {
        log_start: 0,
        high_watermark,
        last_stable,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_transaction_blocks_read_committed_groups_and_is_named() {
    let offsets = |p0, p1, p2| {
        BTreeMap::from([
            (("payments".to_owned(), 0), p0),
            (("payments".to_owned(), 1), p1),
            (("payments".to_owned(), 2), p2),
        ])
    };
    let broker = WireBroker::start(WireCluster {
        // 0: a transaction open at 100 while other producers write on; 1: one
        // committed (its marker read, LSO = HW); 2: one aborted (the same).
        topics: BTreeMap::from([(
            "payments".to_owned(),
            vec![partition(120, 100), partition(50, 50), partition(80, 80)],
        )]),
        groups: BTreeMap::from([(
            "ledger".to_owned(),
            WireGroup {
                state: "Stable".into(),
                group_type: "classic".into(),
                offsets: offsets(100, 50, 70),
                ..WireGroup::default()
            },
        )]),
        ..WireCluster::default()
    })
    .await;
    let mut config = ClusterConfig::new("wire", &broker.addr);
    config.request_timeout = Duration::from_secs(2);
    let mut tracker = Tracker::new("wire", config.forget_after);
    let mut client = ClusterClient::new(config);
    let mut engine = Engine::new(EngineConfig::default()).unwrap();
    let mut poll = async |at: Millis, engine: &mut Engine| {
        let snap = client.poll(at, &BTreeSet::new()).await;
        assert!(snap.metadata_ok, "{:?}", snap.errors);
        assert!(snap.errors.is_empty(), "{:?}", snap.errors);
        let update = tracker.update(&snap);
        for r in update.durable.iter().chain(&update.transient) {
            r.apply(engine);
        }
        snap
    };

    let snap = poll(secs(0), &mut engine).await;
    let parts = &snap.topics[0].partitions;
    assert_eq!(
        parts.iter().map(|p| (p.end, p.stable)).collect::<Vec<_>>(),
        [(Some(120), Some(100)), (Some(50), Some(50)), (Some(80), Some(80))]
    );
    let report = |engine: &Engine, p: i32, at: i64| {
        let id = engine.find("wire", "ledger", "payments", p).unwrap();
        let r = engine.evaluate(id, secs(at));
        let why = engine.reason(id, &r, secs(at));
        (r, why)
    };
    // Held for 30 s: not yet called open (`open_transaction_after` is 60 s).
    broker.update(|c| c.topics.get_mut("payments").unwrap()[0].high_watermark = 125);
    poll(secs(30), &mut engine).await;
    let (r, _) = report(&engine, 0, 30);
    assert_eq!((r.last_stable_offset, r.open_transaction_since), (Some(100), None));
    assert_ne!(r.status, Status::Blocked);

    broker.update(|c| c.topics.get_mut("payments").unwrap()[0].high_watermark = 130);
    poll(secs(90), &mut engine).await;
    let (r, why) = report(&engine, 0, 90);
    assert_eq!(r.status, Status::Blocked, "{why}");
    assert_eq!((r.lag_messages, r.open_transaction_since), (Some(30), Some(secs(0))));
    assert!(
        why.starts_with("blocked by an open transaction: it has held offset 100 for 1 m 30 s; read_committed consumers cannot pass it while 30 messages wait"),
        "{why}"
    );
    // The committed and the aborted transaction hold nothing.
    for p in [1, 2] {
        let (r, why) = report(&engine, p, 90);
        assert_eq!(r.open_transaction_since, None, "partition {p}: {why}");
        assert!(!why.contains("transaction"), "partition {p}: {why}");
    }
    let pid = engine.partition_of(engine.find("wire", "ledger", "payments", 0).unwrap());
    assert_eq!(
        engine.evaluate_partition(pid, secs(90)).open_transaction_since,
        Some(secs(0))
    );

    // The transaction commits: the LSO reaches the high watermark, the group reads on.
    broker.update(|c| {
        c.topics.get_mut("payments").unwrap()[0] = partition(130, 130);
        c.groups.get_mut("ledger").unwrap().offsets = offsets(130, 50, 80);
    });
    poll(secs(100), &mut engine).await;
    let (r, why) = report(&engine, 0, 100);
    assert_eq!((r.status, r.open_transaction_since), (Status::Ok, None), "{why}");
}
