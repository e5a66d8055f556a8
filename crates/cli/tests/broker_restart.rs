//! The polled broker killed and started again (Apache Kafka and tansu, one
//! body each; `kill -9`, the same port and data): while it is down, a polled
//! group's lag is never a fresh 0 and never `ok`, the probe reads `down`; once
//! it is back, the same collector (no restart) polls again with no false
//! `rewind` or `data_loss`, the probe round-trips again and the DLQ monitor
//! reads the dead letters written after the restart.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

mod support;

use serde_json::Value;
use std::time::Duration;
use streamsight_testkit::http::get_json;
use streamsight_testkit::{BrokerKind, RestartableBroker, Watchdog, eventually};

/// The `ledger` group's one row: (lag messages, status, broker unreachable).
async fn ledger(client: &reqwest::Client, api: &str) -> Option<(Option<i64>, String, bool)> {
    let lag = get_json(client, &format!("{api}/api/v1/lag?group=ledger")).await;
    let row = lag["rows"].as_array()?.first()?.clone();
    Some((
        row["lag_messages"].as_i64(),
        row["status"].as_str().unwrap_or("").to_owned(),
        row["broker_unreachable"].as_bool().unwrap_or(false),
    ))
}

/// The probe's partitions: (status, received) each.
async fn probe(client: &reqwest::Client, api: &str) -> Vec<(String, u64)> {
    let probes = get_json(client, &format!("{api}/api/v1/probes")).await;
    probes["probes"][0]["report"]["partitions"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .map(|p| {
                    (
                        p["status"].as_str().unwrap_or("").to_owned(),
                        p["received"].as_u64().unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Dead letters the monitor has read from `orders.dlq`.
async fn dead_letters_read(client: &reqwest::Client, api: &str) -> u64 {
    let dlq: Value = get_json(client, &format!("{api}/api/v1/dlq")).await;
    dlq["clusters"][0]["topics"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["dlq_topic"] == "orders.dlq")
        .filter_map(|t| t["read"].as_u64())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poller_probe_and_dlq_monitor_recover_when_apache_kafka_comes_back() {
    recover_when_the_broker_comes_back(BrokerKind::ApacheKafka).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poller_probe_and_dlq_monitor_recover_when_tansu_comes_back() {
    recover_when_the_broker_comes_back(BrokerKind::Tansu).await;
}

async fn recover_when_the_broker_comes_back(kind: BrokerKind) {
    let _watchdog = Watchdog::arm("the broker restart test", Duration::from_secs(600));
    let mut broker = RestartableBroker::start(kind);
    let bootstrap = broker.bootstrap.clone();
    support::fill_topic(&bootstrap, "payments", 1, 10).await;
    support::seed_commits(&bootstrap, "payments", "ledger", &[4]);
    support::fill_topic(&bootstrap, "streamsight-probe", 2, 0).await;
    support::dead_letters(&bootstrap, 3, 0).await;

    let toml = format!(
        r#"
[[serve.clusters]]
name = "t"
bootstrap = ["{bootstrap}"]
poll_interval = "1s"
request_timeout = "2s"

[[serve.probes]]
name = "t"
bootstrap = "{bootstrap}"
interval = "100ms"
sla = "3s"

[[serve.dlq]]
name = "t"
bootstrap = "{bootstrap}"
refresh = "1s"
"#
    );
    let (_collector, _, api) = support::serve_with("broker-restart", &toml, "memory://");
    let client = reqwest::Client::new();

    // Up: lag 6, the probe round-trips on both partitions, 3 dead letters read.
    eventually(60, "the poller, the probe and the DLQ monitor to report", async || {
        let lag = ledger(&client, &api).await?;
        let probe = probe(&client, &api).await;
        let read = dead_letters_read(&client, &api).await;
        let probed = probe.len() == 2 && probe.iter().all(|(s, r)| s == "ok" && *r > 0);
        (lag.0 == Some(6) && !lag.2 && probed && read == 3).then_some(())
    })
    .await;

    // Down: lag never a fresh 0 and never ok; the probe goes down.
    broker.kill();
    let down = eventually(60, "the collector to see the broker gone", async || {
        let lag = ledger(&client, &api).await?;
        assert_ne!(lag.0, Some(0), "lag read 0 while the broker was down: {lag:?}");
        let probe = probe(&client, &api).await;
        (lag.2 && lag.1 != "ok" && probe.iter().all(|(s, _)| s == "down")).then_some((lag, probe))
    })
    .await;
    eprintln!(
        "{}: broker down: ledger {:?}, probe {:?}",
        broker.label(),
        down.0,
        down.1
    );
    let received_before: u64 = down.1.iter().map(|(_, r)| r).sum();

    // Back on the same port and data, with two more dead letters.
    broker.restart();
    let producer: rdkafka::producer::FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &broker.bootstrap)
        .create()
        .unwrap();
    for i in 3..5 {
        let value = format!("{{\"order\":{i}}}");
        let record = rdkafka::producer::FutureRecord::<(), _>::to("orders.dlq").payload(&value);
        producer.send(record, Duration::from_secs(10)).await.unwrap();
    }
    let up = eventually(
        120,
        "the poller, the probe and the DLQ monitor to recover",
        async || {
            let lag = ledger(&client, &api).await?;
            assert_ne!(lag.0, Some(0), "lag read 0 after the broker came back: {lag:?}");
            assert!(
                lag.1 != "rewind" && lag.1 != "data_loss",
                "a restart read as {}: {lag:?}",
                lag.1
            );
            let probe = probe(&client, &api).await;
            let received: u64 = probe.iter().map(|(_, r)| r).sum();
            let read = dead_letters_read(&client, &api).await;
            let probed = probe.len() == 2 && probe.iter().all(|(s, _)| s != "down") && received > received_before;
            (lag.0 == Some(6) && !lag.2 && probed && read == 5).then_some((lag, probe, read))
        },
    )
    .await;
    eprintln!(
        "{}: broker back: ledger {:?}, probe {:?}, dead letters read {}",
        broker.label(),
        up.0,
        up.1,
        up.2
    );
}
