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
        Command::new(bin).args([
            "dev-kafka",
            "--topic",
            &format!("{TOPIC}:1"),
            "--topic",
            &format!("{TOPIC}.dlq:1"),
        ]),
        "bootstrap=",
    );
    let bootstrap = support::field(&line, "bootstrap");
    // The mock broker cannot list groups: the poller is told which to read.
    let config = format!(
        "[serve]\nhistory_interval = \"500ms\"\n\n[serve.journeys]\ndecision_wait = \"20s\"\nhealthy_share = 0.0\n\n\
         [[serve.clusters]]\nname = \"local\"\nbootstrap = [\"{bootstrap}\"]\npoll_interval = \"1s\"\ngroups = [\"{GROUP}\"]\n\n\
         [[serve.dlq]]\nname = \"local\"\nbootstrap = \"{bootstrap}\"\ntopics = [\"{TOPIC}.dlq\"]\nrefresh = \"1s\"\n"
    );
    let (_serve, line) = support::serve_with_line("journeys", &config, "memory://");
    let (api, otlp) = (support::field(&line, "api"), support::field(&line, "otlp"));

    let (_pipeline, _) = start(
        Command::new(python())
            .arg(script("otel_pipeline.py"))
            .args([&bootstrap, TOPIC, GROUP, &otlp, "5", "1", "2", "3"]),
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
    // The instrumentation records the send's destination as "unknown" and
    // the topic only in the span's name: the name says it.
    assert_eq!(send["messaging"]["topic"], TOPIC, "{send:#}");
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

    // The third failed in a step of the application's own (an ERROR child
    // span and log line) while the instrumentation's process span ended well.
    let third = eventually(60, "the third record's journey", async || {
        let j = journey(2).await?;
        verdict(&j, GROUP).is_some().then_some(j)
    })
    .await;
    assert_eq!(
        verdict(&third, GROUP).as_deref(),
        Some("failed_processing"),
        "{third:#}"
    );
    let error = third["verdicts"][0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("CardExpired"), "{third:#}");

    // The fourth was dead-lettered, its letter keeping the message's own
    // timestamp: the step is dated when it was sent to the DLQ, by whom,
    // and the timeline runs forward.
    let fourth = eventually(60, "the fourth record dead-lettered", async || {
        let j = journey(3).await?;
        (verdict(&j, GROUP).as_deref() == Some("dead_lettered")).then_some(j)
    })
    .await;
    let steps = fourth["steps"].as_array().unwrap();
    let when = |s: &Value| match s["kind"].as_str() {
        Some("span") => s["start_ns"].as_i64().map(|n| n.div_euclid(1_000_000)),
        _ => s["at_ms"].as_i64(),
    };
    let times: Vec<i64> = steps.iter().filter_map(when).collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "steps out of time order: {times:?}"
    );
    let letter = steps.iter().find(|s| s["kind"] == "dead_letter").unwrap();
    assert_eq!(letter["service"], "shop-pipeline", "{letter:#}");
    let received = steps
        .iter()
        .find(|s| s["kind"] == "span" && s["messaging"]["operation"] == "process")
        .and_then(when)
        .unwrap();
    assert!(
        when(letter).unwrap() >= received,
        "dated before its consumer took it: {fourth:#}"
    );

    // `cluster` is honoured: a cluster the message is not on finds nothing.
    let on = |cluster: &str| {
        let (client, api) = (client.clone(), api.clone());
        let url = format!("{api}/api/v1/journeys?topic={TOPIC}&partition=0&offset=0&cluster={cluster}");
        async move { streamsight_testkit::http::get(&client, &url).await.0 }
    };
    assert_eq!(on("local").await, 200);
    assert_eq!(on("nope").await, 404);

    // A message known only from its dead letter is found by its offset too.
    let lonely = "4bf92f3577b34da6a3ce929d0e0e4736";
    let letter = streamsight_wire::dlq::Provenance {
        source_topic: Some("refunds".into()),
        source_partition: Some(0),
        source_offset: Some(7),
        stage: Some("processing".into()),
        error_class: Some("Timeout".into()),
        trace_id: Some(lonely.into()),
        ..Default::default()
    };
    let mut headers = rdkafka::message::OwnedHeaders::new();
    for (key, value) in letter.headers(streamsight_wire::dlq::Conventions::default()) {
        headers = headers.insert(rdkafka::message::Header {
            key,
            value: Some(&value),
        });
    }
    let producer: rdkafka::producer::FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    producer
        .send(
            rdkafka::producer::FutureRecord::<(), _>::to(&format!("{TOPIC}.dlq"))
                .payload("refund-7")
                .headers(headers),
            std::time::Duration::from_secs(10),
        )
        .await
        .unwrap();
    let found = eventually(60, "the lonely letter's journey by offset", async || {
        let body = get(
            &client,
            &format!("{api}/api/v1/journeys?topic=refunds&partition=0&offset=7"),
        )
        .await;
        body["journeys"].as_array()?.first().cloned()
    })
    .await;
    assert_eq!(found["trace_id"], lonely, "{found:#}");

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

    // Tail sampling (no healthy share here) decides 20 s after each trace's
    // first span: the third record's journey is kept whole, the producer's
    // trace with the consumer's that failed; a healthy one goes.
    let third_trace = third["trace_id"].as_str().unwrap().to_owned();
    let healthy = journey(4).await.unwrap()["trace_id"].as_str().unwrap().to_owned();
    eventually(60, "the healthy journey sampled out", async || {
        let (status, _) = streamsight_testkit::http::get(&client, &format!("{api}/api/v1/journeys/{healthy}")).await;
        (status == 404).then_some(())
    })
    .await;
    let kept = get(&client, &format!("{api}/api/v1/journeys/{third_trace}")).await;
    let kinds: Vec<&str> = kept["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["messaging"]["operation"].as_str())
        .collect();
    assert!(
        kinds.contains(&"send") && kinds.contains(&"process"),
        "kept whole: {kept:#}"
    );
    assert_eq!(verdict(&kept, GROUP).as_deref(), Some("failed_processing"));
}

/// opentelemetry-instrumentation-confluent-kafka 0.48b0, which services still
/// run, records a send whose topic is given by keyword with the destination
/// "unknown": the journey's send step takes the topic from the span's name
/// ("checkout send"), never `unknown[?]`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_instrumentation_s_send_is_named_by_its_span() {
    let python = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv-otel-0.48/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/test, which installs it",
        python.display()
    );
    let bin = env!("CARGO_BIN_EXE_streamsight");
    let (_kafka, line) = start(
        Command::new(bin).args(["dev-kafka", "--topic", "checkout:1"]),
        "bootstrap=",
    );
    let bootstrap = support::field(&line, "bootstrap");
    let config = format!(
        "[serve]\nhistory_interval = \"500ms\"\n\n[serve.journeys]\ndecision_wait = \"1h\"\n\n\
         [[serve.clusters]]\nname = \"local\"\nbootstrap = [\"{bootstrap}\"]\npoll_interval = \"1s\"\ngroups = [\"{GROUP}\"]\n"
    );
    let (_serve, line) = support::serve_with_line("journeys-otel-0.48", &config, "memory://");
    let (api, otlp) = (support::field(&line, "api"), support::field(&line, "otlp"));
    let (_pipeline, _) = start(
        Command::new(python)
            .arg(script("otel_pipeline.py"))
            .args([&bootstrap, "checkout", GROUP, &otlp, "1", "-1"]),
        "done",
    );
    let client = reqwest::Client::new();
    let j = eventually(60, "the journey of checkout[0]@0", async || {
        let body = get(
            &client,
            &format!("{api}/api/v1/journeys?topic=checkout&partition=0&offset=0"),
        )
        .await;
        body["journeys"].as_array()?.first().cloned()
    })
    .await;
    let send = j["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "span" && s["messaging"]["operation"] == "send")
        .cloned()
        .unwrap_or_else(|| panic!("no send step: {j:#}"));
    assert_eq!(send["name"], "checkout send", "{send:#}");
    assert_eq!(send["messaging"]["topic"], "checkout", "{send:#}");
}
