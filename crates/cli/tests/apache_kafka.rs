//! streamsight on Apache Kafka 4 (KRaft, from `scripts/kafka`), held against
//! the broker's own answers: `streamsight lag` for a classic group and a
//! KIP-848 `consumer` group of real confluent-kafka members equals what
//! Apache Kafka's own `ConsumerGroupCommand` (`kafka-consumer-groups.sh
//! --describe`) says of them, row for row, members included, from a
//! collector and straight from the cluster.
#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

mod support;

use std::collections::BTreeMap;
use streamsight_testkit::ApacheKafka;
use streamsight_testkit::apache_kafka::{kafka_tool, unique};

/// A row of a group's partition: current offset, log end, lag, member, client.
type Row = (String, String, String, String, String);

/// `kafka-consumer-groups.sh --describe --group GROUP`, by (topic, partition).
fn described_by_kafka(bootstrap: &str, group: &str) -> BTreeMap<(String, i32), Row> {
    let (ok, out, err) = kafka_tool(
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        &["--bootstrap-server", bootstrap, "--describe", "--group", group],
    );
    assert!(ok, "{out}{err}");
    out.lines()
        .filter(|l| l.starts_with(group))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            // GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
            (
                (w[1].to_owned(), w[2].parse().unwrap()),
                (w[3].into(), w[4].into(), w[5].into(), w[6].into(), w[8].into()),
            )
        })
        .collect()
}

/// `streamsight lag --group GROUP`'s rows, by (topic, partition), from a
/// collector (`--collector URL`) or straight from the cluster
/// (`--bootstrap-server HOST:PORT`).
fn described_by_streamsight(from: &[&str], group: &str) -> BTreeMap<(String, i32), Row> {
    let mut args = vec!["lag"];
    args.extend_from_slice(from);
    args.extend_from_slice(&["--group", group]);
    let (ok, out, err) = support::run(&args);
    assert!(ok, "{out}{err}");
    out.lines()
        .filter(|l| l.starts_with(group))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            // GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG LAG-SECONDS STATUS CONSUMER-ID HOST CLIENT-ID NOTE
            (
                (w[1].to_owned(), w[2].parse().unwrap()),
                (w[3].into(), w[4].into(), w[5].into(), w[8].into(), w[10].into()),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lag_of_classic_and_kip_848_groups_equals_kafkas_own_consumer_group_command() {
    let kafka = ApacheKafka::shared();
    let b = kafka.bootstrap.as_str();
    let (topic, classic, modern) = (unique("orders"), unique("billing"), unique("fraud"));
    support::fill_topic(b, &topic, 3, 200).await;
    // Each reads some, commits each record, and stays a member.
    let billing = support::Member::join(b, &topic, &classic, "billing-1", 250);
    let fraud = support::Member::join_with(b, &topic, &modern, "fraud-1", 130, "consumer");
    billing.until("read");
    fraud.until("read");
    let toml = format!(
        "[serve]\nhistory_interval = \"200ms\"\n\n[[serve.clusters]]\nname = \"apache-kafka\"\nbootstrap = [{b:?}]\npoll_interval = \"300ms\"\n"
    );
    let (_serve, _intake, api) = support::serve_with("apache-kafka-lag", &toml, "memory://");
    for group in [&classic, &modern] {
        let truth = described_by_kafka(b, group);
        assert!(!truth.is_empty(), "Kafka describes {group}");
        // Until the collector has polled the group (then every poll agrees).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let ours = loop {
            let ours = described_by_streamsight(&["--collector", &api], group);
            if ours == truth || std::time::Instant::now() > deadline {
                break ours;
            }
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        };
        assert_eq!(ours, truth, "streamsight lag --collector");
        let direct = described_by_streamsight(&["--bootstrap-server", b], group);
        assert_eq!(direct, truth, "streamsight lag --bootstrap-server");
        eprintln!(
            "apache_kafka: {group}: {} rows equal Kafka's own, from the collector and directly",
            ours.len()
        );
    }
    // The KIP-848 group is a `consumer` group, with its member's epoch.
    let (_, detail) = streamsight_testkit::http::get(
        &reqwest::Client::new(),
        &format!("{api}/api/v1/groups/apache-kafka/{modern}"),
    )
    .await;
    assert_eq!(detail["group_type"], "consumer", "{detail:#}");
    billing.close();
    fraud.close();
}
