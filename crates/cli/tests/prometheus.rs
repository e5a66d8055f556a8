//! For teams that alert in Prometheus: `deploy/prometheus/alerts.yml` passes the
//! real `promtool check rules` and `promtool test rules`; every metric its rules
//! and `deploy/grafana/streamsight.json` use is one the binary exports; and every
//! `kafka_*` query of kafka-lag-exporter's own Grafana board finds its metric
//! with the labels it selects, so its users keep their boards.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};
use support::dsm;

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
}

fn promtool(args: &[&str]) {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(repo("deploy/prometheus"))
        .output()
        .expect("promtool (Debian's prometheus package; scripts/test installs it)");
    assert!(
        out.status.success(),
        "promtool {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Metric names (`prefix…`) in a PromQL expression.
fn metric_names(expr: &str, prefixes: &[&str]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in expr.char_indices() {
        if prefixes.iter().any(|p| expr[i..].starts_with(p))
            && !expr[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        {
            let name: String = expr[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            out.insert(name);
        }
    }
    out
}

fn exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v.as_str()) {
                    ("expr" | "query", Some(e)) => out.push(e.to_owned()),
                    _ => exprs(v, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| exprs(v, out)),
        _ => {}
    }
}

/// Sample lines by metric name: the label names each sample carries.
fn samples(metrics: &str) -> BTreeMap<String, Vec<BTreeSet<String>>> {
    let mut out: BTreeMap<String, Vec<BTreeSet<String>>> = BTreeMap::new();
    for line in metrics.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let (name, rest) = line.split_once('{').unwrap_or((line.split(' ').next().unwrap(), ""));
        let labels = rest
            .split("\",")
            .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.trim().to_owned()))
            .collect();
        out.entry(name.to_owned()).or_default().push(labels);
    }
    out
}

#[test]
fn the_shipped_rules_pass_promtool() {
    promtool(&["check", "rules", "alerts.yml"]);
    promtool(&["test", "rules", "alerts_test.yml"]);
}

/// The shipped file is what the binary generates from its default rules, so
/// Prometheus and streamsight can never disagree on a threshold or a wait.
#[test]
fn the_shipped_rules_are_generated_from_the_default_rules() {
    let out = Command::new(env!("CARGO_BIN_EXE_streamsight"))
        .args(["alerts", "rules", "--format", "prometheus", "--defaults"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let shipped = std::fs::read_to_string(repo("deploy/prometheus/alerts.yml")).unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout) == shipped,
        "deploy/prometheus/alerts.yml is not what the defaults generate: run\n  \
         streamsight alerts rules --format prometheus --defaults > deploy/prometheus/alerts.yml"
    );
    // Waits as streamsight's own: a stall pages after 1 m, failing sends after 30 s.
    for (alert, wait) in [
        ("KafkaConsumerStalled", "for: 1m"),
        ("KafkaProducerFailing", "for: 30s"),
        ("KafkaLagSecondsHigh", "for: 1m"),
    ] {
        let at = shipped.find(&format!("- alert: {alert}\n")).unwrap();
        let block = &shipped[at..shipped[at + 1..].find("- alert:").map_or(shipped.len(), |e| at + 1 + e)];
        assert!(block.contains(wait), "{alert}: {block}");
    }

    // A tuned rule in a configuration generates the tuned threshold; a
    // disabled one is left out; a rule of the user's own is translated.
    let config = std::env::temp_dir().join(format!("streamsight-prom-rules-{}.toml", std::process::id()));
    std::fs::write(
        &config,
        "[[serve.alerts.rules]]\nname = \"lag_seconds_high\"\nsignal = \"group_lag_seconds\"\nabove = 120.0\nfor = \"2m\"\n\
         summary = \"{group} is {value} s behind\"\nscope = { group = \"billing*\" }\n\n\
         [[serve.alerts.rules]]\nname = \"produce_rate_drop\"\nsignal = \"produce_rate\"\nenabled = false\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_streamsight"))
        .args(["alerts", "rules", "--format", "prometheus", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tuned = String::from_utf8_lossy(&out.stdout);
    assert!(
        tuned.contains(r#"expr: "max by (cluster_name, group) (kafka_consumergroup_group_max_lag_seconds{group=~\"billing.*\"}) > 120"
        for: 2m"#),
        "{tuned}"
    );
    assert!(!tuned.contains("KafkaProduceRateDrop"), "{tuned}");
    // A mistake gets a clear error: --format prometheus belongs to `rules`.
    let out = Command::new(env!("CARGO_BIN_EXE_streamsight"))
        .args(["alerts", "--format", "prometheus"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--format prometheus is for `streamsight alerts rules` only"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every shipped alert is seen firing and seen quiet in alerts_test.yml.
#[test]
fn every_shipped_alert_has_a_firing_and_a_quiet_unit_test() {
    let rules = std::fs::read_to_string(repo("deploy/prometheus/alerts.yml")).unwrap();
    let tests = std::fs::read_to_string(repo("deploy/prometheus/alerts_test.yml")).unwrap();
    let lines: Vec<&str> = tests.lines().map(str::trim).collect();
    let mut fires = BTreeSet::new();
    let mut quiet = BTreeSet::new();
    for (i, line) in lines.iter().enumerate() {
        if let Some(name) = line.strip_prefix("alertname: ") {
            match lines.get(i + 1) {
                Some(&"exp_alerts: []") => quiet.insert(name.to_owned()),
                Some(&"exp_alerts:") => fires.insert(name.to_owned()),
                other => panic!("{name}: {other:?}"),
            };
        }
    }
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert!(alerts.len() >= 15, "{alerts:?}");
    for alert in alerts {
        assert!(fires.contains(alert), "{alert} is never seen firing in alerts_test.yml");
        // Mirrors fire only while streamsight's own alert does.
        if !rules.contains(&format!("- alert: {alert}\n        expr: \"streamsight_alert_value")) {
            assert!(quiet.contains(alert), "{alert} is never seen quiet in alerts_test.yml");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_boards_and_rules_use_is_exported() {
    // A polled cluster (for offsets, log starts and poll times) and the seed's
    // incident through the intake (for lag, lag seconds and producer failures).
    let (_kafka, line) = support::start(
        Command::new(env!("CARGO_BIN_EXE_streamsight")).args(["dev-kafka", "--topic", "orders:1"]),
        "bootstrap=",
    );
    let bootstrap = support::field(&line, "bootstrap");
    let config = format!(
        "[serve]\nhistory_interval = \"1s\"\n\n[[serve.clusters]]\nname = \"prod\"\nbootstrap = [\"{bootstrap}\"]\npoll_interval = \"1s\"\n"
    );
    let (_serve, intake, api) = support::serve_with("prometheus", &config, "memory://");
    let t0 = streamsight_testkit::now_ms() - 170_000;
    let mut producer = dsm::payload(
        "checkout",
        (0..=10)
            .map(|k| (t0 + k * 10_000, vec![dsm::produce("orders", 0, k * 100)]))
            .collect(),
    );
    producer.failed_sends = vec![dsm::failed_sends(
        "orders",
        0,
        "MsgTimedOut",
        5,
        streamsight_testkit::now_ms(),
    )];
    let commits = (0..=34)
        .map(|k| {
            (
                t0 + k * 5_000,
                vec![dsm::commit("billing", "orders", 0, (k * 50).min(500))],
            )
        })
        .collect();
    let http = reqwest::Client::new();
    dsm::post(&http, &intake, &producer).await;
    dsm::post(&http, &intake, &dsm::payload("billing", commits)).await;

    let wanted = [
        "kafka_consumergroup_poll_time_ms",
        "kafka_partition_earliest_offset",
        "kafka_consumergroup_group_max_lag_seconds",
    ];
    let deadline = Instant::now() + Duration::from_secs(60);
    let metrics = loop {
        let m = streamsight_testkit::http::get_text(&http, &format!("{api}/metrics")).await;
        let s = samples(&m);
        if wanted.iter().all(|w| s.contains_key(*w)) {
            break m;
        }
        assert!(Instant::now() < deadline, "not all of {wanted:?} yet:\n{m}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let sampled = samples(&metrics);
    let declared: BTreeSet<&str> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();

    // kafka-lag-exporter's board: each metric sampled, with the labels it selects.
    let board: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo(
            "crates/cli/tests/fixtures/kafka-lag-exporter/Kafka_Lag_Exporter_Dashboard.json",
        ))
        .unwrap(),
    )
    .unwrap();
    let mut queries = Vec::new();
    exprs(&board, &mut queries);
    let used: BTreeSet<String> = queries.iter().flat_map(|q| metric_names(q, &["kafka_"])).collect();
    assert!(used.len() >= 6, "{used:?}");
    for name in &used {
        let series = sampled
            .get(name)
            .unwrap_or_else(|| panic!("{name} is not exported:\n{metrics}"));
        // `namespace` comes from Prometheus' Kubernetes discovery, not the exporter.
        let mut needs = vec!["cluster_name"];
        if name.starts_with("kafka_consumergroup_group") {
            needs.push("group");
        }
        if name.starts_with("kafka_partition") || name.ends_with("_offset") {
            needs.extend(["topic", "partition"]);
        }
        for label in needs {
            assert!(
                series.iter().any(|l| l.contains(label)),
                "{name} without {label}: {series:?}"
            );
        }
    }
    // And the rest of its family (reference.md §5).
    for name in [
        "kafka_consumergroup_group_sum_lag",
        "kafka_consumergroup_group_topic_sum_lag",
        "kafka_consumergroup_group_max_lag",
        "kafka_partition_latest_offset",
        "kafka_partition_earliest_offset",
        "kafka_consumergroup_poll_time_ms",
    ] {
        assert!(sampled.contains_key(name), "{name} is not exported");
    }
    assert!(
        sampled["kafka_consumergroup_group_max_lag"]
            .iter()
            .all(|l| l.contains("is_simple_consumer"))
    );

    // Our own rules and board: every metric they read is a family the binary exports
    // (`up` is Prometheus' own).
    let rules = std::fs::read_to_string(repo("deploy/prometheus/alerts.yml")).unwrap();
    let ours: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(repo("deploy/grafana/streamsight.json")).unwrap()).unwrap();
    let mut ours_q = Vec::new();
    exprs(&ours, &mut ours_q);
    let mut names = metric_names(&rules, &["kafka_", "streamsight_"]);
    names.extend(ours_q.iter().flat_map(|q| metric_names(q, &["kafka_", "streamsight_"])));
    assert!(names.len() >= 8, "{names:?}");
    for name in &names {
        assert!(declared.contains(name.as_str()), "{name} is used but not exported");
    }
}
