//! The poller against librdkafka's mock cluster: a real Kafka-protocol broker,
//! in-process. It has no ListGroups or DescribeGroups, so groups are named in
//! the config here; tests/tansu.rs covers listing and describing.
#![allow(clippy::unwrap_used)]

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{DefaultProducerContext, FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use std::collections::BTreeSet;
use std::time::Duration;
use streamsight_core::{Engine, EngineConfig, Millis, Status};
use streamsight_poller::{ClusterClient, ClusterConfig, Tracker};

type Mock = MockCluster<'static, DefaultProducerContext>;

fn secs(s: i64) -> Millis {
    Millis(s * 1000)
}

async fn produce(cluster: &Mock, topic: &str, partition: i32, n: usize) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap_servers())
        .create()
        .unwrap();
    for i in 0..n {
        let payload = format!("m{i}");
        producer
            .send(
                FutureRecord::<(), _>::to(topic).partition(partition).payload(&payload),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
    }
}

/// Commits as a group that never joins (generation -1), the way tools do.
fn commit(cluster: &Mock, group: &str, topic: &str, partition: i32, offset: i64) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap_servers())
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Offset(offset))
        .unwrap();
    consumer.commit(&tpl, CommitMode::Sync).unwrap();
}

struct Poller {
    client: ClusterClient,
    tracker: Tracker,
    engine: Engine,
    groups: BTreeSet<String>,
}

impl Poller {
    fn new(cluster: &Mock, groups: &[&str]) -> Self {
        Self::with(cluster, groups, |_| {})
    }

    /// The same, its cluster's config changed by `change`.
    fn with(cluster: &Mock, groups: &[&str], change: impl FnOnce(&mut ClusterConfig)) -> Self {
        let mut config = ClusterConfig::new("mock", &cluster.bootstrap_servers());
        config.request_timeout = Duration::from_secs(2);
        change(&mut config);
        Self {
            tracker: Tracker::new("mock", config.forget_after),
            client: ClusterClient::new(config),
            engine: Engine::new(EngineConfig::default()).unwrap(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        }
    }

    async fn poll(&mut self, at: Millis) -> streamsight_poller::Snapshot {
        let snap = self.client.poll(at, &self.groups).await;
        let update = self.tracker.update(&snap);
        for r in update.durable.iter().chain(&update.transient) {
            r.apply(&mut self.engine);
        }
        snap
    }

    fn report(&self, group: &str, topic: &str, partition: i32, at: Millis) -> streamsight_core::LagReport {
        let id = self
            .engine
            .find("mock", group, topic, partition)
            .expect("group-partition known");
        self.engine.evaluate(id, at)
    }
}

#[tokio::test]
async fn lagging_group_then_stopped_then_rewound() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("orders", 3, 1).unwrap();
    produce(&cluster, "orders", 0, 10).await;
    commit(&cluster, "billing", "orders", 0, 4);

    let mut p = Poller::new(&cluster, &["billing"]);
    let snap = p.poll(secs(100)).await;
    assert!(snap.metadata_ok, "{:?}", snap.errors);
    let orders = snap.topics.iter().find(|t| t.name == "orders").unwrap();
    assert_eq!(orders.partitions.len(), 3);
    assert_eq!(
        (orders.partitions[0].log_start, orders.partitions[0].end),
        (Some(0), Some(10))
    );
    // The mock answers the last stable offset as the high watermark.
    assert_eq!(orders.partitions[0].stable, Some(10));
    assert_eq!(snap.group("billing").unwrap().offsets.len(), 1);
    // The first poll also shakes hands, finds the coordinator and learns that
    // the mock cannot fetch "all topics" of a group.
    assert!(snap.requests <= 10, "{} requests", snap.requests);

    let r = p.report("billing", "orders", 0, secs(100));
    assert_eq!(
        (r.lag_messages, r.committed_offset, r.end_offset),
        (Some(6), Some(4), Some(10))
    );

    // The group keeps consuming, lag shrinking, then stops while records keep coming.
    for (t, offset) in [(110, 6), (120, 8)] {
        commit(&cluster, "billing", "orders", 0, offset);
        let snap = p.poll(secs(t)).await;
        // Then: Metadata, ListOffsets earliest, latest and last stable,
        // OffsetFetch, and one Fetch of the new commit's record batch header.
        // Never one request per partition.
        assert_eq!(snap.requests, 6);
    }
    assert_eq!(p.report("billing", "orders", 0, secs(120)).status, Status::Ok);
    produce(&cluster, "orders", 0, 5).await;
    for t in (130..=300).step_by(10) {
        p.poll(secs(t)).await;
    }
    let r = p.report("billing", "orders", 0, secs(300));
    assert_eq!((r.lag_messages, r.status), (Some(7), Status::Stop));
    // Offset 8 was already there at the first poll (t=100): at least 200 s old.
    assert_eq!((r.lag_seconds, r.lag_seconds_lower_bound), (Some(200.0), true));

    // An operator resets the group to the start.
    commit(&cluster, "billing", "orders", 0, 0);
    p.poll(secs(310)).await;
    assert_eq!(p.report("billing", "orders", 0, secs(310)).status, Status::Rewind);
}

#[tokio::test]
async fn a_broker_that_cannot_be_reached_makes_its_partitions_stale() {
    let cluster = MockCluster::new(2).unwrap();
    cluster.create_topic("payments", 2, 1).unwrap();
    cluster.partition_leader("payments", 0, Some(1)).unwrap();
    cluster.partition_leader("payments", 1, Some(2)).unwrap();
    produce(&cluster, "payments", 0, 3).await;
    produce(&cluster, "payments", 1, 3).await;
    commit(&cluster, "ledger", "payments", 0, 3);
    commit(&cluster, "ledger", "payments", 1, 3);

    let mut p = Poller::new(&cluster, &["ledger"]);
    p.poll(secs(10)).await;
    for partition in [0, 1] {
        let r = p.report("ledger", "payments", partition, secs(10));
        assert_eq!((r.lag_messages, r.status), (Some(0), Status::Ok));
    }
    cluster.broker_down(2).unwrap();
    let snap = p.poll(secs(20)).await;
    let payments = snap.topics.iter().find(|t| t.name == "payments").unwrap();
    assert!(payments.partitions[1].error.is_some(), "{:?}", payments.partitions[1]);
    let down = p.report("ledger", "payments", 1, secs(20));
    assert_eq!((down.status, down.broker_unreachable), (Status::Stale, true));
    assert_eq!(p.report("ledger", "payments", 0, secs(20)).status, Status::Ok);

    cluster.broker_up(2).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut t = 30;
    loop {
        p.poll(secs(t)).await;
        if p.report("ledger", "payments", 1, secs(t)).status == Status::Ok {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "broker 2 never answered again");
        t += 10;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn nothing_reachable_is_stale_not_zero() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("orders", 1, 1).unwrap();
    commit(&cluster, "billing", "orders", 0, 0);
    let mut p = Poller::new(&cluster, &["billing"]);
    p.poll(secs(10)).await;
    assert_eq!(p.report("billing", "orders", 0, secs(10)).status, Status::Ok);
    cluster.broker_down(1).unwrap();
    let snap = p.poll(secs(20)).await;
    assert!(!snap.metadata_ok);
    assert!(!snap.errors.is_empty());
    let r = p.report("billing", "orders", 0, secs(20));
    assert_eq!((r.status, r.broker_unreachable), (Status::Stale, true));
}

#[tokio::test]
async fn new_topics_are_picked_up_and_internal_ones_left_out() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("a", 1, 1).unwrap();
    let mut p = Poller::new(&cluster, &[]);
    let first = p.poll(secs(1)).await;
    assert_eq!(first.topics.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["a"]);
    cluster.create_topic("b", 4, 1).unwrap();
    let second = p.poll(secs(2)).await;
    let b = second.topics.iter().find(|t| t.name == "b").unwrap();
    assert_eq!(b.partitions.len(), 4);
    assert_eq!(p.engine.partitions().count(), 5);
}

/// The record at a lagging group's commit is read (a Fetch of its batch header):
/// its time makes lag seconds exact, where polls alone give a lower bound.
#[tokio::test]
async fn the_record_at_the_commit_gives_exact_lag_seconds() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("orders", 1, 1).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let t0 = now - 60_000;
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap_servers())
        .set("linger.ms", "0")
        .create()
        .unwrap();
    for i in 0..10 {
        let payload = format!("m{i}");
        producer
            .send(
                FutureRecord::<(), _>::to("orders")
                    .partition(0)
                    .payload(&payload)
                    .timestamp(t0 + i * 1_000),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
    }
    commit(&cluster, "billing", "orders", 0, 4);
    let mut p = Poller::new(&cluster, &["billing"]);
    let snap = p.poll(Millis(now)).await;
    assert!(snap.errors.is_empty(), "{:?}", snap.errors);
    let batch = snap
        .batches
        .iter()
        .find(|b| (b.base_offset..=b.last_offset).contains(&4));
    let batch = batch.unwrap_or_else(|| panic!("no batch read at offset 4: {:?}", snap.batches));
    assert_eq!(batch.first_timestamp, t0 + batch.base_offset * 1_000, "{batch:?}");
    let r = p.report("billing", "orders", 0, Millis(now));
    assert!(!r.lag_seconds_lower_bound, "{r:?}");
    let expected = (now - (t0 + 4_000)) as f64 / 1000.0;
    let got = r.lag_seconds.unwrap();
    assert!(
        (got - expected).abs() < 1.0,
        "lag {got} s, the record's age {expected} s"
    );
    // Read once: the next poll of the same commit fetches nothing again.
    let again = p.poll(Millis(now + 10_000)).await;
    assert!(again.batches.is_empty(), "{:?}", again.batches);
}

/// Allow and deny globs bound what a poll reads: topics and groups outside
/// them are neither asked for nor reported, deny winning over allow.
#[tokio::test]
async fn allow_and_deny_globs_bound_the_groups_and_topics_polled() {
    let cluster = Mock::new(1).unwrap();
    for topic in ["orders", "orders-audit", "payments"] {
        cluster.create_topic(topic, 1, 1).unwrap();
        produce(&cluster, topic, 0, 3).await;
    }
    for group in ["billing", "billing-shadow", "fraud"] {
        for topic in ["orders", "orders-audit", "payments"] {
            commit(&cluster, group, topic, 0, 1);
        }
    }
    let mut poller = Poller::with(&cluster, &["billing", "billing-shadow", "fraud"], |c| {
        c.groups_allow = vec!["billing*".into()];
        c.groups_deny = vec!["*-shadow".into()];
        c.topics_deny = vec!["*-audit".into()];
    });
    let snap = poller.poll(secs(10)).await;
    let topics: Vec<&str> = snap.topics.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(topics, ["orders", "payments"]);
    let groups: Vec<&str> = snap.groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(groups, ["billing"]);
    let read: Vec<&str> = snap.groups[0].offsets.iter().map(|o| o.topic.as_str()).collect();
    assert_eq!(read, ["orders", "payments"], "offsets on a denied topic are not read");
    assert!(poller.engine.find("mock", "fraud", "orders", 0).is_none());
    assert!(poller.engine.find("mock", "billing", "orders-audit", 0).is_none());
    assert!(poller.engine.find("mock", "billing", "payments", 0).is_some());
}

/// More requests to one broker than one connection carries at once: the poll
/// spreads them over several connections, and every answer still goes to the
/// group it was asked for (the mock answers FindCoordinator and OffsetFetch
/// one group a request, so 150 groups are 150 of each).
#[tokio::test]
async fn a_long_pipeline_spread_over_connections_keeps_each_answer_with_its_group() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("orders", 1, 1).unwrap();
    produce(&cluster, "orders", 0, 200).await;
    let names: Vec<String> = (0..150).map(|g| format!("group-{g:03}")).collect();
    for (g, name) in names.iter().enumerate() {
        commit(&cluster, name, "orders", 0, g as i64);
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut p = Poller::new(&cluster, &refs);
    for round in 0..2 {
        let snap = p.poll(secs(100 + round * 10)).await;
        assert!(snap.requests >= 150, "one group a request: {} requests", snap.requests);
        for (g, name) in names.iter().enumerate() {
            let group = snap
                .group(name)
                .unwrap_or_else(|| panic!("{name} polled: {:?}", snap.errors));
            assert_eq!(group.offsets.len(), 1, "{name}: {:?}", group.error);
            assert_eq!(group.offsets[0].offset, g as i64, "{name} got another group's answer");
        }
    }
}

/// Two groups whose coordinators are different brokers, one of which answers
/// 4 s late: every broker is asked at once, so the slow coordinator costs the
/// poll at most `request_timeout` (1 s here) and only its own group's offsets
/// (an error, its partitions not read as 0); the other group's come back.
#[tokio::test]
async fn a_slow_coordinator_costs_only_its_own_groups_and_at_most_the_timeout() {
    use rdkafka::mocking::MockCoordinator;
    let cluster = MockCluster::new(2).unwrap();
    cluster.create_topic("orders", 2, 1).unwrap();
    cluster.partition_leader("orders", 0, Some(1)).unwrap();
    cluster.partition_leader("orders", 1, Some(1)).unwrap();
    cluster.coordinator(MockCoordinator::Group("fast".into()), 1).unwrap();
    cluster.coordinator(MockCoordinator::Group("slow".into()), 2).unwrap();
    produce(&cluster, "orders", 0, 5).await;
    commit(&cluster, "fast", "orders", 0, 2);
    commit(&cluster, "slow", "orders", 0, 4);
    let mut p = Poller::with(&cluster, &["fast", "slow"], |c| {
        c.request_timeout = Duration::from_secs(1);
    });
    let snap = p.poll(secs(10)).await;
    assert!(snap.errors.is_empty(), "{:?}", snap.errors);
    assert_eq!(p.report("slow", "orders", 0, secs(10)).lag_messages, Some(1));

    cluster.broker_round_trip_time(2, Duration::from_secs(4)).unwrap();
    let started = std::time::Instant::now();
    let snap = p.poll(secs(20)).await;
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(2_500),
        "the poll waited {took:?} for the slow coordinator"
    );
    let group = |name: &str| snap.groups.iter().find(|g| g.name == name).unwrap();
    assert!(group("slow").error.is_some(), "{:?}", group("slow"));
    // Its offsets answered; the only thing said of it is that the mock
    // cannot describe groups (its membership unknown, never "none").
    assert!(
        group("fast")
            .error
            .as_deref()
            .is_none_or(|e| e.contains("does not speak DescribeGroups")),
        "{:?}",
        group("fast")
    );
    assert_eq!(group("fast").offsets.len(), 1, "{:?}", group("fast"));
    let fast = p.report("fast", "orders", 0, secs(20));
    assert_eq!((fast.lag_messages, fast.status), (Some(3), Status::Ok), "{fast:?}");
    let slow = p.report("slow", "orders", 0, secs(20));
    assert_ne!(slow.lag_messages, Some(0), "unknown, never 0: {slow:?}");
}
