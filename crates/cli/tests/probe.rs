//! `streamsight probe` alone, and the probe inside `serve` (`[[serve.probes]]`),
//! against librdkafka's mock cluster.
#![allow(clippy::unwrap_used)]

mod support;

use rdkafka::mocking::MockCluster;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn the_probe_alone_and_inside_serve() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("streamsight-probe", 2, 1).unwrap();
    let bootstrap = cluster.bootstrap_servers();

    let out = Command::new(env!("CARGO_BIN_EXE_streamsight"))
        .args([
            "probe",
            "--bootstrap-server",
            &bootstrap,
            "--interval",
            "50ms",
            "--sla",
            "10s",
        ])
        .args(["--duration", "2s", "--report-every", "10s", "--format", "json"])
        .env("STREAMSIGHT_LOG", "warn")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let report: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let partitions = report["partitions"].as_array().unwrap();
    assert_eq!(partitions.len(), 2, "{report:#}");
    for p in partitions {
        assert!(p["received"].as_u64().unwrap() > 0, "{p:#}");
        assert_eq!(p["lost"].as_u64(), Some(0), "{p:#}");
    }

    let toml =
        format!("[[serve.probes]]\nname = \"mock\"\nbootstrap = \"{bootstrap}\"\ninterval = \"50ms\"\nsla = \"2s\"\n");
    let (_guard, api) = support::serve_with_config("probe", &toml);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let metrics = get(&format!("{api}/metrics"));
        let line = metrics
            .lines()
            .find(|l| l.starts_with("streamsight_probe_messages_received_total{cluster_name=\"mock\",topic=\"streamsight-probe\",partition=\"0\"}"));
        if line.is_some_and(|l| !l.ends_with(" 0")) {
            let probes: serde_json::Value = serde_json::from_str(&get(&format!("{api}/api/v1/probes"))).unwrap();
            assert_eq!(probes["probes"][0]["cluster"], "mock");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the probe in serve never round-tripped: {metrics}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn get(url: &str) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async { reqwest::get(url).await.unwrap().text().await.unwrap() })
}
