//! The real thing: a Python producer and consumer on confluent-kafka, instrumented
//! by the real `ddtrace` package with Data Streams Monitoring on, talking to a real
//! Kafka-protocol broker (`streamsight dev-kafka`) and reporting to a running
//! `streamsight serve`. streamsight's lag must equal the broker's own answer.
//!
//! The Python packages live in `.venv` at the workspace root; `scripts/test`
//! installs them.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

mod support;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;
use streamsight_testkit::eventually;
use support::{python, script, start};

const TOPIC: &str = "orders";
const GROUP: &str = "shop-billing";
const PRODUCED: usize = 100;
const CONSUMED: usize = 40;

use streamsight_testkit::http::get_json as get;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ddtrace_python_lag_matches_the_broker() {
    let python = python();
    let bin = env!("CARGO_BIN_EXE_streamsight");
    let (_kafka, line) = start(
        Command::new(bin).args(["dev-kafka", "--topic", "orders:1"]),
        "bootstrap=",
    );
    let bootstrap = support::field(&line, "bootstrap");
    // The broker is polled as `dev` too: what the tracer calls it by its id
    // (`mockCluster…`) and what the poller calls it by its name are one.
    let config = format!(
        "[[serve.clusters]]\nname = \"dev\"\nbootstrap = [\"{bootstrap}\"]\npoll_interval = \"1s\"\ngroups = [\"{GROUP}\"]\n"
    );
    let (_serve, intake, api) = support::serve_with("ddtrace-python", &config, "memory://");
    let client = reqwest::Client::new();
    let cluster_id = eventually(30, "the poller to learn the cluster's id", async || {
        let clusters = get(&client, &format!("{api}/api/v1/clusters")).await;
        Some(clusters["clusters"]["dev"]["poller"]["cluster_id"].as_str()?.to_owned())
    })
    .await;
    assert!(cluster_id.starts_with("mockCluster"), "{cluster_id}");
    let traced = |service: &str, args: &[&str]| {
        let mut c = Command::new(&python);
        c.args(args)
            .env("DD_SERVICE", service)
            .env("DD_ENV", "test")
            .env("DD_TRACE_AGENT_URL", &intake)
            .env("DD_DATA_STREAMS_ENABLED", "true")
            .env("DD_REMOTE_CONFIGURATION_ENABLED", "false")
            .env("DD_INSTRUMENTATION_TELEMETRY_ENABLED", "false");
        c
    };

    let produced = PRODUCED.to_string();
    let producer_script = script("dsm_producer.py");
    let (_producer, line) = start(
        &mut traced(
            "shop-checkout",
            &[producer_script.to_str().unwrap(), &bootstrap, TOPIC, &produced],
        ),
        "produced",
    );
    assert_eq!(line, format!("produced {PRODUCED} last_offset={}", PRODUCED - 1));
    // The tracer flushes every 10 s. Commits carry no cluster id: let the produce
    // side name the cluster first, as it would long before in a running system.
    eventually(60, "the producer's Data Streams payload", async || {
        let p = get(&client, &format!("{api}/api/v1/partitions")).await;
        p["partitions"]
            .as_array()?
            .iter()
            .any(|r| r["end_offset"] == PRODUCED)
            .then_some(())
    })
    .await;

    let consumed = CONSUMED.to_string();
    let consumer_script = script("dsm_consumer.py");
    let (_consumer, _) = start(
        &mut traced(
            "shop-billing",
            &[consumer_script.to_str().unwrap(), &bootstrap, TOPIC, GROUP, &consumed],
        ),
        "consumed",
    );

    // The broker's truth, asked by a client of our own.
    let broker: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", GROUP)
        .create()
        .unwrap();
    let (_, high) = broker.fetch_watermarks(TOPIC, 0, Duration::from_secs(10)).unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(TOPIC, 0);
    let committed = broker.committed_offsets(tpl, Duration::from_secs(10)).unwrap();
    let Offset::Offset(committed) = committed.find_partition(TOPIC, 0).unwrap().offset() else {
        panic!("the group has no committed offset");
    };
    assert_eq!((high, committed), (PRODUCED as i64, CONSUMED as i64));
    let truth = high - committed;

    // Both tracers' Data Streams payloads in (their backlogs with them): the
    // pathway from the producer through the topic to the consumer.
    eventually(60, "both tracers' pathways", async || {
        let graph = get(&client, &format!("{api}/api/v1/pathways?window_seconds=600")).await;
        let edges: Vec<(&str, &str)> = graph["edges"]
            .as_array()?
            .iter()
            .filter_map(|e| Some((e["from"].as_str()?, e["to"].as_str()?)))
            .collect();
        (edges.contains(&("service:shop-checkout", "topic:orders"))
            && edges.contains(&("topic:orders", "service:shop-billing")))
        .then_some(())
    })
    .await;

    let row = eventually(60, "streamsight's lag for the group", async || {
        let lag = get(&client, &format!("{api}/api/v1/lag?group={GROUP}")).await;
        let row = lag["rows"].as_array()?.first()?.clone();
        (row["committed_offset"] == committed).then_some(row)
    })
    .await;
    assert_eq!(row["lag_messages"], truth, "{row}");
    assert_eq!(row["end_offset"], high, "{row}");
    assert!(row["lag_seconds"].as_f64().unwrap() > 0.0, "{row}");
    assert_eq!(row["cluster"], "dev", "{row}");
    // One cluster, one row per partition: no copy under the tracer's id.
    let lag = get(&client, &format!("{api}/api/v1/lag")).await;
    let rows: Vec<(&str, &str, &str, i64)> = lag["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["cluster"].as_str().unwrap(),
                r["group"].as_str().unwrap(),
                r["topic"].as_str().unwrap(),
                r["partition"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows, [("dev", GROUP, TOPIC, 0)], "{lag}");
    let partitions = get(&client, &format!("{api}/api/v1/partitions")).await;
    let clusters: Vec<&str> = partitions["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["topic"] == TOPIC)
        .map(|p| p["cluster"].as_str().unwrap())
        .collect();
    assert_eq!(clusters, ["dev"], "{partitions}");

    let metrics = streamsight_testkit::http::get_text(&client, &format!("{api}/metrics")).await;
    assert!(
        metrics.contains(&format!("group=\"{GROUP}\",topic=\"orders\",partition=\"0\"}} {truth}")),
        "{metrics}"
    );

    // The same tracer's spans (its /v0.4 or /v0.5 traces, decoded, not dropped):
    // the journey of the record at offset 5, found by its offset, names the
    // consumer's group, which processed it.
    let journey = eventually(60, "the Datadog spans' journey", async || {
        let body = get(
            &client,
            &format!("{api}/api/v1/journeys?topic={TOPIC}&partition=0&offset=5"),
        )
        .await;
        let j = body["journeys"].as_array()?.first()?.clone();
        let processed = j["verdicts"]
            .as_array()?
            .iter()
            .any(|v| v["group"] == GROUP && v["verdict"] == "processed");
        processed.then_some(j)
    })
    .await;
    let spans: Vec<&Value> = journey["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "span")
        .collect();
    assert!(spans.iter().all(|s| s["source"] == "datadog"), "{journey:#}");
    assert!(
        spans
            .iter()
            .any(|s| s["messaging"]["group"] == GROUP && s["messaging"]["offset"] == 5),
        "{journey:#}"
    );
    assert_eq!(journey["message"]["offset"], 5, "{journey:#}");
}
