//! The log in a Kafka topic (`kafka://`), on tansu run as its own process: what
//! one collector accepted is replayed by another that shares the log, and each
//! follows what the other accepts from then on; a log out of reach turns intake
//! into 503 and `/readyz` says why, until it is back.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

mod support;

use serde_json::Value;
use std::time::Duration;
use streamsight_collector::{Running, serve};
use streamsight_core::EngineConfig;
use streamsight_testkit::{Tansu, eventually, free_port};
use streamsight_wire::dsm::payload::{Backlog, Bucket, Payload, encode};

use streamsight_testkit::now_ns;

/// A tansu broker of its own, in a directory removed when it is dropped.
struct Broker {
    tansu: Tansu,
    dir: std::path::PathBuf,
}

impl Broker {
    fn start(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("streamsight-kafka-{name}-{}-{}", std::process::id(), now_ns()));
        std::fs::create_dir_all(&dir).unwrap();
        let tansu = Tansu::start_on(free_port(), "sqlite://tansu.db", &dir, &[]);
        Self { tansu, dir }
    }

    /// The URL of a log on this broker: `TOPIC?QUERY`.
    fn log(&self, topic_and_query: &str) -> String {
        format!("kafka://{}/{topic_and_query}&create=true", self.tansu.bootstrap)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Waits until `nodes` nodes hold the shards, every shard held.
async fn shards_spread(client: &reqwest::Client, node: &Running, nodes: usize) -> Value {
    eventually(60, "the shards spread over the nodes", async || {
        let (_, directory) = get(client, node, "/api/v1/nodes").await;
        let owners = directory["owners"].as_array()?;
        let holders: std::collections::BTreeSet<&str> = owners.iter().filter_map(|o| o["node"].as_str()).collect();
        (owners.iter().all(|o| o["node"].is_string()) && holders.len() == nodes).then(|| directory.clone())
    })
    .await
}

/// A produce at `produced` and a commit at `committed` on orders/0, one bucket.
fn payload(start_ns: u64, produced: i64, committed: i64) -> Vec<u8> {
    payload_of_topics(start_ns, &["orders".to_owned()], produced, committed)
}

async fn start(log: &str) -> Running {
    serve(support::loopback(log), EngineConfig::default()).await.unwrap()
}

async fn post(client: &reqwest::Client, node: &Running, body: Vec<u8>) -> u16 {
    client
        .post(format!("http://{}/v0.1/pipeline_stats", node.intake_addr))
        .header("Content-Type", "application/msgpack")
        .header("Content-Encoding", "gzip")
        .body(body)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn get(client: &reqwest::Client, node: &Running, path: &str) -> (u16, Value) {
    streamsight_testkit::http::get(client, &format!("http://{}{path}", node.api_addr)).await
}

async fn ready(client: &reqwest::Client, node: &Running) {
    eventually(30, "readiness", async || {
        (get(client, node, "/readyz").await.0 == 200).then_some(())
    })
    .await;
}

async fn billing_lag(client: &reqwest::Client, node: &Running) -> Value {
    let (_, lag) = get(client, node, "/api/v1/lag?group=billing").await;
    let rows = lag["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{lag}");
    rows[0]["lag_messages"].clone()
}

async fn lag_becomes(client: &reqwest::Client, node: &Running, want: i64) {
    let what = format!("billing's lag to become {want}");
    // Polled until it is: a node that was cut off from the log may answer
    // with its shards missing (no rows) while it takes them in again.
    eventually(30, &what, async || {
        let (_, lag) = get(client, node, "/api/v1/lag?group=billing").await;
        let rows = lag["rows"].as_array()?;
        (rows.len() == 1 && rows[0]["lag_messages"] == want).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collectors_sharing_a_log_in_kafka_read_what_either_accepted() {
    let dir = std::env::temp_dir().join(format!("streamsight-kafka-log-{}-{}", std::process::id(), now_ns()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let mut broker = Tansu::start_on(port, "sqlite://tansu.db", &dir, &[]);
    let log = format!(
        "kafka://{}/streamsight-log?partitions=4&timeout_ms=3000&create=true",
        broker.bootstrap
    );
    let client = streamsight_testkit::http::client();
    let start_ns = now_ns() - 60_000_000_000;

    let a = start(&log).await;
    ready(&client, &a).await;
    assert_eq!(post(&client, &a, payload(start_ns, 1_000, 400)).await, 202);
    assert_eq!(billing_lag(&client, &a).await, 601);

    // Another collector on the same log replays what the first accepted.
    let b = start(&log).await;
    ready(&client, &b).await;
    assert_eq!(billing_lag(&client, &b).await, 601, "read back through another node");

    // Each follows what the other accepts from then on: any node answers.
    assert_eq!(
        post(&client, &b, payload(start_ns + 5_000_000_000, 1_500, 1_000)).await,
        202
    );
    assert_eq!(billing_lag(&client, &b).await, 501);
    lag_becomes(&client, &a, 501).await;
    // One of them evaluates the alert rules; both export the signals derived
    // from their engines.
    for node in [&a, &b] {
        eventually(30, "the derived signals on /metrics", async || {
            let metrics = metrics(&client, node).await;
            let derived = metrics
                .lines()
                .any(|l| l.starts_with("streamsight_partitions_not_committing{") && l.contains("group=\"billing\""));
            derived.then_some(())
        })
        .await;
    }

    // The log out of reach: intake answers 503 (nothing acknowledged, nothing
    // applied) and readiness says why.
    broker.kill();
    let status = post(&client, &a, payload(start_ns + 10_000_000_000, 2_000, 1_900)).await;
    assert_eq!(status, 503);
    let (code, why) = get(&client, &a, "/readyz").await;
    assert_eq!(
        (code, why["error"].as_str()),
        (503, Some("storage_unavailable")),
        "{why}"
    );
    assert_eq!(billing_lag(&client, &a).await, 501, "a refused payload is not applied");

    // Back on the same port and data: appends succeed again and readiness returns.
    let _broker = Tansu::start_on(port, "sqlite://tansu.db", &dir, &[]);
    eventually(60, "intake to recover", async || {
        (post(&client, &a, payload(start_ns + 10_000_000_000, 2_000, 1_900)).await == 202).then_some(())
    })
    .await;
    assert_eq!(get(&client, &a, "/readyz").await.0, 200);
    assert_eq!(billing_lag(&client, &a).await, 101);
    lag_becomes(&client, &b, 101).await;
    drop((a, b));
    let c = start(&log).await;
    ready(&client, &c).await;
    assert_eq!(
        billing_lag(&client, &c).await,
        101,
        "a third node replays both payloads"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A mock cluster with one topic, and how a node polls it (every 100 ms).
fn mock_cluster() -> (
    rdkafka::mocking::MockCluster<'static, rdkafka::producer::DefaultProducerContext>,
    streamsight_poller::ClusterConfig,
) {
    let mock = rdkafka::mocking::MockCluster::new(1).unwrap();
    mock.create_topic("orders", 1, 1).unwrap();
    let mut polled = streamsight_poller::ClusterConfig::new("mock", &mock.bootstrap_servers());
    polled.poll_interval = Duration::from_millis(100);
    polled.request_timeout = Duration::from_secs(1);
    (mock, polled)
}

/// A node of the log at `log` that polls `polled` when it holds its lease.
async fn polling_node(log: &str, polled: &streamsight_poller::ClusterConfig) -> Running {
    let config = streamsight_collector::ServeConfig {
        clusters: vec![polled.clone()],
        ..support::loopback(log)
    };
    serve(config, EngineConfig::default()).await.unwrap()
}

/// `polls` of cluster `mock` on a node.
async fn polls(client: &reqwest::Client, node: &Running) -> u64 {
    let (_, clusters) = get(client, node, "/api/v1/clusters").await;
    clusters["clusters"]["mock"]["poller"]["polls"].as_u64().unwrap_or(0)
}

/// Polls `polls` on both nodes until `done` holds of the two counts.
async fn polls_until(client: &reqwest::Client, nodes: [&Running; 2], done: impl Fn(u64, u64) -> bool) -> (u64, u64) {
    eventually(45, "the poll counts", async || {
        let counts = (polls(client, nodes[0]).await, polls(client, nodes[1]).await);
        done(counts.0, counts.1).then_some(counts)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_at_a_time_polls_a_cluster_and_another_takes_over() {
    let broker = Broker::start("leases");
    let log = broker.log("leases-log?partitions=2&timeout_ms=3000");
    let (_mock, polled) = mock_cluster();
    let node = || polling_node(&log, &polled);
    let client = streamsight_testkit::http::client();
    let a = node().await;
    let b = node().await;
    // Once the group has settled, only one of the two polls.
    let settled = polls_until(&client, [&a, &b], |x, y| x + y >= 20).await;
    let later = polls_until(&client, [&a, &b], |x, y| x + y >= settled.0 + settled.1 + 20).await;
    let grew = (later.0 > settled.0, later.1 > settled.1);
    assert!(
        grew == (true, false) || grew == (false, true),
        "{settled:?} -> {later:?}"
    );
    // The node that polls leaves: the other takes the cluster over.
    let (owner, other) = if grew.0 { (a, b) } else { (b, a) };
    drop(owner);
    let before = polls(&client, &other).await;
    eventually(30, "another node to take the cluster over", async || {
        (polls(&client, &other).await >= before + 5).then_some(())
    })
    .await;
    drop(other);
    drop(broker);
}

/// A produce at `produced` and a commit of group `billing` at `committed` on
/// partition 0 of each of `topics`, one bucket.
fn payload_of_topics(start_ns: u64, topics: &[String], produced: i64, committed: i64) -> Vec<u8> {
    let backlogs = topics.iter().flat_map(|topic| {
        let tags = |more: &[&str]| {
            let mut tags: Vec<String> = more.iter().map(|t| (*t).to_owned()).collect();
            tags.extend([
                format!("topic:{topic}"),
                "partition:0".into(),
                "kafka_cluster_id:prod".into(),
            ]);
            tags
        };
        [
            Backlog {
                tags: tags(&["type:kafka_produce"]),
                value: produced,
            },
            Backlog {
                tags: tags(&["type:kafka_commit", "consumer_group:billing"]),
                value: committed,
            },
        ]
    });
    encode(&Payload {
        service: "checkout".into(),
        stats: vec![Bucket {
            start: start_ns,
            duration: 10_000_000_000,
            stats: vec![],
            backlogs: backlogs.collect(),
        }],
        ..Default::default()
    })
}

/// The lag rows a node answers, once they cover every shard: (topic, lag).
async fn complete_rows(client: &reqwest::Client, node: &Running, want: usize) -> Vec<(String, i64)> {
    eventually(60, "every shard's rows", async || {
        let (_, lag) = get(client, node, "/api/v1/lag?group=billing").await;
        let missing = lag["shards"]["missing"].as_array()?;
        let rows = lag["rows"].as_array()?;
        (missing.is_empty() && rows.len() == want).then(|| {
            rows.iter()
                .map(|r| {
                    (
                        r["topic"].as_str().unwrap().to_owned(),
                        r["lag_messages"].as_i64().unwrap(),
                    )
                })
                .collect()
        })
    })
    .await
}

async fn metrics(client: &reqwest::Client, node: &Running) -> String {
    let response = client.get(format!("http://{}/metrics", node.api_addr)).send().await;
    response.unwrap().text().await.unwrap()
}

/// Group-partitions a node holds itself: its `/metrics` exports its own shards.
async fn own_partitions(client: &reqwest::Client, node: &Running) -> usize {
    metrics(client, node)
        .await
        .lines()
        .filter(|l| l.starts_with("kafka_consumergroup_group_lag{"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_nodes_each_hold_some_shards_and_any_answers_for_all() {
    let broker = Broker::start("shards");
    let log = broker.log("sharded-log?partitions=6&timeout_ms=3000&mode=sharded");
    let client = streamsight_testkit::http::client();
    let start_ns = now_ns() - 60_000_000_000;
    let topics: Vec<String> = (0..12).map(|i| format!("topic-{i}")).collect();
    let nodes = [start(&log).await, start(&log).await, start(&log).await];
    for node in &nodes {
        ready(&client, node).await;
    }
    // Intake spread over the nodes: each accepts some topics.
    for (i, chunk) in topics.chunks(4).enumerate() {
        assert_eq!(
            post(&client, &nodes[i], payload_of_topics(start_ns, chunk, 1_000, 400)).await,
            202
        );
    }
    let want: Vec<(String, i64)> = {
        let mut want: Vec<_> = topics.iter().map(|t| (t.clone(), 601)).collect();
        want.sort();
        want
    };
    for node in &nodes {
        assert_eq!(complete_rows(&client, node, topics.len()).await, want);
    }
    // Each node holds only its shards' partitions, and together all of them.
    let mut held = Vec::new();
    for node in &nodes {
        held.push(own_partitions(&client, node).await);
    }
    assert_eq!(held.iter().sum::<usize>(), topics.len(), "{held:?}");
    assert!(held.iter().all(|n| *n < topics.len()), "{held:?}");
    // Every shard has one holder, and every node knows who.
    let (_, directory) = get(&client, &nodes[0], "/api/v1/nodes").await;
    let owners = directory["owners"].as_array().unwrap();
    assert_eq!(owners.len(), 6, "{directory}");
    assert!(owners.iter().all(|o| o["node"].is_string()), "{directory}");
    assert_eq!(directory["peers"].as_array().unwrap().len(), 2, "{directory}");
    // The merged answers of the other reads cover every shard too.
    for path in ["/api/v1/partitions", "/api/v1/pathways", "/api/v1/deliveries"] {
        let (code, body) = get(&client, &nodes[2], path).await;
        assert_eq!(
            (code, &body["shards"]["missing"]),
            (200, &serde_json::json!([])),
            "{path}: {body}"
        );
    }
    let (_, partitions) = get(&client, &nodes[2], "/api/v1/partitions").await;
    assert_eq!(partitions["partitions"].as_array().unwrap().len(), topics.len());
    // The dashboard's reads: the overview folds the group from every shard's
    // part, the group page lists all its partitions, and a topic's page is
    // answered by whichever node holds it.
    // (Each node's summaries are up to one refresh interval old.)
    let overview = eventually(30, "the overview of every shard", async || {
        let (_, overview) = get(&client, &nodes[0], "/api/v1/overview").await;
        (overview["groups"]["rows"][0]["partitions"] == 12).then_some(overview)
    })
    .await;
    let row = &overview["groups"]["rows"][0];
    assert_eq!(overview["total_groups"], 1, "{overview}");
    assert_eq!(row["total_lag"].as_i64(), Some(12 * 601), "{overview}");
    assert_eq!(overview["shards"]["missing"], serde_json::json!([]));
    let (_, detail) = get(&client, &nodes[1], "/api/v1/groups/prod/billing").await;
    assert_eq!(detail["partitions"].as_array().unwrap().len(), 12, "{detail}");
    // Burrow's API too: a group's status and lag, its detail, the lists.
    let (_, lag) = get(&client, &nodes[2], "/v3/kafka/prod/consumer/billing/lag").await;
    let status = &lag["status"];
    assert_eq!(
        (status["partition_count"].as_u64(), status["totallag"].as_i64()),
        (Some(12), Some(12 * 601)),
        "{lag}"
    );
    assert_eq!(
        status["streamsight"]["shards"]["missing"],
        serde_json::json!([]),
        "{lag}"
    );
    let (_, detail) = get(&client, &nodes[2], "/v3/kafka/prod/consumer/billing").await;
    assert_eq!(detail["topics"].as_object().map(|t| t.len()), Some(12), "{detail}");
    let (_, consumers) = get(&client, &nodes[1], "/v3/kafka/prod/consumer").await;
    assert_eq!(consumers["consumers"], serde_json::json!(["billing"]), "{consumers}");
    let (_, listed) = get(&client, &nodes[1], "/v3/kafka/prod/topic").await;
    assert_eq!(listed["topics"].as_array().map(Vec::len), Some(12), "{listed}");
    let (_, clusters) = get(&client, &nodes[0], "/v3/kafka").await;
    assert_eq!(clusters["clusters"], serde_json::json!(["prod"]), "{clusters}");
    for topic in &topics {
        let (code, page) = get(&client, &nodes[0], &format!("/api/v1/topics/prod/{topic}")).await;
        assert_eq!(
            (code, page["partitions"].as_array().map(Vec::len)),
            (200, Some(1)),
            "{topic}: {page}"
        );
        let (code, offsets) = get(&client, &nodes[1], &format!("/v3/kafka/prod/topic/{topic}")).await;
        assert_eq!(
            (code, &offsets["offsets"]),
            (200, &serde_json::json!([1_001])),
            "{topic}: {offsets}"
        );
    }
    // A group across shards is folded from all of them.
    let (_, groups) = get(&client, &nodes[1], "/api/v1/groups").await;
    let billing = &groups["groups"][0];
    assert_eq!(
        (billing["partitions"].as_u64(), billing["total_lag"].as_i64()),
        (Some(12), Some(12 * 601))
    );
    assert_eq!(groups["shards"]["missing"], serde_json::json!([]));

    // A node leaves: the others take its shards over, rebuild them from the
    // log, and answer for all of them again.
    let [a, b, c] = nodes;
    c.shutdown().await;
    assert_eq!(complete_rows(&client, &a, topics.len()).await, want);
    assert_eq!(complete_rows(&client, &b, topics.len()).await, want);
    assert_eq!(
        own_partitions(&client, &a).await + own_partitions(&client, &b).await,
        topics.len()
    );
    // And what is accepted after is read through any node.
    assert_eq!(
        post(
            &client,
            &b,
            payload_of_topics(start_ns + 5_000_000_000, &topics, 1_000, 900)
        )
        .await,
        202
    );
    eventually(30, "the new commits on the other node", async || {
        let rows = complete_rows(&client, &a, topics.len()).await;
        rows.iter().all(|(_, lag)| *lag == 101).then_some(())
    })
    .await;
    a.shutdown().await;
    b.shutdown().await;
    drop(broker);
}

/// A counter a node exports on `/metrics`.
async fn counter(client: &reqwest::Client, node: &Running, name: &str) -> u64 {
    let metrics = metrics(client, node).await;
    let line = metrics.lines().find(|l| l.split(' ').next() == Some(name));
    line.and_then(|l| l.split(' ').nth(1)?.parse().ok()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_taking_shards_over_starts_from_their_snapshots() {
    let broker = Broker::start("snapshots");
    let log = broker.log("snap-log?partitions=4&timeout_ms=3000&mode=sharded&snapshot_ms=200");
    let client = streamsight_testkit::http::client();
    let start_ns = now_ns() - 600_000_000_000;
    let topics: Vec<String> = (0..8).map(|i| format!("topic-{i}")).collect();
    let shards: std::collections::BTreeSet<u32> = topics
        .iter()
        .map(|t| streamsight_core::record::shard_of(t, 4))
        .collect();
    let first = start(&log).await;
    ready(&client, &first).await;
    // A history: 20 rounds, one log message per shard each.
    let rounds = 20;
    for round in 0..rounds {
        let body = payload_of_topics(
            start_ns + round * 10_000_000_000,
            &topics,
            1_000 + round as i64 * 10,
            400,
        );
        assert_eq!(post(&client, &first, body).await, 202);
    }
    let lag = 1_000 + (rounds as i64 - 1) * 10 + 1 - 400;
    let mut want: Vec<(String, i64)> = topics.iter().map(|t| (t.clone(), lag)).collect();
    want.sort();
    // Read back from the log like any node's appends: on a loaded machine the
    // last rounds can be acknowledged before they are applied (a run beside
    // CI read ten rounds behind for a moment).
    eventually(30, "the node to apply every round", async || {
        (complete_rows(&client, &first, topics.len()).await == want).then_some(())
    })
    .await;
    eventually(30, "a snapshot of every shard", async || {
        (counter(&client, &first, "streamsight_shard_snapshots_written_total").await >= shards.len() as u64)
            .then_some(())
    })
    .await;
    // Lag seconds rise with the clock; everything else must stay as it is.
    let without_seconds = |mut rows: Value| {
        let seconds: Vec<f64> = rows
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .map(|r| {
                r.as_object_mut()
                    .unwrap()
                    .remove("lag_seconds")
                    .unwrap()
                    .as_f64()
                    .unwrap()
            })
            .collect();
        (rows, seconds)
    };
    let (before, seconds_before) =
        without_seconds(get(&client, &first, "/api/v1/lag?group=billing").await.1["rows"].clone());

    // A second node takes some shards over from their snapshots; the first
    // keeps the others as it built them.
    let second = start(&log).await;
    ready(&client, &second).await;
    shards_spread(&client, &second, 2).await;
    for node in [&first, &second] {
        assert_eq!(complete_rows(&client, node, topics.len()).await, want);
    }
    // The first leaves: the second takes the rest over from their snapshots.
    first.shutdown().await;
    assert_eq!(complete_rows(&client, &second, topics.len()).await, want);
    let (after, seconds_after) =
        without_seconds(get(&client, &second, "/api/v1/lag?group=billing").await.1["rows"].clone());
    assert_eq!(
        after, before,
        "the same answers from the snapshots as from the node that made them"
    );
    assert!(
        seconds_after.iter().zip(&seconds_before).all(|(a, b)| a >= b),
        "{seconds_before:?} → {seconds_after:?}"
    );
    let restored = counter(&client, &second, "streamsight_shard_snapshots_restored_total").await;
    let replayed = counter(&client, &second, "streamsight_shard_replayed_messages_total").await;
    eprintln!(
        "restored {restored} shards, replayed {replayed} of {} messages",
        rounds as usize * shards.len()
    );
    assert_eq!(restored, shards.len() as u64, "every shard taken in from its snapshot");
    assert!(
        replayed <= shards.len() as u64,
        "replayed {replayed} messages: the snapshots were not used"
    );
    second.shutdown().await;
    drop(broker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_node_that_cannot_reach_the_log_says_so_without_being_asked_to_write() {
    let dir = std::env::temp_dir().join(format!(
        "streamsight-kafka-unreachable-{}-{}",
        std::process::id(),
        now_ns()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let mut broker = Tansu::start_on(port, "sqlite://tansu.db", &dir, &[]);
    let log = format!(
        "kafka://{}/unreachable-log?partitions=2&create=true&timeout_ms=2000&mode=sharded",
        broker.bootstrap
    );
    let client = streamsight_testkit::http::client();
    let node = start(&log).await;
    ready(&client, &node).await;
    assert_eq!(
        post(&client, &node, payload(now_ns() - 60_000_000_000, 1_000, 400)).await,
        202
    );
    assert_eq!(complete_rows(&client, &node, 1).await, [("orders".to_owned(), 601)]);

    // An append under way when the broker dies fails (503). Then no intake
    // at all: readiness still finds out (the node's own announcements stop
    // coming back), and says why.
    broker.kill();
    assert_eq!(post(&client, &node, payload(now_ns(), 2_000, 1_900)).await, 503);
    let why = eventually(30, "readiness to say the log is out of reach", async || {
        let (code, why) = get(&client, &node, "/readyz").await;
        (code == 503 && why["error"] == "log_unreachable").then_some(why)
    })
    .await;
    assert!(
        why["message"]
            .as_str()
            .is_some_and(|m| m.contains("cannot reach the log")),
        "{why}"
    );
    assert_eq!(post(&client, &node, payload(now_ns(), 2_000, 1_900)).await, 503);

    // Back: ready again with no intake since the failed appends (a node a
    // load balancer took out of rotation gets none), and intake accepted.
    let _broker = Tansu::start_on(port, "sqlite://tansu.db", &dir, &[]);
    eventually(60, "readiness to return", async || {
        (get(&client, &node, "/readyz").await.0 == 200).then_some(())
    })
    .await;
    eventually(60, "intake to recover", async || {
        (post(&client, &node, payload(now_ns(), 2_000, 1_900)).await == 202).then_some(())
    })
    .await;
    lag_becomes(&client, &node, 101).await;
    node.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alert_rules_on_a_sharded_log_with_keys_run_on_every_shard() {
    use streamsight_collector::auth::{KeyFile, Scope, generate};
    let broker = Broker::start("alerts");
    let log = broker.log("alerts-log?partitions=4&timeout_ms=3000&mode=sharded");
    let (read, ingest) = (
        generate("default", Scope::Read, 1).unwrap(),
        generate("default", Scope::Ingest, 1).unwrap(),
    );
    let keys_file = broker.dir.join("keys.json");
    KeyFile {
        keys: vec![read.stored.clone(), ingest.stored.clone()],
    }
    .save(&keys_file)
    .unwrap();
    // Each node holds 2 of the 4 shards, 4 of the 8 topics: 2,404 of the
    // group's 4,808; the rule fires only on the sum.
    let rule: streamsight_core::alerts::rule::Rule =
        toml::from_str("name = \"billing_behind\"\nsignal = \"group_lag_messages\"\nabove = 3000\n").unwrap();
    let config = || streamsight_collector::ServeConfig {
        keys_file: keys_file.clone(),
        history_interval: Duration::from_millis(200),
        alerts: streamsight_collector::alerts::rules::AlertsConfig {
            default_rules: false,
            rules: vec![rule.clone()],
            ..Default::default()
        },
        ..support::loopback(&log)
    };
    let a = serve(config(), EngineConfig::default()).await.unwrap();
    let b = serve(config(), EngineConfig::default()).await.unwrap();
    let client = streamsight_testkit::http::client();
    let get_with = async |node: &Running, path: &str, key: &str| {
        let response = client
            .get(format!("http://{}{path}", node.api_addr))
            .bearer_auth(key)
            .send()
            .await
            .unwrap();
        (
            response.status().as_u16(),
            response.json::<Value>().await.unwrap_or_default(),
        )
    };
    eventually(60, "both nodes holding shards", async || {
        let (_, nodes) = get_with(&a, "/api/v1/nodes", &read.token).await;
        let owners = nodes["owners"].as_array()?;
        let holders: std::collections::BTreeSet<&str> = owners.iter().filter_map(|o| o["node"].as_str()).collect();
        (owners.len() == 4 && owners.iter().all(|o| o["node"].is_string()) && holders.len() == 2).then_some(())
    })
    .await;
    let topics: Vec<String> = (0..8).map(|i| format!("topic-{i}")).collect();
    let body = payload_of_topics(now_ns() - 60_000_000_000, &topics, 1_000, 400);
    let accepted = client
        .post(format!("http://{}/v0.1/pipeline_stats", a.intake_addr))
        .bearer_auth(&ingest.token)
        .header("Content-Type", "application/msgpack")
        .header("Content-Encoding", "gzip")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.status().as_u16(), 202);
    // Whichever node evaluates asks the other with its peer key (the API
    // wants keys): the alert fires on more than either node's part, and
    // both list it; the evaluator's value is the whole once both parts are
    // applied (the other shows the value stored when it fired).
    let value = async |node: &Running| {
        let (_, alerts) = get_with(node, "/api/v1/alerts", &read.token).await;
        let firing = |x: &&Value| x["rule"] == "billing_behind" && x["state"] == "firing";
        alerts["alerts"].as_array()?.iter().find(firing)?["value"].as_f64()
    };
    for node in [&a, &b] {
        let fired_at = eventually(60, "the rule firing", async || value(node).await).await;
        assert!(fired_at > 2_404.0, "fired at {fired_at}: one node's part");
    }
    eventually(60, "the whole group's lag", async || {
        let whole = [value(&a).await, value(&b).await].contains(&Some(4_808.0));
        whole.then_some(())
    })
    .await;
    // A peer key no live node announced opens nothing.
    let forged = format!("sspeer_{}", "ab".repeat(32));
    assert_eq!(get_with(&a, "/api/v1/lag", &forged).await.0, 401);
    a.shutdown().await;
    b.shutdown().await;
    drop(broker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journey_whose_spans_are_in_every_shard_is_whole_on_any_node() {
    let broker = Broker::start("journeys");
    let log = broker.log("journeys-log?partitions=4&timeout_ms=3000&mode=sharded");
    let client = streamsight_testkit::http::client();
    let config = || {
        let mut c = support::loopback(&log);
        c.journeys.decision_wait = Duration::from_secs(3600);
        c
    };
    let nodes = [
        serve(config(), EngineConfig::default()).await.unwrap(),
        serve(config(), EngineConfig::default()).await.unwrap(),
    ];
    // topic-0..3 are in shards 1, 2, 3, 0: whichever way the shards fall,
    // each node holds some of the trace's spans.
    let topics: Vec<String> = (0..4).map(|i| format!("topic-{i}")).collect();
    assert_eq!(
        post(
            &client,
            &nodes[0],
            payload_of_topics(now_ns() - 60_000_000_000, &topics, 1_000, 400)
        )
        .await,
        202
    );
    for node in &nodes {
        assert_eq!(complete_rows(&client, node, 4).await.len(), 4);
    }
    // The second node joins the shards' group after the first held them
    // all: until it has caught up with its share, a shard is held by nobody
    // (and said missing). Asked once both hold theirs.
    for node in &nodes {
        eventually(60, "both nodes holding their shards", async || {
            let (_, lag) = get(&client, node, "/api/v1/lag?group=billing").await;
            let holders = lag["shards"]["nodes"].as_array()?.len();
            (holders == 2 && lag["shards"]["missing"].as_array()?.is_empty()).then_some(())
        })
        .await;
    }
    // One trace sends to every topic (a Datadog tracer's produce spans).
    let start = now_ns() as i64;
    let spans: Vec<Value> = topics
        .iter()
        .enumerate()
        .map(|(i, topic)| {
            serde_json::json!({
                "service": "checkout", "name": "kafka.produce", "resource": format!("Produce Topic {topic}"),
                "trace_id": 77u64, "span_id": 100 + i as u64, "parent_id": 0u64,
                "start": start + i as i64 * 1_000_000, "duration": 1_000i64, "error": 0,
                "meta": {"kafka.topic": topic, "span.kind": "producer"},
                "metrics": {"kafka.partition": 0.0, "kafka.message_offset": 41.0}
            })
        })
        .collect();
    let sent = client
        .put(format!("http://{}/v0.4/traces", nodes[1].intake_addr))
        .header("Content-Type", "application/msgpack")
        .body(rmp_serde::to_vec_named(&vec![spans]).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status().as_u16(), 200);
    for node in &nodes {
        let journey = eventually(30, "the whole journey", async || {
            let (status, j) = get(&client, node, "/api/v1/journeys/77").await;
            let spans = j["steps"].as_array()?.iter().filter(|s| s["kind"] == "span").count();
            (status == 200 && spans == 4).then_some(j)
        })
        .await;
        assert_eq!(journey["shards"]["missing"], serde_json::json!([]), "{journey:#}");
        // The message is the first send's; its groups' positions come from
        // the node holding its topic, wherever the journey was asked.
        assert_eq!(
            (
                journey["message"]["topic"].as_str(),
                journey["message"]["offset"].as_i64()
            ),
            (Some("topic-0"), Some(41)),
            "{journey:#}"
        );
        let verdicts = journey["verdicts"].as_array().unwrap();
        assert!(verdicts.iter().any(|v| v["group"] == "billing"), "{journey:#}");
    }
    for node in nodes {
        node.shutdown().await;
    }
    drop(broker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_of_every_shard_are_listed_on_any_node() {
    use streamsight_core::{Millis, Observation, Partition, Record};
    let broker = Broker::start("events");
    let log = broker.log("events-log?partitions=4&timeout_ms=3000&mode=sharded");
    let client = streamsight_testkit::http::client();
    let nodes = [start(&log).await, start(&log).await];
    let directory = shards_spread(&client, &nodes[0], 2).await;
    // A data loss on topic-0 (shard 1), seen by the node holding it.
    let (first, owners) = (&directory["node"], &directory["owners"]);
    let holder = if owners[1]["node"] == *first {
        &nodes[0]
    } else {
        &nodes[1]
    };
    let other = if std::ptr::eq(holder, &nodes[0]) {
        &nodes[1]
    } else {
        &nodes[0]
    };
    let p = Partition {
        cluster: "prod",
        topic: "topic-0",
        partition: 0,
    };
    let at = Millis((now_ns() / 1_000_000) as i64);
    let observe = |o: Observation<'_>| Record::Observation {
        at,
        observation: o.to_owned(),
    };
    holder.shared.apply(&[
        observe(Observation::Produced {
            partition: p,
            offset: 100,
        }),
        observe(Observation::Committed {
            group: "billing",
            partition: p,
            offset: 10,
        }),
        observe(Observation::LogStart {
            partition: p,
            offset: 50,
        }),
    ]);
    let (_, events) = get(&client, other, "/api/v1/events").await;
    let losses: Vec<&Value> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "data_loss")
        .collect();
    assert_eq!(losses.len(), 1, "{events:#}");
    assert_eq!(
        (losses[0]["topic"].as_str(), losses[0]["messages"].as_i64()),
        (Some("topic-0"), Some(40))
    );
    assert_eq!(events["shards"]["missing"], serde_json::json!([]));
    for node in nodes {
        node.shutdown().await;
    }
    drop(broker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_sharded_log_any_node_shows_the_poll_of_a_cluster_another_polls() {
    let broker = Broker::start("clusters");
    let log = broker.log("clusters-log?partitions=2&timeout_ms=3000&mode=sharded");
    let (_mock, polled) = mock_cluster();
    let node = || polling_node(&log, &polled);
    let client = streamsight_testkit::http::client();
    let nodes = [node().await, node().await];
    shards_spread(&client, &nodes[0], 2).await;
    // One node polls; both show its polls and what the brokers said.
    for node in &nodes {
        eventually(30, "the cluster's last poll", async || {
            let (_, clusters) = get(&client, node, "/api/v1/clusters").await;
            let mock = &clusters["clusters"]["mock"];
            (mock["poller"]["polls"].as_u64()? >= 3 && mock["last_poll"]["metadata_ok"] == true).then_some(())
        })
        .await;
    }
    for node in nodes {
        node.shutdown().await;
    }
    drop(broker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_the_log_holds_that_cannot_be_used_is_said_so_and_the_shard_read_whole() {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let broker = Broker::start("hostile-snapshots");
    let log = broker.log("hostile-log?partitions=2&timeout_ms=3000&mode=sharded&snapshot_ms=200");
    let client = streamsight_testkit::http::client();
    let topics: Vec<String> = (0..4).map(|i| format!("topic-{i}")).collect();
    let first = start(&log).await;
    ready(&client, &first).await;
    let body = payload_of_topics(now_ns() - 60_000_000_000, &topics, 1_000, 400);
    assert_eq!(post(&client, &first, body).await, 202);
    let want = complete_rows(&client, &first, 4).await;
    eventually(30, "a snapshot of both shards", async || {
        (counter(&client, &first, "streamsight_shard_snapshots_written_total").await >= 2).then_some(())
    })
    .await;
    first.shutdown().await;

    // Someone with access to the log writes over the manifests: one names
    // chunks that are not there and an offset far past the shard's end (taken
    // at its word, the shard's records would be skipped); the other names a
    // chunk of garbage.
    let producer: BaseProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &broker.tansu.bootstrap)
        .create()
        .unwrap();
    let mut chunk = 5u64.to_le_bytes().to_vec();
    chunk.extend_from_slice(&0u32.to_le_bytes());
    chunk.extend_from_slice(b"not a snapshot at all");
    producer
        .send(
            BaseRecord::to("hostile-log-snapshot-chunks")
                .partition(1)
                .key("0/0")
                .payload(&chunk),
        )
        .unwrap();
    let manifest = |id: u64, bytes: usize| {
        serde_json::json!({ "id": id, "slot": 0, "chunks": 1, "first": 0, "bytes": bytes, "offset": 1_000_000 })
            .to_string()
    };
    let (missing, garbage) = (manifest(1, 10), manifest(5, chunk.len() - 12));
    producer
        .send(
            BaseRecord::to("hostile-log-snapshots")
                .partition(0)
                .key("0")
                .payload(&missing),
        )
        .unwrap();
    producer
        .send(
            BaseRecord::to("hostile-log-snapshots")
                .partition(1)
                .key("1")
                .payload(&garbage),
        )
        .unwrap();
    producer.flush(Duration::from_secs(10)).unwrap();

    let second = start(&log).await;
    ready(&client, &second).await;
    assert_eq!(
        complete_rows(&client, &second, 4).await,
        want,
        "every shard read from its start"
    );
    assert_eq!(
        counter(&client, &second, "streamsight_shard_snapshot_restore_failures_total").await,
        2
    );
    assert_eq!(
        counter(&client, &second, "streamsight_shard_snapshots_restored_total").await,
        0
    );
    second.shutdown().await;
    drop(broker);
}
