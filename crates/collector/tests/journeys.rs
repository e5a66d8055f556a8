//! Message journeys over real HTTP: OTLP protobuf spans and JSON logs on the
//! OTLP listener, a Datadog tracer's `/v0.4` spans on the intake, a Fluent Bit
//! `json_lines` body, found by W3C id, by Datadog 64-bit id and by offset, with
//! a verdict per group; kept across a restart; hostile bodies refused with the
//! reason and nothing else changed.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

mod support;

use prost::Message as _;
use serde_json::Value;
use std::time::Duration;
use streamsight_collector::{ServeConfig, serve};
use streamsight_core::{EngineConfig, Millis, Observation, Partition, Record};
use streamsight_wire::traces::otlp::{
    AnyValue, ExportTraceServiceRequest, KeyValue, PbLink, PbSpan, PbStatus, Resource, ResourceSpans, Scalar,
    ScopeSpans,
};

const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";

fn kv(key: &str, v: Scalar) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(v) }),
    }
}

use streamsight_testkit::now_ns;

/// A producer's send span in the trace, and a consumer's process span in a
/// trace of its own linked to it, as opentelemetry-instrumentation-confluent-kafka
/// makes them; the second message's processing fails.
fn otel_spans(offset: i64, failing: bool, consumer_trace: u8) -> ExportTraceServiceRequest {
    let trace = u128::from_str_radix(TRACE, 16).unwrap().to_be_bytes().to_vec();
    let t0 = now_ns();
    let send = PbSpan {
        trace_id: trace.clone(),
        span_id: 1u64.to_be_bytes().to_vec(),
        name: "orders send".into(),
        kind: 4,
        start_time_unix_nano: t0,
        end_time_unix_nano: t0 + 1_000_000,
        attributes: vec![
            kv("messaging.system", Scalar::String("kafka".into())),
            kv("messaging.destination", Scalar::String("orders".into())),
            kv("messaging.operation", Scalar::String("publish".into())),
        ],
        ..PbSpan::default()
    };
    let process = PbSpan {
        trace_id: vec![consumer_trace; 16],
        span_id: 2u64.to_be_bytes().to_vec(),
        name: "orders process".into(),
        kind: 5,
        start_time_unix_nano: t0 + 5_000_000,
        end_time_unix_nano: t0 + 6_000_000,
        attributes: vec![
            kv("messaging.system", Scalar::String("kafka".into())),
            kv("messaging.destination", Scalar::String("orders".into())),
            kv("messaging.kafka.partition", Scalar::Int(0)),
            kv("messaging.operation", Scalar::String("process".into())),
            kv("messaging.message.id", Scalar::String(format!("orders.0.{offset}"))),
        ],
        links: vec![PbLink {
            trace_id: trace,
            span_id: 1u64.to_be_bytes().to_vec(),
        }],
        status: failing.then(|| PbStatus {
            message: "CardDeclined".into(),
            code: 2,
        }),
        ..PbSpan::default()
    };
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", Scalar::String("shop".into()))],
            }),
            scope_spans: vec![ScopeSpans {
                spans: vec![send, process],
            }],
        }],
    }
}

async fn post(client: &reqwest::Client, url: &str, content_type: &str, body: Vec<u8>) -> reqwest::Response {
    client
        .post(url)
        .header("Content-Type", content_type)
        .body(body)
        .send()
        .await
        .unwrap()
}

use streamsight_testkit::http::get;

fn config(storage: &str) -> ServeConfig {
    let mut c = support::loopback(storage);
    c.journeys.decision_wait = Duration::from_secs(3600);
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_logs_and_lines_from_every_source_make_one_journey_with_verdicts() {
    let dir = std::env::temp_dir().join(format!("streamsight-journeys-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let storage = format!("sqlite://{}/s.db", dir.display());
    let running = serve(config(&storage), EngineConfig::default()).await.unwrap();
    let client = reqwest::Client::new();
    let otlp = format!("http://{}", running.otlp_addr);
    let api = format!("http://{}/api/v1", running.api_addr);

    // Two groups read orders[0]: billing is past offset 41, fraud is not.
    let p = Partition {
        cluster: "prod",
        topic: "orders",
        partition: 0,
    };
    let at = Millis(now_ns() as i64 / 1_000_000);
    let mut facts = vec![Record::Observation {
        at,
        observation: Observation::Produced {
            partition: p,
            offset: 50,
        }
        .to_owned(),
    }];
    for (group, offset) in [("billing", 42), ("fraud", 30)] {
        facts.push(Record::Observation {
            at,
            observation: Observation::Committed {
                group,
                partition: p,
                offset,
            }
            .to_owned(),
        });
    }
    running.shared.apply(&facts);

    let r = post(
        &client,
        &format!("{otlp}/v1/traces"),
        "application/x-protobuf",
        otel_spans(41, true, 7).encode_to_vec(),
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/x-protobuf");
    let logs = format!(
        r#"{{"resourceLogs":[{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"billing"}}}}]}},
        "scopeLogs":[{{"logRecords":[{{"timeUnixNano":"{}","severityText":"ERROR","body":{{"stringValue":"card declined"}},"traceId":"{}"}}]}}]}}]}}"#,
        now_ns(),
        "07".repeat(16)
    );
    let r = post(
        &client,
        &format!("{otlp}/v1/logs"),
        "application/json",
        logs.into_bytes(),
    )
    .await;
    assert_eq!(r.status(), 200);
    // Fluent Bit: a line naming the producer's trace by its Datadog (decimal) id.
    let line = format!(
        r#"{{"date":1.7e9,"log":"order accepted","dd":{{"trace_id":"{}"}}}}"#,
        0x8448_eb21_1c80_319c_u64
    );
    let r = post(
        &client,
        &format!("{otlp}/ingest/json_lines"),
        "application/json",
        line.into_bytes(),
    )
    .await;
    assert_eq!(r.status(), 200);
    // A Datadog tracer's consume span for fraud, 64-bit id with the upper half in _dd.p.tid.
    let dd = vec![vec![serde_json::json!({
        "service": "fraud-check", "name": "kafka.consume", "resource": "kafka.consume",
        "trace_id": 0x8448_eb21_1c80_319c_u64, "span_id": 9u64, "parent_id": 1u64,
        "start": now_ns() as i64 + 9_000_000, "duration": 1_000i64, "error": 0,
        "meta": {"kafka.topic": "orders", "kafka.group_id": "fraud", "_dd.p.tid": "0af7651916cd43dd"},
        "metrics": {"kafka.partition": 0.0, "kafka.message_offset": 41.0}
    })]];
    let r = client
        .put(format!("http://{}/v0.4/traces", running.intake_addr))
        .header("Content-Type", "application/msgpack")
        .body(rmp_serde::to_vec_named(&dd).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.json::<Value>().await.unwrap()["rate_by_service"].is_object());

    let check = |j: &Value| {
        assert_eq!(j["trace_id"], TRACE, "{j:#}");
        assert_eq!(j["message"]["topic"], "orders");
        assert_eq!(j["message"]["offset"], 41);
        assert_eq!(j["message"]["cluster"], "prod", "the only cluster with the topic");
        let kinds: Vec<&str> = j["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds.iter().filter(|k| **k == "span").count(), 3, "{j:#}");
        assert_eq!(kinds.iter().filter(|k| **k == "log").count(), 2, "{j:#}");
        let verdict = |g: &str| {
            j["verdicts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["group"] == g)
                .cloned()
                .unwrap_or_else(|| panic!("no verdict for {g}: {j:#}"))
        };
        // The OTel span names no group and two groups read the topic: it
        // counts for neither; the Datadog span names fraud.
        assert_eq!(verdict("billing")["verdict"], "consumed_no_processing_span");
        assert_eq!(verdict("fraud")["verdict"], "processed");
    };
    let (status, by_w3c) = get(&client, &format!("{api}/journeys/{TRACE}")).await;
    assert_eq!(status, 200, "{by_w3c}");
    check(&by_w3c);
    let (_, by_dd) = get(&client, &format!("{api}/journeys/{}", 0x8448_eb21_1c80_319c_u64)).await;
    assert_eq!(by_dd["trace_id"], TRACE, "a Datadog 64-bit id finds the same journey");
    let (status, by_offset) = get(&client, &format!("{api}/journeys?topic=orders&partition=0&offset=41")).await;
    assert_eq!(status, 200);
    assert!(
        by_offset["journeys"]
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j["trace_id"] == TRACE),
        "{by_offset:#}"
    );

    // Hostile input: refused with the reason, nothing stored.
    for (path, ct, body, status) in [
        ("/v1/traces", "text/plain", b"x".to_vec(), 415),
        (
            "/v1/traces",
            "application/x-protobuf",
            vec![0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f],
            400,
        ),
        ("/v1/traces", "application/json", b"{".to_vec(), 400),
        ("/v1/logs", "application/json", b"42".to_vec(), 400),
        ("/ingest/json_lines", "text/plain", b"{}".to_vec(), 415),
        ("/nope", "application/json", b"{}".to_vec(), 404),
    ] {
        let r = post(&client, &format!("{otlp}{path}"), ct, body).await;
        assert_eq!(r.status().as_u16(), status, "{path} {ct}");
        let body: Value = r.json().await.unwrap();
        assert!(body["error"].is_string(), "{body}");
    }
    let (status, _) = get(&client, &format!("{api}/journeys/not-a-trace")).await;
    assert_eq!(status, 400);
    let (status, _) = get(&client, &format!("{api}/journeys/{}", "ab".repeat(16))).await;
    assert_eq!(status, 404);

    // Kept across a restart: replayed from the store.
    running.shutdown().await;
    let running = serve(config(&storage), EngineConfig::default()).await.unwrap();
    running.shared.apply(&facts);
    let api = format!("http://{}/api/v1", running.api_addr);
    let (status, again) = get(&client, &format!("{api}/journeys/{TRACE}")).await;
    assert_eq!(status, 200);
    check(&again);
    // What the store holds is in /metrics.
    let metrics = streamsight_testkit::http::get_text(&client, &format!("http://{}/metrics", running.api_addr)).await;
    let held = |what: &str| {
        streamsight_testkit::http::sample(&metrics, &format!("streamsight_journeys_held{{what=\"{what}\"}}"))
    };
    assert!(held("traces").is_some_and(|n| n >= 1.0), "{metrics}");
    assert!(held("spans").is_some_and(|n| n >= 1.0), "{metrics}");
    assert!(metrics.contains("streamsight_journeys_let_go_total{why=\"evicted\"}"));
    running.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_grows_beyond_its_limits_is_refused() {
    let mut c = config("memory://");
    c.journeys.max_items_per_request = 10;
    c.limits.payload.max_decompressed_bytes = 1 << 20;
    let running = serve(c, EngineConfig::default()).await.unwrap();
    let client = reqwest::Client::new();
    let otlp = format!("http://{}", running.otlp_addr);
    // 6 requests' worth of spans in one: over the count.
    let mut many = otel_spans(1, false, 7);
    for _ in 0..5 {
        let more = otel_spans(1, false, 7).resource_spans;
        many.resource_spans.extend(more);
    }
    let r = post(
        &client,
        &format!("{otlp}/v1/traces"),
        "application/x-protobuf",
        many.encode_to_vec(),
    )
    .await;
    assert_eq!(r.status(), 413);
    assert_eq!(r.json::<Value>().await.unwrap()["error"], "too_many_items");
    // A gzip bomb: 64 MiB of zeros in a few KiB.
    let bomb = {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&vec![0u8; 64 << 20]).unwrap();
        gz.finish().unwrap()
    };
    assert!(bomb.len() < 128 << 10);
    let r = client
        .post(format!("{otlp}/v1/traces"))
        .header("Content-Type", "application/x-protobuf")
        .header("Content-Encoding", "gzip")
        .body(bomb)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    assert_eq!(r.json::<Value>().await.unwrap()["error"], "decompressed_too_large");
    assert_eq!(
        streamsight_collector::journeys::of(&running.shared).stats().spans,
        0,
        "nothing of them kept"
    );
    running.shutdown().await;

    // Over the tenant's ingest rate: told when to come back.
    let mut c = config("memory://");
    c.limits.ingest_records_per_second = 1;
    let running = serve(c, EngineConfig::default()).await.unwrap();
    let otlp = format!("http://{}", running.otlp_addr);
    // 12 spans: over the burst of 10, taken once when the bucket is full.
    let mut twelve = otel_spans(1, false, 7);
    for _ in 0..5 {
        twelve.resource_spans.extend(otel_spans(1, false, 7).resource_spans);
    }
    let body = twelve.encode_to_vec();
    for (attempt, want) in [(1, 200), (2, 429)] {
        let r = post(
            &client,
            &format!("{otlp}/v1/traces"),
            "application/x-protobuf",
            body.clone(),
        )
        .await;
        assert_eq!(r.status().as_u16(), want, "attempt {attempt}");
        if want == 429 {
            assert!(r.headers().contains_key("retry-after"));
        }
    }
    running.shutdown().await;
}
