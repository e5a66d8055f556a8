//! `kill -9` the collector mid-stream: after a restart on the same data directory,
//! every acknowledged point is there and lag seconds continue where they were.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

mod support;

use serde_json::Value;
use std::time::{Duration, Instant};
use streamsight_wire::dsm::payload::{Payload, encode};

use streamsight_testkit::now_ns;

fn payload(service: &str, start_ns: u64, tags: &[&str], value: i64) -> Vec<u8> {
    use streamsight_testkit::dsm::{backlog, bucket};
    encode(&Payload {
        service: service.into(),
        stats: vec![bucket(start_ns, vec![backlog(tags, value)])],
        ..Default::default()
    })
}

async fn lag(client: &reqwest::Client, api: &str) -> Value {
    let v: Value = client
        .get(format!("{api}/api/v1/lag?group=g"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["rows"][0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_dash_nine_loses_no_acknowledged_point() {
    let dir = std::env::temp_dir().join(format!("streamsight-crash-{}-{}", std::process::id(), now_ns()));
    let storage = format!("sqlite://{}/data/streamsight.db", dir.display());
    let client = reqwest::Client::new();
    let (mut collector, intake, api) = support::serve(&storage);
    let url = format!("{intake}/v0.1/pipeline_stats");

    // 200 buckets of 10 s: offset 100*i produced in bucket i; the group stops at 5,000.
    let base = now_ns() - 2_100 * 1_000_000_000;
    let mut sends = Vec::new();
    // 64 in flight at most: within the collector's default `max_in_flight`.
    let in_flight = std::sync::Arc::new(tokio::sync::Semaphore::new(64));
    for i in 0..200u64 {
        let start = base + i * 10_000_000_000;
        let produce = payload(
            "p",
            start,
            &["type:kafka_produce", "topic:t", "partition:0"],
            (i * 100) as i64,
        );
        let commit = payload(
            "c",
            start,
            &["type:kafka_commit", "consumer_group:g", "topic:t", "partition:0"],
            (i * 100).min(5_000) as i64,
        );
        for body in [produce, commit] {
            let client = client.clone();
            let url = url.clone();
            let in_flight = in_flight.clone();
            sends.push(tokio::spawn(async move {
                let _permit = in_flight.acquire_owned().await.unwrap();
                let r = client
                    .post(url)
                    .header("Content-Type", "application/msgpack")
                    .header("Content-Encoding", "gzip")
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                r.status().as_u16()
            }));
        }
    }
    for s in sends {
        assert_eq!(s.await.unwrap(), 202);
    }
    let before = lag(&client, &api).await;
    let before_at = Instant::now();
    collector.0.kill().unwrap(); // SIGKILL: no shutdown path runs
    collector.0.wait().unwrap();

    let (_restarted, _, api) = support::serve(&storage);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = client.get(format!("{api}/readyz")).send().await;
        if ready.is_ok_and(|r| r.status().is_success()) {
            break;
        }
        assert!(Instant::now() < deadline, "not ready within 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let after = lag(&client, &api).await;
    let elapsed = before_at.elapsed().as_secs_f64();

    assert_eq!(before["end_offset"], 19_901, "{before}");
    assert_eq!(before["committed_offset"], 5_000);
    for key in [
        "lag_messages",
        "end_offset",
        "committed_offset",
        "status",
        "lag_seconds_lower_bound",
    ] {
        assert_eq!(before[key], after[key], "{key}: {before} then {after}");
    }
    let (b, a) = (
        before["lag_seconds"].as_f64().unwrap(),
        after["lag_seconds"].as_f64().unwrap(),
    );
    assert!(
        a >= b && a <= b + elapsed + 0.01,
        "lag seconds {b} then {a} after {elapsed} s"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// SIGTERM (what systemd and Kubernetes send): the collector stops on its own,
/// with a clean exit, and a restart on the same data shows the same lag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_cleanly_and_keeps_everything() {
    let dir = std::env::temp_dir().join(format!("streamsight-term-{}-{}", std::process::id(), now_ns()));
    let storage = format!("sqlite://{}/streamsight.db", dir.display());
    let client = reqwest::Client::new();
    let (mut collector, intake, api) = support::serve(&storage);
    let start = now_ns() - 60_000_000_000;
    for (service, tags, value) in [
        ("p", &["type:kafka_produce", "topic:t", "partition:0"][..], 999),
        (
            "c",
            &["type:kafka_commit", "consumer_group:g", "topic:t", "partition:0"][..],
            500,
        ),
    ] {
        let r = client
            .post(format!("{intake}/v0.1/pipeline_stats"))
            .header("Content-Type", "application/msgpack")
            .header("Content-Encoding", "gzip")
            .body(payload(service, start, tags, value))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 202);
    }
    let before = lag(&client, &api).await;
    let pid = collector.0.id().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = collector.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "still running 30 s after SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "{status:?}");
    // The binary store reads back as JSON lines.
    let (ok, dump, err) = support::run(&["store", "dump", "--storage", &storage]);
    assert!(ok, "{err}");
    let records: Vec<Value> = dump.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<&str> = records
        .iter()
        .filter_map(|r| r["observation"]["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["produced", "committed"], "{dump}");
    assert_eq!(records[0]["observation"]["offset"], 999);

    let (_restarted, _, api) = support::serve(&storage);
    let after = lag(&client, &api).await;
    for key in ["lag_messages", "end_offset", "committed_offset"] {
        assert_eq!(before[key], after[key], "{key}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
