//! The poller against real brokers, each body run on Apache Kafka and on
//! tansu ([`streamsight_testkit::on_every_broker`]): group listing and
//! describing (which librdkafka's mock lacks), an empty group still reported,
//! a deleted group and a deleted topic forgotten after expiry, rebalances
//! seen between polls, the record times at a lagging commit.
//!
//! tansu's `memory://` engine is used: it describes and deletes groups (its
//! `sqlite://` engine drops the connection on DescribeGroups). Its quirk of
//! answering "latest" with the last batch's base offset + 1 is sidestepped by
//! sending one record per batch (reference.md §6). SCRAM runs on tansu only
//! here (its users made on an open broker, restarted with authentication).
#![allow(clippy::unwrap_used)]

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message};
use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use streamsight_core::{Engine, EngineConfig, Millis, Status};
use streamsight_poller::{ClusterClient, ClusterConfig, Tracker};
use streamsight_testkit::{BrokerKind, Tansu, TestBroker, free_port, on_every_broker, tansu_binary};

fn secs(s: i64) -> Millis {
    Millis(s * 1000)
}

on_every_broker!(
    a_recreated_topic_and_added_partitions_are_neither_rewind_nor_loss,
    groups_are_listed_described_and_forgotten_when_deleted,
    rebalances_and_departures_are_seen_between_polls,
    record_times_at_a_lagging_commit_are_read,
);

async fn groups_are_listed_described_and_forgotten_when_deleted(broker: TestBroker) {
    let (orders, gone, billing) = (broker.name("orders"), broker.name("gone"), broker.name("billing"));
    let (orders, gone, billing) = (orders.as_str(), gone.as_str(), billing.as_str());
    let config = |c: &mut ClientConfig| c.set("bootstrap.servers", &broker.bootstrap).clone();
    let admin: AdminClient<DefaultClientContext> = config(&mut ClientConfig::new()).create().unwrap();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let topics = [
        NewTopic::new(orders, 2, TopicReplication::Fixed(1)),
        NewTopic::new(gone, 1, TopicReplication::Fixed(1)),
    ];
    for r in admin.create_topics(&topics, &opts).await.unwrap() {
        r.unwrap();
    }
    let producer: FutureProducer = config(&mut ClientConfig::new()).set("linger.ms", "0").create().unwrap();
    for i in 0..10 {
        let topic = if i == 9 { gone } else { orders };
        let record = FutureRecord::<(), _>::to(topic)
            .partition(if i == 9 { 0 } else { i % 2 })
            .payload("x");
        producer.send(record, Duration::from_secs(5)).await.unwrap();
    }

    let consumer: StreamConsumer = config(&mut ClientConfig::new())
        .set("group.id", billing)
        .set("client.id", "billing-1")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[orders, gone]).unwrap();
    let mut read = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while read < 4 {
        assert!(Instant::now() < deadline, "the consumer read only {read} records");
        if let Ok(Ok(m)) = tokio::time::timeout(Duration::from_secs(1), consumer.recv()).await
            && m.topic() == orders
        {
            read += 1;
        }
    }
    consumer.commit_consumer_state(CommitMode::Sync).unwrap();

    // No group named in the config: the brokers list them.
    let mut cluster = ClusterConfig::new(broker.label(), &broker.bootstrap);
    cluster.forget_after = Duration::from_secs(60);
    let mut client = ClusterClient::new(cluster);
    let mut tracker = Tracker::new(broker.label(), Duration::from_secs(60));
    let mut engine = Engine::new(EngineConfig::default()).unwrap();
    let none = BTreeSet::new();
    let mut poll = async |at: Millis| {
        let snap = client.poll(at, &none).await;
        let update = tracker.update(&snap);
        for r in update.durable.iter().chain(&update.transient) {
            r.apply(&mut engine);
        }
        (
            snap,
            engine
                .reports(at, |_| true)
                .into_iter()
                .map(|(n, r)| n.row(r))
                .collect::<Vec<_>>(),
        )
    };

    let (snap, rows) = poll(secs(100)).await;
    assert!(snap.groups_listed, "{:?}", snap.errors);
    let described = snap.group(billing).expect("billing listed");
    assert_eq!(described.state.as_deref(), Some("Stable"), "{described:?}");
    assert_eq!(described.members.len(), 1);
    // ListGroups v5 on a real broker: the group's type.
    assert_eq!(described.group_type.as_deref(), Some("classic"), "{described:?}");
    // tansu leaves client_id and the member's assignment empty, where Apache
    // Kafka fills them.
    assert!(described.members[0].member_id.starts_with("billing-1"));
    if broker.kind == BrokerKind::ApacheKafka {
        let m = &described.members[0];
        assert_eq!(m.client_id, "billing-1", "{m:?}");
        let mut assigned: Vec<_> = m
            .assignment
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (t.as_str(), *p)))
            .collect();
        assigned.sort_unstable();
        let mut want = vec![(orders, 0), (orders, 1), (gone, 0)];
        want.sort_unstable();
        assert_eq!(assigned, want, "{m:?}");
    }
    // Partition 0 holds 5 records, partition 1 holds 4; the lag is what the
    // group's commits leave of them. A partition the member holds and never
    // committed on (Apache Kafka names its assignment) is a row of unknown
    // lag, never left out.
    let (committed, uncommitted): (Vec<_>, Vec<_>) = rows
        .iter()
        .filter(|r| r.group == billing)
        .partition(|r| r.report.committed_offset.is_some());
    for r in &uncommitted {
        assert_eq!(
            (r.report.lag_messages, r.report.status),
            (None, Status::Stale),
            "{r:#?}"
        );
    }
    let committed: Vec<_> = committed.into_iter().filter(|r| r.topic == orders).collect();
    assert!(!committed.is_empty(), "{rows:#?}");
    for r in committed {
        let end = [5, 4][r.partition as usize];
        let c = r.report.committed_offset.unwrap();
        assert_eq!(
            (r.report.end_offset, r.report.lag_messages),
            (Some(end), Some(end - c)),
            "{r:#?}"
        );
    }

    // The consumer leaves: the group is Empty, and still reported.
    drop(consumer);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut t = 110;
    loop {
        let (snap, rows) = poll(secs(t)).await;
        let g = snap.group(billing).expect("an empty group is still reported");
        if g.state.as_deref() == Some("Empty") {
            assert!(g.members.is_empty());
            assert!(rows.iter().any(|r| r.group == billing));
            break;
        }
        assert!(Instant::now() < deadline, "billing never became Empty: {g:?}");
        t += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The topic is deleted: stale at once, forgotten after the expiry.
    for r in admin.delete_topics(&[gone], &opts).await.unwrap() {
        r.unwrap();
    }
    // Apache Kafka's metadata may list it for a moment after the delete answers.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut t = 200;
    let rows = loop {
        let (snap, rows) = poll(secs(t)).await;
        if snap.topics.iter().all(|x| x.name != gone) {
            break rows;
        }
        assert!(Instant::now() < deadline, "the deleted topic stayed listed");
        t += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(t < 250, "{t}");
    assert!(
        rows.iter()
            .filter(|r| r.topic == gone)
            .all(|r| r.report.status != Status::Ok)
    );
    let (_, rows) = poll(secs(260)).await;
    assert!(rows.iter().all(|r| r.topic != gone), "{rows:#?}");
    assert!(engine_topics(&rows).contains(orders));

    // The group is deleted: forgotten after the expiry, no ghost rows.
    for r in admin.delete_groups(&[billing], &opts).await.unwrap() {
        r.unwrap();
    }
    let (snap, rows) = poll(secs(300)).await;
    assert!(snap.group(billing).is_none());
    assert!(rows.iter().any(|r| r.group == billing), "kept until the expiry");
    let (_, rows) = poll(secs(360)).await;
    assert!(rows.iter().all(|r| r.group != billing), "{rows:#?}");
}

fn engine_topics(rows: &[streamsight_core::LagRow]) -> BTreeSet<&str> {
    rows.iter().map(|r| r.topic.as_str()).collect()
}

/// SCRAM against a broker that requires it: tansu's users are created on an
/// open broker, which then restarts with `--authentication` on the same store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_scram_authenticates_and_a_wrong_password_is_a_clear_error() {
    use streamsight_poller::SecurityProtocol;
    use streamsight_poller::client::sasl::{Mechanism, SaslConfig};

    let dir = std::env::temp_dir().join(format!("streamsight-tansu-sasl-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let open = Tansu::start_on(port, "sqlite://auth.db", &dir, &[]);
    for (user, mechanism) in [("alice", "scram512"), ("bob", "scram256")] {
        let status = Command::new(tansu_binary())
            .args(["user", "create", "--broker", &format!("tcp://{}", open.bootstrap)])
            .args(["--mechanism", mechanism, user, "secret"])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "tansu user create {user}");
    }
    drop(open);
    let secured = Tansu::start_on(port, "sqlite://auth.db", &dir, &["--authentication"]);

    let poll = async |sasl: Option<SaslConfig>| {
        let mut config = ClusterConfig::new("secured", &secured.bootstrap);
        config.request_timeout = Duration::from_secs(3);
        if sasl.is_some() {
            config.security_protocol = SecurityProtocol::SaslPlaintext;
        }
        config.sasl = sasl;
        config.validate().unwrap();
        ClusterClient::new(config).poll(secs(1), &BTreeSet::new()).await
    };
    let creds = |mechanism, username: &str, password: &str| {
        Some(SaslConfig {
            mechanism,
            username: username.into(),
            password: password.into(),
        })
    };
    for (mechanism, user) in [(Mechanism::ScramSha512, "alice"), (Mechanism::ScramSha256, "bob")] {
        let snap = poll(creds(mechanism, user, "secret")).await;
        assert!(snap.metadata_ok, "{mechanism:?}: {:?}", snap.errors);
    }
    let wrong = poll(creds(Mechanism::ScramSha512, "alice", "guess")).await;
    assert!(!wrong.metadata_ok);
    assert!(
        wrong.errors.iter().any(|e| e.contains("authentication failed")),
        "{:?}",
        wrong.errors
    );
    assert!(
        wrong.errors.iter().all(|e| !e.contains("guess")),
        "the password is never shown"
    );
    assert!(!poll(None).await.metadata_ok, "the broker requires authentication");
    drop(secured);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Rebalances on a real broker: real consumers join a group and one leaves; the
/// polls between see the group's members change, and the membership counts the
/// rebalances and names who left.
async fn rebalances_and_departures_are_seen_between_polls(broker: TestBroker) {
    use rdkafka::consumer::BaseConsumer;
    let (jobs, workers) = (broker.name("jobs"), broker.name("workers"));
    let (jobs, workers) = (jobs.as_str(), workers.as_str());
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &broker.bootstrap)
        .create()
        .unwrap();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    for r in admin
        .create_topics(&[NewTopic::new(jobs, 2, TopicReplication::Fixed(1))], &opts)
        .await
        .unwrap()
    {
        r.unwrap();
    }
    let member = |client: &str| -> BaseConsumer {
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &broker.bootstrap)
            .set("group.id", workers)
            .set("client.id", client)
            .set("session.timeout.ms", "6000")
            .set("heartbeat.interval.ms", "500")
            .create()
            .unwrap();
        c.subscribe(&[jobs]).unwrap();
        c
    };
    let mut client = ClusterClient::new(ClusterConfig::new(broker.label(), &broker.bootstrap));
    let mut membership = streamsight_poller::Membership::default();
    let mut t = 0;
    // Polls (the cluster's and the consumers') until `done` holds of the group.
    let mut until = async |consumers: &[&BaseConsumer],
                           what: &str,
                           done: &dyn Fn(&streamsight_poller::snapshot::GroupSnapshot) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            for c in consumers {
                let _ = c.poll(Duration::from_millis(100));
            }
            t += 1;
            let named = BTreeSet::from([workers.to_owned()]);
            let snap = client.poll(Millis(t * 1000), &named).await;
            membership.observe(&snap);
            if snap.group(workers).is_some_and(done) {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: {:?}", snap.group(workers));
        }
    };
    let a = member("worker-a");
    until(&[&a], "one member, stable", &|g| {
        g.members.len() == 1 && g.state.as_deref() == Some("Stable")
    })
    .await;
    let b = member("worker-b");
    until(&[&a, &b], "two members, stable", &|g| {
        g.members.len() == 2 && g.state.as_deref() == Some("Stable")
    })
    .await;
    drop(b);
    until(&[&a], "b gone", &|g| {
        g.members.len() == 1 && g.state.as_deref() == Some("Stable")
    })
    .await;
    let r = membership.group(workers).unwrap().at(Millis(t * 1000));
    assert!(r.last_hour >= 2, "joins and the departure rebalance: {r:?}");
    assert!(
        r.departures
            .iter()
            .any(|d| d.client_id == "worker-b" || d.client_id.is_empty()),
        "{r:?}"
    );
    assert!(r.cause.is_some(), "{r:?}");
    // Apache Kafka answers PreparingRebalance or CompletingRebalance while the
    // group rebalances, tansu "Unknown": not stable either way.
    assert!(r.not_stable_ms > 0, "{r:?}");
    assert!(!r.timeline.is_empty());
}

/// The record at a lagging group's commit is read from each broker as from
/// librdkafka's mock (Fetch v11: tansu's v12 answers carry a tagged field
/// kafka-protocol refuses, which once cost every exact lag second here).
async fn record_times_at_a_lagging_commit_are_read(broker: TestBroker) {
    let (t, g) = (broker.name("t"), broker.name("g"));
    let (t, g) = (t.as_str(), g.as_str());
    let config = |c: &mut ClientConfig| c.set("bootstrap.servers", &broker.bootstrap).clone();
    let admin: AdminClient<DefaultClientContext> = config(&mut ClientConfig::new()).create().unwrap();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    for r in admin
        .create_topics(&[NewTopic::new(t, 1, TopicReplication::Fixed(1))], &opts)
        .await
        .unwrap()
    {
        r.unwrap();
    }
    let producer: FutureProducer = config(&mut ClientConfig::new()).set("linger.ms", "0").create().unwrap();
    for _ in 0..5 {
        let record = FutureRecord::<(), _>::to(t).partition(0).payload("x");
        producer.send(record, Duration::from_secs(5)).await.unwrap();
    }
    let consumer: rdkafka::consumer::BaseConsumer =
        config(&mut ClientConfig::new()).set("group.id", g).create().unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(t, 0, rdkafka::Offset::Offset(2)).unwrap();
    consumer.commit(&tpl, CommitMode::Sync).unwrap();
    let mut client = ClusterClient::new(ClusterConfig::new(broker.label(), &broker.bootstrap));
    let snap = client.poll(Millis(1), &BTreeSet::from([g.to_owned()])).await;
    assert!(snap.errors.is_empty(), "{:?}", snap.errors);
    assert!(
        snap.batches
            .iter()
            .any(|b| b.topic == t && b.base_offset <= 2 && 2 <= b.last_offset),
        "{:?}",
        snap.batches
    );
    // Asked for directly (what a reset's dry run does for its time span).
    let direct = client.batch_times(&snap, &[(t.into(), 0, 2), (t.into(), 0, 4)]).await;
    assert_eq!(direct.iter().map(|b| b.base_offset).collect::<Vec<_>>(), [2, 4]);
}

/// A topic deleted and created again under the same name (a new topic id)
/// while a group is behind on it, then given more partitions: the old
/// positions are forgotten as a reset of the topic, never read as the
/// group's rewind or as data lost; the group's new commits are judged on
/// the new topic; added partitions appear with their own ends.
async fn a_recreated_topic_and_added_partitions_are_neither_rewind_nor_loss(broker: TestBroker) {
    let (topic, group) = (broker.name("events"), broker.name("loader"));
    let (topic, group) = (topic.as_str(), group.as_str());
    let config = |c: &mut ClientConfig| c.set("bootstrap.servers", &broker.bootstrap).clone();
    let admin: AdminClient<DefaultClientContext> = config(&mut ClientConfig::new()).create().unwrap();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let producer: FutureProducer = config(&mut ClientConfig::new()).set("linger.ms", "0").create().unwrap();
    let fill = async |partitions: i32, per: i32| {
        for p in 0..partitions {
            for _ in 0..per {
                let record = FutureRecord::<(), _>::to(topic).partition(p).payload("x");
                producer.send(record, Duration::from_secs(10)).await.unwrap();
            }
        }
    };
    let commit = |offsets: &[(i32, i64)]| {
        let c: rdkafka::consumer::BaseConsumer = config(&mut ClientConfig::new())
            .set("group.id", group)
            .create()
            .unwrap();
        let mut tpl = rdkafka::TopicPartitionList::new();
        for &(p, o) in offsets {
            tpl.add_partition_offset(topic, p, rdkafka::Offset::Offset(o)).unwrap();
        }
        c.commit(&tpl, CommitMode::Sync).unwrap();
    };
    for r in admin
        .create_topics(&[NewTopic::new(topic, 2, TopicReplication::Fixed(1))], &opts)
        .await
        .unwrap()
    {
        r.unwrap();
    }
    fill(2, 10).await;
    commit(&[(0, 8), (1, 8)]);

    let mut client = ClusterClient::new(ClusterConfig::new(broker.label(), &broker.bootstrap));
    let mut tracker = Tracker::new(broker.label(), Duration::from_secs(60));
    let mut engine = Engine::new(EngineConfig::default()).unwrap();
    let named = BTreeSet::from([group.to_owned()]);
    let mut poll = async |at: Millis| {
        let snap = client.poll(at, &named).await;
        let update = tracker.update(&snap);
        for r in update.durable.iter().chain(&update.transient) {
            r.apply(&mut engine);
        }
        let rows: Vec<(i32, Option<i64>, Option<i64>, Status)> = engine
            .reports(at, |n| n.topic == topic)
            .into_iter()
            .map(|(n, r)| (n.partition, r.committed_offset, r.lag_messages, r.status))
            .collect();
        (snap, rows)
    };
    let (_, rows) = poll(secs(100)).await;
    assert_eq!(
        rows.iter().map(|r| (r.0, r.1, r.2)).collect::<Vec<_>>(),
        [(0, Some(8), Some(2)), (1, Some(8), Some(2))]
    );

    // Deleted and made again, smaller; the group starts over on it.
    for r in admin.delete_topics(&[topic], &opts).await.unwrap() {
        r.unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let made = admin
            .create_topics(&[NewTopic::new(topic, 2, TopicReplication::Fixed(1))], &opts)
            .await
            .unwrap();
        if made.iter().all(Result::is_ok) {
            break;
        }
        assert!(Instant::now() < deadline, "the topic was not made again: {made:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    fill(2, 3).await;
    commit(&[(0, 1), (1, 1)]);
    let mut t = 110;
    let rows = loop {
        let (snap, rows) = poll(secs(t)).await;
        let ends: Vec<Option<i64>> = snap
            .topics
            .iter()
            .find(|x| x.name == topic)
            .map(|x| x.partitions.iter().map(|p| p.end).collect())
            .unwrap_or_default();
        for r in &rows {
            assert!(
                !matches!(r.3, Status::Rewind | Status::DataLoss),
                "the recreation read as the group's {:?}: {rows:?}",
                r.3
            );
        }
        if ends == [Some(3), Some(3)] && rows.iter().all(|r| r.1 == Some(1)) {
            break rows;
        }
        assert!(t < 170, "the new topic was not seen: {ends:?} {rows:?}");
        t += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(rows.iter().all(|r| r.2 == Some(2)), "{rows:?}");

    // Two partitions more: they appear, empty, and the group's rows stand.
    // tansu 0.6.0 has no CreatePartitions (librdkafka: "Required feature not
    // supported by broker").
    if broker.kind == BrokerKind::Tansu {
        return;
    }
    let added = admin
        .create_partitions(&[rdkafka::admin::NewPartitions::new(topic, 4)], &opts)
        .await
        .unwrap();
    assert!(added.iter().all(Result::is_ok), "{added:?}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        t += 1;
        let (snap, rows) = poll(secs(t)).await;
        let parts = snap.topics.iter().find(|x| x.name == topic).map(|x| x.partitions.len());
        if parts == Some(4) {
            assert!(
                rows.iter().all(|r| r.3 != Status::Rewind && r.3 != Status::DataLoss),
                "{rows:?}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "never saw 4 partitions: {parts:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
