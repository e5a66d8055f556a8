//! Journeys with the real clients: a Python producer and consumer on
//! confluent-kafka, instrumented by opentelemetry-instrumentation-confluent-kafka
//! and exporting spans and logs with opentelemetry-exporter-otlp-proto-http to
//! `streamsight serve`'s OTLP listener, through a Kafka-protocol broker
//! (`streamsight dev-kafka`); a Fluent Bit `json_lines` body naming the same
//! trace; `streamsight journey ID` printing the timeline.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

mod support;

use serde_json::Value;
use std::process::Command;
use streamsight_testkit::eventually;
use support::{python, script, start};

const TOPIC: &str = "orders";
const GROUP: &str = "billing";

use streamsight_testkit::http::get_json as get;

fn verdict(j: &Value, group: &str) -> Option<String> {
    j["verdicts"]
        .as_array()?
        .iter()
        .find(|v| v["group"] == group)
        .and_then(|v| v["verdict"].as_str())
        .map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_otel_instrumented_pipeline_shows_each_message_path_and_where_it_stopped() {
    let bin = env!("CARGO_BIN_EXE_streamsight");
    let (_kafka, line) = start(
        Command::new(bin).args(["dev-kafka", "--topic", &format!("{TOPIC}:1")]),
        "bootstrap=",
    );
    let bootstrap = support::field(&line, "bootstrap");
    // The mock broker cannot list groups: the poller is told which to read.
    let config = format!(
        "[serve]\nhistory_interval = \"500ms\"\n\n[serve.journeys]\ndecision_wait = \"1h\"\n\n\
         [[serve.clusters]]\nname = \"local\"\nbootstrap = [\"{bootstrap}\"]\npoll_interval = \"1s\"\ngroups = [\"{GROUP}\"]\n"
    );
    let (_serve, line) = support::serve_with_line("journeys", &config, "memory://");
    let (api, otlp) = (support::field(&line, "api"), support::field(&line, "otlp"));

    let (_pipeline, _) = start(
        Command::new(python())
            .arg(script("otel_pipeline.py"))
            .args([&bootstrap, TOPIC, GROUP, &otlp, "3", "1"]),
        "done",
    );
    // Found by offset first (what a user holding a record has), then by trace id.
    let client = reqwest::Client::new();
    let journey = |offset: i64| {
        let (client, api) = (client.clone(), api.clone());
        async move {
            let body = get(
                &client,
                &format!("{api}/api/v1/journeys?topic={TOPIC}&partition=0&offset={offset}"),
            )
            .await;
            body["journeys"].as_array()?.first().cloned()
        }
    };
    let first = eventually(60, "the first record's journey with its verdict", async || {
        let j = journey(0).await?;
        (verdict(&j, GROUP).as_deref() == Some("processed")).then_some(j)
    })
    .await;
    let spans: Vec<&Value> = first["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "span")
        .collect();
    let send = spans
        .iter()
        .find(|s| s["messaging"]["operation"] == "send")
        .unwrap_or_else(|| panic!("no producer span: {first:#}"));
    let process = spans
        .iter()
        .find(|s| s["messaging"]["operation"] == "process")
        .unwrap_or_else(|| panic!("no consumer span: {first:#}"));
    assert_eq!(
        send["trace_id"], first["trace_id"],
        "the journey is the producer's trace"
    );
    assert_eq!(
        process["links"][0][0], first["trace_id"],
        "the consumer's span is linked to the producer's: {first:#}"
    );
    assert_eq!(first["message"]["offset"], 0);
    assert_eq!(first["message"]["cluster"], "local");
    let logs: Vec<&Value> = first["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "log")
        .collect();
    assert!(
        logs.iter()
            .any(|l| l["body"].as_str().unwrap_or("").contains("charged order-0")),
        "the consumer's log line, through OTel logs: {first:#}"
    );

    // The second record's processing failed.
    let second = eventually(60, "the second record's journey", async || {
        let j = journey(1).await?;
        verdict(&j, GROUP).is_some().then_some(j)
    })
    .await;
    assert_eq!(
        verdict(&second, GROUP).as_deref(),
        Some("failed_processing"),
        "{second:#}"
    );
    assert!(second["steps"].as_array().unwrap().iter().any(|s| s["kind"] == "log"
        && s["severity"] == "ERROR"
        && s["body"].as_str().unwrap_or("").contains("card declined")));

    // Fluent Bit ships a line carrying the first record's trace id.
    let trace_id = first["trace_id"].as_str().unwrap().to_owned();
    let line = format!("{{\"date\":1.7e9,\"log\":\"receipt mailed\",\"trace_id\":\"{trace_id}\"}}\n");
    let r = client
        .post(format!("{otlp}/ingest/json_lines"))
        .header("Content-Type", "application/json")
        .body(line)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let again = get(&client, &format!("{api}/api/v1/journeys/{trace_id}")).await;
    assert!(
        again["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["body"] == "receipt mailed"),
        "{again:#}"
    );

    // The CLI prints the same path.
    let (ok, out, err) = support::run(&["journey", &trace_id, "--collector", &api]);
    assert!(ok, "{err}");
    assert!(out.contains("orders send") && out.contains("orders process"), "{out}");
    assert!(out.contains(&format!("group {GROUP}: processed")), "{out}");
    assert!(out.contains("receipt mailed"), "{out}");
}
