//! Open transactions: the poller reads the last stable offset beside the high
//! watermark, and the engine names a transaction that holds it. On Apache
//! Kafka with real transactions and a real `read_committed` reader; and on
//! testkit's broker on kafka-protocol's exact encodings, whose times a test
//! sets (librdkafka's mock answers LSO = high watermark, tansu 0.6.0 has no
//! EndTxn): each with one open, one committed and one aborted transaction.
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

/// The same on Apache Kafka, with real transactions (librdkafka's
/// transactional producer) and a real `read_committed` consumer: one
/// transaction left open on partition 0 while a plain producer writes on, one
/// committed on 1, one aborted on 2. The reader stops at the open one's first
/// offset (the LSO) and is `blocked`; the committed and aborted ones' control
/// markers are never lag; once the transaction commits the reader passes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_transaction_on_apache_kafka_blocks_a_read_committed_group() {
    use rdkafka::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use streamsight_testkit::ApacheKafka;
    use streamsight_testkit::apache_kafka::unique;

    let kafka = ApacheKafka::shared();
    let b = kafka.bootstrap.as_str();
    let (topic, group) = (unique("payments"), unique("ledger"));
    let t = Duration::from_secs(30);
    let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", b).create().unwrap();
    let new = rdkafka::admin::NewTopic::new(&topic, 3, rdkafka::admin::TopicReplication::Fixed(1));
    let opts = rdkafka::admin::AdminOptions::new().operation_timeout(Some(t));
    for r in admin.create_topics([&new], &opts).await.unwrap() {
        r.unwrap();
    }
    let plain: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", b)
        .set("linger.ms", "0")
        .create()
        .unwrap();
    let send = |p: &BaseProducer, partition: i32, n: usize| {
        for i in 0..n {
            let value = format!("record {i}");
            p.send(BaseRecord::<(), _>::to(&topic).partition(partition).payload(&value))
                .unwrap();
        }
        p.flush(t).unwrap();
    };
    let open_id = unique("open");
    let transactional = |id: &str| -> BaseProducer {
        let id = if id == "open" { open_id.clone() } else { unique(id) };
        let p: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", b)
            .set("transactional.id", id)
            .set("transaction.timeout.ms", "600000")
            .create()
            .unwrap();
        p.init_transactions(t).unwrap();
        p.begin_transaction().unwrap();
        p
    };
    // 0: 10 plain records, a transaction of 5 left open at offset 10, 20 plain.
    send(&plain, 0, 10);
    let open = transactional("open");
    send(&open, 0, 5);
    send(&plain, 0, 20);
    // 1: 10 records committed (their marker at 10); 2: 10 aborted (the same).
    let committed = transactional("committed");
    send(&committed, 1, 10);
    committed.commit_transaction(t).unwrap();
    let aborted = transactional("aborted");
    send(&aborted, 2, 10);
    aborted.abort_transaction(t).unwrap();

    // A read_committed member reads what it may and commits where it stands.
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", b)
        .set("group.id", &group)
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    reader.subscribe(&[&topic]).unwrap();
    let read_all = |want: usize| {
        let (mut read, deadline) = (0, std::time::Instant::now() + Duration::from_secs(60));
        while read < want {
            assert!(std::time::Instant::now() < deadline, "read {read} of {want}");
            if let Some(Ok(_)) = reader.poll(Duration::from_millis(200)) {
                read += 1;
            }
        }
        reader.commit_consumer_state(CommitMode::Sync).unwrap();
    };
    // 10 before the open transaction on 0, the committed 10 on 1, none on 2.
    read_all(20);

    let mut config = ClusterConfig::new("apache-kafka", b);
    config.request_timeout = Duration::from_secs(10);
    let mut tracker = Tracker::new("apache-kafka", config.forget_after);
    let mut client = ClusterClient::new(config);
    let mut engine = Engine::new(EngineConfig::default()).unwrap();
    let named = BTreeSet::from([group.clone()]);
    let mut poll = async |at: Millis, engine: &mut Engine| {
        let snap = client.poll(at, &named).await;
        assert!(snap.metadata_ok, "{:?}", snap.errors);
        let update = tracker.update(&snap);
        for r in update.durable.iter().chain(&update.transient) {
            r.apply(engine);
        }
        snap
    };
    let snap = poll(secs(0), &mut engine).await;
    let parts = &snap.topics.iter().find(|x| x.name == topic).unwrap().partitions;
    assert_eq!(
        parts.iter().map(|p| (p.end, p.stable)).collect::<Vec<_>>(),
        [(Some(35), Some(10)), (Some(11), Some(11)), (Some(11), Some(11))],
        "high watermarks and last stable offsets as Apache Kafka answers them"
    );
    let report = |engine: &Engine, p: i32, at: i64| {
        let id = engine.find("apache-kafka", &group, &topic, p).unwrap();
        let r = engine.evaluate(id, secs(at));
        let why = engine.reason(id, &r, secs(at));
        (r, why)
    };
    poll(secs(90), &mut engine).await;
    let (r, why) = report(&engine, 0, 90);
    assert_eq!(
        (r.status, r.committed_offset, r.last_stable_offset, r.lag_messages),
        (Status::Blocked, Some(10), Some(10), Some(25)),
        "{why}"
    );
    // The holder as Kafka's own kafka-transactions.sh describes it.
    let (ok, out, err) = streamsight_testkit::apache_kafka::kafka_tool(
        "org.apache.kafka.tools.TransactionsCommand",
        &["--bootstrap-server", b, "describe", "--transactional-id", &open_id],
    );
    assert!(ok, "{out}{err}");
    let row = streamsight_testkit::apache_kafka::tool_table(&out, "CoordinatorId")
        .pop()
        .unwrap_or_else(|| panic!("{out}"));
    let column = |name: &str| row.get(name).map(String::as_str).unwrap_or_else(|| panic!("{out}"));
    let held = r.open_transaction.clone().expect("the holder is named");
    assert_eq!(
        (
            held.transactional_id.as_deref(),
            held.producer_id.to_string(),
            held.producer_epoch.to_string(),
            held.first_offset,
            held.timeout_ms.map(|t| t.to_string()),
        ),
        (
            Some(open_id.as_str()),
            column("ProducerId").to_owned(),
            column("ProducerEpoch").to_owned(),
            10,
            Some(column("TransactionTimeoutMs").to_owned()),
        ),
        "{out}"
    );
    assert!(
        why.starts_with(&format!(
            "blocked by an open transaction: transactional id {open_id:?} (producer {}, epoch {}) has held offset 10",
            held.producer_id, held.producer_epoch
        )),
        "{why}"
    );
    // The committed and the aborted transaction's markers are never lag.
    for p in [1, 2] {
        let (r, why) = report(&engine, p, 90);
        assert_eq!(
            (r.status, r.lag_messages, r.open_transaction_since),
            (Status::Ok, Some(0), None),
            "partition {p}: {r:?} {why}"
        );
    }

    // The transaction commits: the reader passes it and catches up. The
    // first poll after sees the commit one short of the end (the marker);
    // the record there is read and found a marker by the next.
    open.commit_transaction(t).unwrap();
    read_all(25);
    poll(secs(100), &mut engine).await;
    poll(secs(101), &mut engine).await;
    let (r, why) = report(&engine, 0, 101);
    assert_eq!(
        (
            r.status,
            r.lag_messages,
            r.open_transaction_since,
            r.open_transaction.clone()
        ),
        (Status::Ok, Some(0), None, None),
        "{r:?} {why}"
    );
}
