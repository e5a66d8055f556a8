//! The collector over real HTTP, with a real SQLite file: tracer-shaped payloads
//! in, lag, pathways and metrics out; malformed payloads refused.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

use serde_json::Value;
use streamsight_collector::{Running, ServeConfig, serve};
use streamsight_core::EngineConfig;
use streamsight_wire::dsm::payload::{Backlog, Bucket, Payload, StatsPoint, encode};
use streamsight_wire::dsm::sketch::Mapping;

use streamsight_testkit::now_ns;

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("streamsight-{name}-{}-{}", std::process::id(), now_ns()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

async fn start(storage: String) -> Running {
    start_with(storage, ServeConfig::ephemeral()).await
}

async fn start_with(storage: String, mut base: ServeConfig) -> Running {
    base.limits.max_body_bytes = 1 << 20;
    base.limits.payload.max_decompressed_bytes = 4 << 20;
    let config = ServeConfig {
        intake_listen: "127.0.0.1:0".parse().unwrap(),
        api_listen: "127.0.0.1:0".parse().unwrap(),
        storage,
        ..base
    };
    serve(config, EngineConfig::default()).await.unwrap()
}

fn backlog(tags: &[&str], value: i64) -> Backlog {
    Backlog {
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        value,
    }
}

fn point(hash: u64, parent: u64, tags: &[&str], latency: f64) -> StatsPoint {
    let m = Mapping::default();
    StatsPoint {
        edge_tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        hash,
        parent_hash: parent,
        pathway_latency: m.encode(&[latency]),
        edge_latency: m.encode(&[latency]),
        payload_size: m.encode(&[120.0]),
        timestamp_type: "current".into(),
    }
}

/// The producer's payload: offsets 0..=1000 acked, then a failed send reported
/// the way dd-trace-java 1.8.0-1.67.1 does (offset -1, on partition 0 and -1).
fn producer_payload(start_ns: u64) -> Payload {
    let produce = |p: &str, v| backlog(&["type:kafka_produce", "topic:orders", p, "kafka_cluster_id:prod-1"], v);
    Payload {
        env: "prod".into(),
        service: "checkout".into(),
        lang: "java".into(),
        tracer_version: "1.60.0".into(),
        stats: vec![
            Bucket {
                start: start_ns,
                duration: 10_000_000_000,
                stats: vec![point(11, 0, &["direction:out", "topic:orders", "type:kafka"], 0.002)],
                backlogs: vec![produce("partition:0", 1000)],
            },
            Bucket {
                start: start_ns + 10_000_000_000,
                duration: 10_000_000_000,
                stats: vec![],
                backlogs: vec![produce("partition:0", -1), produce("partition:-1", -1)],
            },
        ],
        ..Default::default()
    }
}

fn consumer_payload(start_ns: u64) -> Payload {
    Payload {
        env: "prod".into(),
        service: "billing".into(),
        lang: "python".into(),
        stats: vec![Bucket {
            start: start_ns,
            duration: 10_000_000_000,
            stats: vec![point(
                22,
                11,
                &["direction:in", "group:billing", "topic:orders", "type:kafka"],
                0.5,
            )],
            backlogs: vec![backlog(
                &[
                    "type:kafka_commit",
                    "consumer_group:billing",
                    "topic:orders",
                    "partition:0",
                    "kafka_cluster_id:prod-1",
                ],
                500,
            )],
        }],
        ..Default::default()
    }
}

/// A payload of env `prod` from `service`: one bucket of `backlogs`, a minute ago.
fn backlogs_payload(service: &str, backlogs: Vec<Backlog>) -> Payload {
    Payload {
        env: "prod".into(),
        service: service.into(),
        stats: vec![Bucket {
            start: now_ns() - 60_000_000_000,
            duration: 10_000_000_000,
            stats: vec![],
            backlogs,
        }],
        ..Default::default()
    }
}

/// The cluster of every row of `rows` (a lag or groups answer's list).
fn clusters_of(rows: &Value) -> Vec<&str> {
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| r["cluster"].as_str().unwrap())
        .collect()
}

const BILLING_COMMIT: [&str; 4] = [
    "type:kafka_commit",
    "consumer_group:billing",
    "topic:orders",
    "partition:0",
];

async fn post(client: &reqwest::Client, url: &str, body: Vec<u8>, gzip: bool) -> (u16, Value) {
    let mut req = client
        .post(url)
        .header("Content-Type", "application/msgpack")
        .body(body);
    if gzip {
        req = req.header("Content-Encoding", "gzip");
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The producer's and the consumer's payloads, both acknowledged.
async fn post_pipeline(client: &reqwest::Client, intake: &str, start_ns: u64) {
    for payload in [producer_payload(start_ns), consumer_payload(start_ns)] {
        assert_eq!(post(client, intake, encode(&payload), true).await.0, 202);
    }
}

use streamsight_testkit::http::get_json;

async fn lag_row(client: &reqwest::Client, api: &str) -> Value {
    let lag = get_json(client, &format!("{api}/api/v1/lag?group=billing")).await;
    let rows = lag["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{lag}");
    rows[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracer_payloads_give_truthful_lag_pathways_and_metrics() {
    let dir = temp_dir("serve");
    let running = start(format!("sqlite://{}/s.db", dir.display())).await;
    let intake = format!("http://{}", running.intake_addr);
    let api = format!("http://{}", running.api_addr);
    let client = reqwest::Client::new();

    let info = get_json(&client, &format!("{intake}/info")).await;
    assert!(
        info["endpoints"]
            .as_array()
            .unwrap()
            .contains(&Value::from("/v0.1/pipeline_stats"))
    );
    // The port tracers reached, not the agent's usual one.
    assert_eq!(info["config"]["receiver_port"], running.intake_addr.port(), "{info}");

    let start_ns = now_ns() - 60_000_000_000;
    let (status, body) = post(
        &client,
        &format!("{intake}/v0.1/pipeline_stats"),
        encode(&producer_payload(start_ns)),
        true,
    )
    .await;
    assert_eq!(status, 202, "{body}");
    // The produce and the pathway point are accepted; the two placeholders
    // refused (and counted below), never accepted.
    assert_eq!(
        (&body["accepted"], &body["rejected"], &body["dropped"]),
        (&2.into(), &2.into(), &0.into()),
        "{body}"
    );
    assert_eq!(body["errors"].as_array().unwrap().len(), 2, "{body}");
    let raw = rmp_serde_bytes(&consumer_payload(start_ns));
    let (status, body) = post(&client, &format!("{intake}/v0.1/pipeline_stats"), raw, false).await;
    assert_eq!(status, 202, "{body}");

    let row = lag_row(&client, &api).await;
    assert_eq!(row["cluster"], "prod-1");
    assert_eq!(row["lag_messages"], 501, "{row}");
    assert_eq!(row["end_offset"], 1001);
    assert!(row["lag_seconds"].as_f64().unwrap() > 0.0, "{row}");
    assert_eq!(row["producer_failing"], true, "{row}");
    assert_eq!(row["partition"], 0);

    let rejections = get_json(&client, &format!("{api}/api/v1/rejections")).await;
    assert_eq!(rejections["by_reason"]["negative_partition"], 1, "{rejections}");
    assert_eq!(rejections["by_reason"]["invalid_offset_sentinel"], 1, "{rejections}");

    let graph = get_json(&client, &format!("{api}/api/v1/pathways?window_seconds=3600")).await;
    let edges: Vec<(String, String)> = graph["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["from"].as_str().unwrap().to_owned(),
                e["to"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        edges,
        [
            ("service:checkout".to_owned(), "topic:orders".to_owned()),
            ("topic:orders".to_owned(), "service:billing".to_owned())
        ],
        "{graph}"
    );
    let p50 = graph["edges"][1]["edge_latency_seconds"]["p50"].as_f64().unwrap();
    assert!((p50 - 0.5).abs() < 0.01, "{p50}");

    let metrics = streamsight_testkit::http::get_text(&client, &format!("{api}/metrics")).await;
    assert!(
        metrics.contains(
            "kafka_consumergroup_group_lag{cluster_name=\"prod-1\",group=\"billing\",topic=\"orders\",partition=\"0\"} 501"
        ),
        "{metrics}"
    );
    assert!(
        metrics
            .contains("kafka_partition_latest_offset{cluster_name=\"prod-1\",topic=\"orders\",partition=\"0\"} 1001")
    );
    assert!(
        metrics.contains("streamsight_produce_offset{cluster_name=\"prod-1\",topic=\"orders\",partition=\"0\"} 1000")
    );
    assert!(metrics.contains("streamsight_rejected_points_total{reason=\"negative_partition\"} 1"));
    assert!(metrics.contains("streamsight_consumer_status{"));
    for what in ["partitions", "group_partitions"] {
        let bytes =
            streamsight_testkit::http::sample(&metrics, &format!("streamsight_engine_memory_bytes{{what=\"{what}\"}}"));
        assert!(bytes.is_some_and(|b| b > 0.0), "{what}: {bytes:?}");
    }
    // A scrape at group granularity: the group's sum, no partition series.
    let coarse = streamsight_testkit::http::get_text(&client, &format!("{api}/metrics?granularity=group")).await;
    assert!(
        coarse.contains("kafka_consumergroup_group_sum_lag{cluster_name=\"prod-1\",group=\"billing\"} 501"),
        "{coarse}"
    );
    assert!(!coarse.contains("kafka_consumergroup_group_lag{") && !coarse.contains("kafka_partition_latest_offset{"));
    let (status, refused) = streamsight_testkit::http::get(&client, &format!("{api}/metrics?granularity=broker")).await;
    assert_eq!((status, &refused["error"]), (400, &"bad_query".into()), "{refused}");
    assert!(
        metrics.contains("streamsight_pathway_latency_seconds{from=\"topic:orders\""),
        "{metrics}"
    );
    assert!(!metrics.contains("partition=\"-1\""));
    assert!(!metrics.lines().any(|l| l.ends_with(" -1")), "{metrics}");
    // The text format wants each family's samples in one block after its header.
    let mut families = std::collections::HashSet::new();
    let mut current = String::new();
    for line in metrics.lines().filter(|l| !l.starts_with("# HELP")) {
        let name = line
            .trim_start_matches("# TYPE ")
            .split(['{', ' '])
            .next()
            .unwrap()
            .to_owned();
        if name != current {
            assert!(families.insert(name.clone()), "{name} appears in two blocks");
            current = name;
        }
    }

    let group = get_json(&client, &format!("{api}/api/v1/groups/prod-1/billing")).await;
    assert_eq!(group["partitions"][0]["recent_commits"][0]["offset"], 500, "{group}");
    let missing = client
        .get(format!("{api}/api/v1/groups/prod-1/nobody"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);

    // Traces are decoded now (journeys): what is not msgpack is refused, with the reason.
    let r = client
        .put(format!("{intake}/v0.4/traces"))
        .body(vec![1u8; 100])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
    let r = client
        .put(format!("{intake}/v0.4/traces"))
        .header("Content-Type", "application/msgpack")
        .body(vec![0xc1u8; 100])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.json::<serde_json::Value>().await.unwrap()["error"], "bad_msgpack");
    for path in ["/v0.6/stats", "/telemetry/proxy/api/v2/apmtelemetry"] {
        let r = client
            .put(format!("{intake}{path}"))
            .body(vec![1u8; 100])
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.status());
    }
    let stats = get_json(&client, &format!("{api}/api/v1/intake")).await;
    assert_eq!(stats["intake"]["payloads"], 2, "{stats}");
    assert_eq!(get_json(&client, &format!("{api}/readyz")).await["status"], "ready");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn rmp_serde_bytes(p: &Payload) -> Vec<u8> {
    // Plain msgpack, no gzip: some tracers send it so.
    let gz = encode(p);
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut out).unwrap();
    out
}

use streamsight_testkit::gzip;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_payloads_are_refused_with_json_errors_and_change_nothing() {
    let running = start("memory://".into()).await;
    let intake = format!("http://{}/v0.1/pipeline_stats", running.intake_addr);
    let api = format!("http://{}", running.api_addr);
    let client = reqwest::Client::new();
    let start_ns = now_ns() - 60_000_000_000;
    post_pipeline(&client, &intake, start_ns).await;
    let before = lag_row(&client, &api).await;

    let good = rmp_serde_bytes(&producer_payload(start_ns));
    let mut wrong_type = Vec::new();
    rmp::encode::write_map_len(&mut wrong_type, 1).unwrap();
    rmp::encode::write_str(&mut wrong_type, "Stats").unwrap();
    rmp::encode::write_str(&mut wrong_type, "oops").unwrap();
    let mut bad_value = Vec::new();
    rmp::encode::write_map_len(&mut bad_value, 1).unwrap();
    rmp::encode::write_str(&mut bad_value, "Stats").unwrap();
    rmp::encode::write_array_len(&mut bad_value, 1).unwrap();
    rmp::encode::write_map_len(&mut bad_value, 1).unwrap();
    rmp::encode::write_str(&mut bad_value, "Backlogs").unwrap();
    rmp::encode::write_array_len(&mut bad_value, 1).unwrap();
    rmp::encode::write_map_len(&mut bad_value, 1).unwrap();
    rmp::encode::write_str(&mut bad_value, "Value").unwrap();
    rmp::encode::write_str(&mut bad_value, "1000").unwrap();
    let bomb = gzip(&vec![0u8; 16 << 20]);
    // `{"Stats":[{"Stats":[{} × 1,000,000]}]}`: 1 KB gzipped.
    let mut empty_points = Vec::new();
    rmp::encode::write_map_len(&mut empty_points, 1).unwrap();
    rmp::encode::write_str(&mut empty_points, "Stats").unwrap();
    rmp::encode::write_array_len(&mut empty_points, 1).unwrap();
    rmp::encode::write_map_len(&mut empty_points, 1).unwrap();
    rmp::encode::write_str(&mut empty_points, "Stats").unwrap();
    rmp::encode::write_array_len(&mut empty_points, 1_000_000).unwrap();
    empty_points.extend(std::iter::repeat_n(0x80, 1_000_000));
    let empty_points = gzip(&empty_points);
    assert!(empty_points.len() < 2_000, "{}", empty_points.len());
    let corpus: Vec<(&str, Vec<u8>, bool, u16, &str)> = vec![
        ("empty body", vec![], false, 400, "bad_msgpack"),
        ("not msgpack", b"{\"json\": true}".to_vec(), false, 400, "bad_msgpack"),
        ("reserved msgpack byte", vec![0xc1], false, 400, "bad_msgpack"),
        (
            "truncated msgpack",
            good[..good.len() / 2].to_vec(),
            false,
            400,
            "bad_msgpack",
        ),
        ("a string where a list goes", wrong_type, false, 400, "bad_msgpack"),
        ("a string where an offset goes", bad_value, false, 400, "bad_msgpack"),
        (
            "truncated gzip",
            {
                let g = gzip(&good);
                g[..g.len() / 2].to_vec()
            },
            true,
            400,
            "bad_gzip",
        ),
        ("gzip header on plain bytes", good.clone(), true, 400, "bad_gzip"),
        ("gzip bomb", bomb, true, 413, "decompressed_too_large"),
        (
            "a million empty points",
            empty_points,
            true,
            413,
            "too_many_stats_points",
        ),
        ("body over the limit", vec![0x90; 2 << 20], false, 413, "body_too_large"),
        (
            "random bytes",
            (0..4096u32)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
                .collect(),
            false,
            400,
            "bad_msgpack",
        ),
    ];
    for (name, body, gz, status, kind) in corpus {
        if kind == "body_too_large" {
            // Answered once the limit is read, and the connection closed: a
            // client still writing may see its write fail (a broken pipe)
            // before it reads the answer. Either way it is refused and counted.
            let sent = client
                .post(&intake)
                .header("Content-Type", "application/msgpack")
                .body(body)
                .send()
                .await;
            if let Ok(resp) = sent {
                assert_eq!(resp.status().as_u16(), status, "{name}");
                let json: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
                assert_eq!(json["error"], kind, "{name}: {json}");
            }
            let metrics = streamsight_testkit::http::get_text(&client, &format!("{api}/metrics")).await;
            let series = "streamsight_refusals_total{listener=\"intake\",kind=\"body_too_large\"}";
            assert_eq!(streamsight_testkit::http::sample(&metrics, series), Some(1.0), "{name}");
            continue;
        }
        let (got, json) = post(&client, &intake, body, gz).await;
        assert_eq!(got, status, "{name}: {json}");
        assert_eq!(json["error"], kind, "{name}: {json}");
        assert!(
            json["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{name}: {json}"
        );
    }
    let brotli = client
        .post(&intake)
        .header("Content-Type", "application/msgpack")
        .header("Content-Encoding", "br")
        .body(good)
        .send()
        .await
        .unwrap();
    assert_eq!(brotli.status().as_u16(), 415);
    // What a web page can send without a preflight is refused.
    for content_type in [None, Some("text/plain"), Some("application/x-www-form-urlencoded")] {
        let mut req = client.post(&intake).body(rmp_serde_bytes(&producer_payload(start_ns)));
        if let Some(t) = content_type {
            req = req.header("Content-Type", t);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 415, "{content_type:?}");
        let json: Value = resp.json().await.unwrap();
        assert_eq!(json["error"], "unsupported_content_type");
        // In the header's words, never Rust's (`Some("…")`).
        let said = json["message"].as_str().unwrap();
        let want = match content_type {
            Some(t) => format!("content-type {t} is not application/msgpack"),
            None => "no content-type: send application/msgpack".to_owned(),
        };
        assert_eq!(said, want);
    }

    let after = lag_row(&client, &api).await;
    assert_eq!(before["lag_messages"], after["lag_messages"]);
    assert_eq!(before["end_offset"], after["end_offset"]);
    assert_eq!(before["committed_offset"], after["committed_offset"]);
    let stats = get_json(&client, &format!("{api}/api/v1/intake")).await;
    assert_eq!(stats["intake"]["payloads"], 2, "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_survives_a_restart() {
    let dir = temp_dir("restart");
    let storage = format!("sqlite://{}/s.db", dir.display());
    let client = reqwest::Client::new();
    let start_ns = now_ns() - 60_000_000_000;
    let before = {
        let running = start(storage.clone()).await;
        let intake = format!("http://{}/v0.1/pipeline_stats", running.intake_addr);
        post_pipeline(&client, &intake, start_ns).await;
        lag_row(&client, &format!("http://{}", running.api_addr)).await
    };
    // A second collector on the same file, as after a restart.
    let running = start(storage).await;
    let api = format!("http://{}", running.api_addr);
    let after = lag_row(&client, &api).await;
    for key in [
        "lag_messages",
        "end_offset",
        "committed_offset",
        "status",
        "producer_failing",
    ] {
        assert_eq!(before[key], after[key], "{key}");
    }
    assert!(after["lag_seconds"].as_f64() >= before["lag_seconds"].as_f64());
    let graph = get_json(&client, &format!("{api}/api/v1/pathways?window_seconds=3600")).await;
    assert_eq!(graph["edges"].as_array().unwrap().len(), 2, "{graph}");
    let rejections = get_json(&client, &format!("{api}/api/v1/rejections")).await;
    assert_eq!(rejections["total"], 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_deletes_old_records_and_keeps_fresh_ones() {
    use std::time::{Duration, Instant};
    use streamsight_core::Millis;
    let dir = temp_dir("retention");
    let storage = format!("sqlite://{}/s.db", dir.display());
    let base = ServeConfig {
        retention: Duration::from_secs(3600),
        history_interval: Duration::from_millis(100),
        ..ServeConfig::ephemeral()
    };
    let running = start_with(storage.clone(), base).await;
    let intake = format!("http://{}/v0.1/pipeline_stats", running.intake_addr);
    let client = reqwest::Client::new();
    let hour_ns = 3_600_000_000_000;
    assert_eq!(
        post(
            &client,
            &intake,
            encode(&producer_payload(now_ns() - 3 * hour_ns)),
            true
        )
        .await
        .0,
        202
    );
    assert_eq!(
        post(
            &client,
            &intake,
            encode(&consumer_payload(now_ns() - 60_000_000_000)),
            true
        )
        .await
        .0,
        202
    );

    let cutoff = Millis((now_ns() / 1_000_000) as i64 - 3_600_000);
    let mut store = streamsight_store::open(&storage).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let records = store.load(Millis(0)).unwrap();
        if !records.is_empty() && records.iter().all(|r| r.at() >= cutoff) {
            break;
        }
        assert!(Instant::now() < deadline, "old records still stored: {records:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn points_without_a_cluster_are_kept_apart_per_env() {
    let running = start("memory://".into()).await;
    let intake = format!("http://{}/v0.1/pipeline_stats", running.intake_addr);
    let api = format!("http://{}", running.api_addr);
    let client = reqwest::Client::new();
    let start_ns = now_ns() - 60_000_000_000;
    for (env, produced, committed) in [("prod", 1000, 400), ("staging", 10, 5)] {
        let payload = Payload {
            env: env.into(),
            service: "svc".into(),
            stats: vec![Bucket {
                start: start_ns,
                duration: 10_000_000_000,
                stats: vec![],
                backlogs: vec![
                    backlog(&["type:kafka_produce", "topic:orders", "partition:0"], produced),
                    backlog(
                        &[
                            "type:kafka_commit",
                            "consumer_group:billing",
                            "topic:orders",
                            "partition:0",
                        ],
                        committed,
                    ),
                ],
            }],
            ..Default::default()
        };
        assert_eq!(post(&client, &intake, encode(&payload), true).await.0, 202);
    }
    let lag = get_json(&client, &format!("{api}/api/v1/lag?group=billing")).await;
    let rows: Vec<(String, i64)> = lag["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["cluster"].as_str().unwrap().to_owned(),
                r["lag_messages"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [("default/prod".to_owned(), 601), ("default/staging".to_owned(), 6)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_without_a_cluster_join_the_named_cluster_even_after_arriving_first() {
    let running = start("memory://".into()).await;
    let intake = format!("http://{}/v0.1/pipeline_stats", running.intake_addr);
    let api = format!("http://{}", running.api_addr);
    let client = reqwest::Client::new();
    let start_ns = now_ns() - 60_000_000_000;
    let commit = |offset| Payload {
        env: "prod".into(),
        service: "billing".into(),
        stats: vec![Bucket {
            start: start_ns,
            duration: 10_000_000_000,
            stats: vec![],
            backlogs: vec![backlog(
                &[
                    "type:kafka_commit",
                    "consumer_group:billing",
                    "topic:orders",
                    "partition:0",
                ],
                offset,
            )],
        }],
        ..Default::default()
    };
    // The consumer's tracer flushes first: no cluster is known for the topic yet.
    assert_eq!(post(&client, &intake, encode(&commit(400)), true).await.0, 202);
    assert_eq!(
        post(&client, &intake, encode(&producer_payload(start_ns)), true)
            .await
            .0,
        202
    );
    assert_eq!(post(&client, &intake, encode(&commit(500)), true).await.0, 202);
    let lag = get_json(&client, &format!("{api}/api/v1/lag?group=billing&cluster=prod-1")).await;
    assert_eq!(lag["rows"][0]["lag_messages"], 501, "{lag}");
    // The first commit's copy in the unknown cluster is forgotten, not left stale.
    let lag = get_json(&client, &format!("{api}/api/v1/lag?group=billing")).await;
    assert_eq!(clusters_of(&lag["rows"]), ["prod-1"], "{lag}");
}

/// A tracer that names the cluster on its produces and not on its commits
/// (ddtrace), in one payload: one cluster, and no stale copy of the group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_join_the_cluster_their_own_payload_names() {
    let running = start("memory://".into()).await;
    let intake = format!("http://{}/v0.1/pipeline_stats", running.intake_addr);
    let api = format!("http://{}", running.api_addr);
    let client = reqwest::Client::new();
    let payload = backlogs_payload(
        "checkout",
        vec![
            backlog(&BILLING_COMMIT, 400),
            backlog(
                &[
                    "type:kafka_produce",
                    "topic:orders",
                    "partition:0",
                    "kafka_cluster_id:c1",
                ],
                1000,
            ),
        ],
    );
    let (status, body) = post(&client, &intake, encode(&payload), true).await;
    assert_eq!((status, &body["accepted"]), (202, &2.into()), "{body}");
    let groups = get_json(&client, &format!("{api}/api/v1/groups")).await;
    assert_eq!(clusters_of(&groups["groups"]), ["c1"], "{groups}");
    assert_eq!(groups["groups"][0]["total_lag"], 601, "{groups}");
}

/// A group whose lag is unknown (commits, no end offset anywhere) sums to
/// nothing: its total is null, never 0, wherever a total is shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_of_unknown_lag_has_no_total() {
    // Summaries are remade each second at most, not 10.
    let config = ServeConfig {
        history_interval: std::time::Duration::from_secs(1),
        ..ServeConfig::ephemeral()
    };
    let running = start_with("memory://".into(), config).await;
    let intake = format!("http://{}/v0.1/pipeline_stats", running.intake_addr);
    let api = format!("http://{}", running.api_addr);
    let client = reqwest::Client::new();
    let payload = backlogs_payload("billing", vec![backlog(&BILLING_COMMIT, 400)]);
    assert_eq!(post(&client, &intake, encode(&payload), true).await.0, 202);
    let groups = get_json(&client, &format!("{api}/api/v1/groups")).await;
    let row = &groups["groups"][0];
    assert_eq!(
        (&row["total_lag"], &row["known_lag"], &row["complete"]),
        (&Value::Null, &0.into(), &false.into()),
        "{groups}"
    );
    let row = streamsight_testkit::eventually(10, "the group in the overview", async || {
        let overview = get_json(&client, &format!("{api}/api/v1/overview")).await;
        Some(overview["groups"]["rows"].get(0)?.clone())
    })
    .await;
    assert_eq!(
        (&row["group"], &row["total_lag"]),
        (&"billing".into(), &Value::Null),
        "{row}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_answers_what_is_under_way_stops_everything_and_flushes_the_writer() {
    let dir = temp_dir("shutdown");
    let storage = format!("sqlite://{}/s.db", dir.display());
    let client = reqwest::Client::new();
    let running = start(storage.clone()).await;
    let (intake_addr, api_addr) = (running.intake_addr, running.api_addr);
    let intake = format!("http://{intake_addr}/v0.1/pipeline_stats");
    post_pipeline(&client, &intake, now_ns() - 60_000_000_000).await;
    running.shutdown().await;
    // Both ports are let go, and everything acknowledged is on disk.
    for addr in [intake_addr, api_addr] {
        let again = tokio::net::TcpListener::bind(addr).await;
        assert!(again.is_ok(), "{addr} still held: {again:?}");
    }
    let stored = streamsight_store::open(&storage)
        .unwrap()
        .load(streamsight_core::Millis(0))
        .unwrap();
    let observations = stored
        .iter()
        .filter(|r| matches!(r, streamsight_store::Record::Observation { .. }))
        .count();
    assert!(observations >= 2, "{stored:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_api_answers_loopback_names_only() {
    let mut base = ServeConfig::ephemeral();
    base.limits.api_hosts = vec!["streamsight.internal".into()];
    let running = start_with("memory://".into(), base).await;
    let client = reqwest::Client::new();
    let url = format!("http://{}/api/v1/lag", running.api_addr);
    for (host, status) in [
        ("evil.example", 421),
        ("evil.example:7411", 421),
        ("localhost:7411", 200),
        ("127.0.0.1", 200),
        ("streamsight.internal:7411", 200),
    ] {
        let resp = client.get(&url).header("Host", host).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "{host}");
    }
}

/// Over `max_in_flight`, a request is answered 503 with `Retry-After` at once
/// (never queued), probes still answer; over `max_connections`, a connection is
/// answered 503 and closed before it is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_and_connections_over_their_caps_are_refused_at_once() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut base = ServeConfig::ephemeral();
    base.limits.max_in_flight = 2;
    base.limits.max_connections = 4;
    base.limits.request_timeout = std::time::Duration::from_secs(20);
    let running = start_with("memory://".into(), base).await;
    let intake = running.intake_addr.to_string();
    // Two requests whose bodies never finish: they hold both places.
    let mut slow = Vec::new();
    for _ in 0..2 {
        let mut s = tokio::net::TcpStream::connect(&intake).await.unwrap();
        s.write_all(b"POST /v0.1/pipeline_stats HTTP/1.1\r\nHost: x\r\nContent-Type: application/msgpack\r\nContent-Length: 100\r\n\r\nab")
            .await
            .unwrap();
        slow.push(s);
    }
    let client = reqwest::Client::new();
    let url = format!("http://{intake}/v0.1/pipeline_stats");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let refused = loop {
        let resp = client
            .post(&url)
            .header("Content-Type", "application/msgpack")
            .body(rmp_serde_bytes(&Payload::default()))
            .send()
            .await
            .unwrap();
        if resp.status().as_u16() == 503 {
            break resp;
        }
        assert!(std::time::Instant::now() < deadline, "never refused: {}", resp.status());
    };
    assert_eq!(refused.headers()["retry-after"], "1");
    let json: Value = refused.json().await.unwrap();
    assert_eq!(json["error"], "overloaded");
    drop(client);
    // The API listener has its own places: its probe answers.
    let health = reqwest::get(format!("http://{}/healthz", running.api_addr))
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);

    // Two more idle connections fill the four; the fifth is answered and closed.
    for _ in 0..2 {
        slow.push(tokio::net::TcpStream::connect(&intake).await.unwrap());
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let mut extra = tokio::net::TcpStream::connect(&intake).await.unwrap();
        let mut answer = String::new();
        let read = tokio::time::timeout(std::time::Duration::from_millis(500), extra.read_to_string(&mut answer)).await;
        if read.is_ok() && answer.starts_with("HTTP/1.1 503") {
            assert!(answer.contains("Retry-After: 1"), "{answer}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the fifth connection was served: {answer:?}"
        );
    }
    let metrics = reqwest::get(format!("http://{}/metrics", running.api_addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for what in ["in_flight", "connections"] {
        let line = metrics
            .lines()
            .find(|l| l.starts_with(&format!("streamsight_limited_total{{what=\"{what}\"}}")))
            .unwrap();
        assert!(!line.ends_with(" 0"), "{line}");
    }
}

/// Every refusal is one typed event, counted by listener and kind in one place
/// (`/api/v1/intake`, `/metrics`) whichever feature refused: the API's own
/// query parsing, the alerts' bodies, the OTLP intake's decoder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_is_counted_by_listener_and_kind() {
    let running = start("memory://".into()).await;
    let client = reqwest::Client::new();
    let api = format!("http://{}", running.api_addr);
    let refusals = |listener: &str, kind: &str| running.shared.telemetry.refusals(listener, kind);
    let r = client.get(format!("{api}/api/v1/lag?nope=1")).send().await.unwrap();
    assert_eq!(r.status(), 400);
    let r = client.get(format!("{api}/api/v1/no-such")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let r = client
        .post(format!("http://{}/v1/traces", running.otlp_addr))
        .header("Content-Type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(refusals("api", "bad_query"), 1);
    assert_eq!(refusals("api", "not_found"), 1);
    assert_eq!(refusals("otlp", "bad_json"), 1);
    let (_, intake) = streamsight_testkit::http::get(&client, &format!("{api}/api/v1/intake")).await;
    let listed = intake["intake"]["refusals"].as_array().unwrap();
    assert!(
        listed
            .iter()
            .any(|r| r["listener"] == "otlp" && r["kind"] == "bad_json" && r["count"] == 1),
        "{listed:?}"
    );
    let metrics = streamsight_testkit::http::get_text(&client, &format!("{api}/metrics")).await;
    assert!(
        metrics.contains("streamsight_refusals_total{listener=\"api\",kind=\"bad_query\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("streamsight_failures_total{failure=\"store_append\"} 0"));
    running.shutdown().await;
}

/// `/api/v1/groups` a page at a time: the pages, read by their `next`, are
/// the whole list in order, each group once; a bad page is a 400 that says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_come_a_page_at_a_time() {
    let running = start("memory://".into()).await;
    let intake = format!("http://{}/v0.1/pipeline_stats", running.intake_addr);
    let api = format!("http://{}", running.api_addr);
    let client = reqwest::Client::new();
    let names: Vec<String> = (0..7).map(|g| format!("group-{g}")).collect();
    let tags: Vec<Vec<String>> = names
        .iter()
        .flat_map(|g| {
            ["a", "b"].map(|cluster| {
                vec![
                    "type:kafka_commit".to_owned(),
                    format!("consumer_group:{g}"),
                    "topic:orders".to_owned(),
                    "partition:0".to_owned(),
                    format!("kafka_cluster_id:{cluster}"),
                ]
            })
        })
        .collect();
    let backlogs = tags
        .iter()
        .map(|t| backlog(&t.iter().map(String::as_str).collect::<Vec<_>>(), 10))
        .collect();
    let (status, body) = post(&client, &intake, encode(&backlogs_payload("c", backlogs)), true).await;
    assert_eq!(status, 202, "{body}");
    let whole = get_json(&client, &format!("{api}/api/v1/groups")).await;
    assert_eq!(
        (&whole["total_groups"], &whole["next"]),
        (&14.into(), &Value::Null),
        "{whole}"
    );
    let key = |g: &Value| {
        (
            g["cluster"].as_str().unwrap().to_owned(),
            g["group"].as_str().unwrap().to_owned(),
        )
    };
    let all: Vec<_> = whole["groups"].as_array().unwrap().iter().map(key).collect();
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted, "in (cluster, group) order");
    let mut paged = Vec::new();
    let mut url = format!("{api}/api/v1/groups?limit=3");
    loop {
        let page = get_json(&client, &url).await;
        assert_eq!(page["total_groups"], 14, "{page}");
        let rows = page["groups"].as_array().unwrap();
        assert!(rows.len() <= 3, "{page}");
        paged.extend(rows.iter().map(key));
        let next = &page["next"];
        if next.is_null() {
            break;
        }
        url = format!(
            "{api}/api/v1/groups?limit=3&after_cluster={}&after_group={}",
            next["after_cluster"].as_str().unwrap(),
            next["after_group"].as_str().unwrap()
        );
    }
    assert_eq!(paged, all);
    let one_cluster = get_json(&client, &format!("{api}/api/v1/groups?cluster=b&limit=100")).await;
    assert_eq!(one_cluster["total_groups"], 7, "{one_cluster}");
    for (bad, says) in [
        ("limit=0", "limit is 1 to 10000"),
        ("limit=10001", "limit is 1 to 10000"),
        ("after_cluster=a", "go together"),
        ("page=2", "page"),
    ] {
        let r = client.get(format!("{api}/api/v1/groups?{bad}")).send().await.unwrap();
        assert_eq!(r.status(), 400, "{bad}");
        let text = r.text().await.unwrap();
        assert!(text.contains(says), "{bad}: {text}");
    }
}

/// `history_samples` outside 1-100,000 is refused at start, naming its table.
#[tokio::test]
async fn history_samples_out_of_bounds_is_refused_naming_its_table() {
    for samples in [0, 100_001] {
        let config = ServeConfig {
            history_samples: samples,
            ..ServeConfig::ephemeral()
        };
        let err = serve(config, EngineConfig::default())
            .await
            .err()
            .map(|e| e.to_string());
        let err = err.unwrap_or_default();
        assert!(
            err.starts_with("[serve]: history_samples is") && err.contains("1 to 100,000"),
            "{samples}: {err}"
        );
    }
}

/// Every write's stages are timed where a scrape sees them: intake requests'
/// read and decode (Data Streams and OTLP alike), every write's queue,
/// append and apply, each service's apply, the engine's lock waits and each
/// listener's requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_stage_of_a_write_is_timed_on_metrics() {
    let dir = temp_dir("timings");
    let running = start(format!("sqlite://{}/s.db", dir.display())).await;
    let intake = format!("http://{}/v0.1/pipeline_stats", running.intake_addr);
    let api = format!("http://{}", running.api_addr);
    let client = reqwest::Client::new();
    let count = |metrics: &str, series: &str| streamsight_testkit::http::sample(metrics, series).unwrap_or(-1.0);
    let before = streamsight_testkit::http::get_text(&client, &format!("{api}/metrics")).await;
    for stage in ["read", "decode"] {
        let series = format!("streamsight_intake_stage_seconds_count{{stage=\"{stage}\"}}");
        assert_eq!(count(&before, &series), 0.0, "{series}");
    }

    post_pipeline(&client, &intake, now_ns() - 60_000_000_000).await;
    let otlp = client
        .post(format!("http://{}/v1/traces", running.otlp_addr))
        .header("content-type", "application/json")
        .body(r#"{"resourceSpans":[]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(otlp.status(), 200);

    let metrics = streamsight_testkit::http::get_text(&client, &format!("{api}/metrics")).await;
    // Two Data Streams requests and one OTLP request were read and decoded.
    for stage in ["read", "decode"] {
        let series = format!("streamsight_intake_stage_seconds_count{{stage=\"{stage}\"}}");
        assert_eq!(count(&metrics, &series), 3.0, "{series}\n{metrics}");
    }
    // The two payloads' records were queued, stored and applied (with
    // whatever else the node wrote meanwhile).
    for stage in ["queue", "append", "apply"] {
        let series = format!("streamsight_intake_stage_seconds_count{{stage=\"{stage}\"}}");
        assert!(count(&metrics, &series) >= 2.0, "{series}\n{metrics}");
    }
    for service in [
        "lag",
        "deliveries",
        "pathways",
        "audit",
        "redrives",
        "alerts",
        "journeys",
    ] {
        let series = format!("streamsight_apply_seconds_count{{service=\"{service}\"}}");
        assert!(count(&metrics, &series) >= 2.0, "{series}\n{metrics}");
    }
    assert!(count(&metrics, "streamsight_engine_lock_wait_seconds_count{by=\"apply\"}") >= 2.0);
    assert!(count(&metrics, "streamsight_engine_lock_wait_seconds_count{by=\"read\"}") >= 1.0);
    // Buckets are cumulative and end at the count.
    let read = |le: &str| {
        count(
            &metrics,
            &format!("streamsight_intake_stage_seconds_bucket{{stage=\"read\",le=\"{le}\"}}"),
        )
    };
    assert!(read("0.00005") <= read("0.001") && read("0.001") <= read("2.5"));
    assert_eq!(read("+Inf"), 3.0);
    assert!(count(&metrics, "streamsight_intake_stage_seconds_sum{stage=\"read\"}") > 0.0);
    // Each listener's requests, whole: two on the intake, one on OTLP's, and
    // on the API's at least the scrape before.
    for (listener, n) in [("intake", 2.0), ("otlp", 1.0), ("api", 1.0)] {
        let series = format!("streamsight_request_seconds_count{{listener=\"{listener}\"}}");
        assert!(count(&metrics, &series) >= n, "{series}\n{metrics}");
    }
    running.shutdown().await;
}
