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
use streamsight_alerts::prometheus::alert_name;
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
    let rule_exprs: Vec<&str> = rules.lines().filter_map(|l| l.trim().strip_prefix("expr: ")).collect();
    let mut names: BTreeSet<String> = rule_exprs
        .iter()
        .flat_map(|e| metric_names(e, &["kafka_", "streamsight_"]))
        .collect();
    names.extend(ours_q.iter().flat_map(|q| metric_names(q, &["kafka_", "streamsight_"])));
    assert!(names.len() >= 8, "{names:?}");
    for name in &names {
        assert!(declared.contains(name.as_str()), "{name} is used but not exported");
    }
}

/// Prometheus 2 (Debian's), scraping `api` every second with the shipped
/// rules evaluated every second: (guard, its URL).
async fn prometheus(api: &str) -> (support::Guard, String) {
    let dir = std::env::temp_dir().join(format!("streamsight-prometheus-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let target = api.trim_start_matches("http://");
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\n\
         scrape_configs:\n  - job_name: streamsight\n    static_configs:\n      - targets: ['{target}']\n",
        repo("deploy/prometheus/alerts.yml").display()
    );
    std::fs::write(dir.join("prometheus.yml"), config).unwrap();
    let port = streamsight_testkit::free_port();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .expect("prometheus (Debian's prometheus package; scripts/test installs it)");
    let guard = support::Guard(child);
    let url = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !http
        .get(format!("{url}/-/ready"))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
    {
        assert!(Instant::now() < deadline, "prometheus not ready: see {}", dir.display());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    (guard, url)
}

/// Prometheus' answer to `query` now: its result vector (asserting success).
async fn query(http: &reqwest::Client, prometheus: &str, query: &str) -> Vec<serde_json::Value> {
    let body: serde_json::Value = http
        .get(format!("{prometheus}/api/v1/query"))
        .query(&[("query", query)])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["status"], "success", "{query}: {body}");
    body["data"]["result"].as_array().cloned().unwrap_or_default()
}

/// `(name, what it names)` of every firing alert in `alerts` (Prometheus'
/// or streamsight's answer), with its summary: `name` and `summary` say where
/// each keeps them.
fn firing(
    alerts: &serde_json::Value,
    name: fn(&serde_json::Value) -> &serde_json::Value,
    summary: fn(&serde_json::Value) -> &serde_json::Value,
) -> BTreeMap<(String, String), String> {
    alerts
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["state"] == "firing")
        .map(|a| {
            let l = &a["labels"];
            let subject = l["group"].as_str().or(l["topic"].as_str()).unwrap_or("").to_owned();
            let name = name(a).as_str().unwrap().to_owned();
            ((name, subject), summary(a).as_str().unwrap_or("").to_owned())
        })
        .collect()
}

async fn prometheus_firing(http: &reqwest::Client, prometheus: &str) -> BTreeMap<(String, String), String> {
    let body = streamsight_testkit::http::get_json(http, &format!("{prometheus}/api/v1/alerts")).await;
    firing(
        &body["data"]["alerts"],
        |a| &a["labels"]["alertname"],
        |a| &a["annotations"]["summary"],
    )
}

async fn streamsight_firing(http: &reqwest::Client, api: &str) -> BTreeMap<(String, String), String> {
    let body = streamsight_testkit::http::get_json(http, &format!("{api}/api/v1/alerts")).await;
    firing(&body["alerts"], |a| &a["rule"], |a| &a["summary"])
}

/// The seed's incident in real time, with Prometheus scraping the collector
/// and evaluating the shipped rules: billing stuck at 500 (stalled since
/// before the outage) while the producer reached 1000, then 100 s of a buggy
/// tracer's placeholders (offset -1), then recovery; shipping keeps up.
/// Prometheus pages within 2 minutes naming billing and orders, says nothing
/// the numbers contradict, never names shipping, resolves after recovery;
/// and every query of the shipped board answers, with data where the
/// incident puts it. Prints each alert's firing time beside streamsight's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_pages_on_the_seed_incident_with_the_shipped_rules() {
    let (_serve, intake, api) =
        support::serve_with("prometheus-seed", "[serve]\nhistory_interval = \"1s\"\n", "memory://");
    let http = reqwest::Client::new();
    let start = streamsight_testkit::now_ms();
    // Before the outage (170 s ago on): 0..1000 produced at 10 a second; billing
    // followed to 500 and stayed there, committing every 5 s; shipping follows.
    let back = |s: i64| start - 170_000 + s * 1000;
    let produced: Vec<_> = (0..=10)
        .map(|k| (back(k * 10), vec![dsm::produce("orders", 0, k * 100)]))
        .collect();
    let billing: Vec<_> = (0..=34)
        .map(|k| {
            (
                back(k * 5),
                vec![dsm::commit("billing", "orders", 0, (k * 50).min(500))],
            )
        })
        .collect();
    let shipping: Vec<_> = (0..=34)
        .map(|k| {
            (
                back(k * 5),
                vec![dsm::commit("shipping", "orders", 0, (k * 50).min(1000) + 1)],
            )
        })
        .collect();
    dsm::post(&http, &intake, &dsm::payload("checkout", produced)).await;
    dsm::post(&http, &intake, &dsm::payload("billing", billing)).await;
    dsm::post(&http, &intake, &dsm::payload("shipping", shipping)).await;
    let first_metrics = loop {
        let m = streamsight_testkit::http::get_text(&http, &format!("{api}/metrics")).await;
        if m.contains("streamsight_data_loss_messages_total{cluster_name=") && m.contains("group=\"shipping\"") {
            break m;
        }
        assert!(streamsight_testkit::now_ms() - start < 30_000, "no groups yet:\n{m}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let (_prometheus, prom) = prometheus(&api).await;
    // What a running collector's rules generate is the shipped file (its
    // rules are the defaults here), but for the line saying where from.
    let from_collector = Command::new(env!("CARGO_BIN_EXE_streamsight"))
        .args(["alerts", "rules", "--format", "prometheus", "--collector", &api])
        .output()
        .unwrap();
    assert!(
        from_collector.status.success(),
        "{}",
        String::from_utf8_lossy(&from_collector.stderr)
    );
    let shipped = std::fs::read_to_string(repo("deploy/prometheus/alerts.yml")).unwrap();
    let body = |text: &str| text.lines().skip(1).collect::<Vec<_>>().join("\n");
    assert_eq!(body(&String::from_utf8_lossy(&from_collector.stdout)), body(&shipped));

    // The outage starts now (t = 0) and lasts 100 s; then sends succeed again
    // and billing catches up.
    let t0 = Instant::now();
    let outage = Duration::from_secs(100);
    let mut prometheus_times: BTreeMap<(String, String), (f64, String)> = BTreeMap::new();
    let mut streamsight_times: BTreeMap<(String, String), (f64, String)> = BTreeMap::new();
    let mut resolved_at: Option<f64> = None;
    let mut lag_during = Vec::new();
    let mut produced = 1000;
    loop {
        let t = t0.elapsed().as_secs_f64();
        let now = streamsight_testkit::now_ms();
        if t0.elapsed() < outage {
            // The buggy tracer's placeholders: offset -1, with and without a partition.
            let failing = vec![(now, vec![dsm::produce("orders", 0, -1), dsm::produce("orders", -1, -1)])];
            dsm::post(&http, &intake, &dsm::payload("checkout", failing)).await;
            dsm::post(
                &http,
                &intake,
                &dsm::payload("billing", vec![(now, vec![dsm::commit("billing", "orders", 0, 500)])]),
            )
            .await;
            dsm::post(
                &http,
                &intake,
                &dsm::payload(
                    "shipping",
                    vec![(now, vec![dsm::commit("shipping", "orders", 0, 1001)])],
                ),
            )
            .await;
        } else {
            produced += 20;
            dsm::post(
                &http,
                &intake,
                &dsm::payload("checkout", vec![(now, vec![dsm::produce("orders", 0, produced)])]),
            )
            .await;
            for group in ["billing", "shipping"] {
                let c = vec![(now, vec![dsm::commit(group, "orders", 0, produced + 1)])];
                dsm::post(&http, &intake, &dsm::payload(group, c)).await;
            }
        }
        for (key, summary) in prometheus_firing(&http, &prom).await {
            prometheus_times.entry(key).or_insert((t, summary));
        }
        for (key, summary) in streamsight_firing(&http, &api).await {
            streamsight_times.entry(key).or_insert((t, summary));
        }
        if t0.elapsed() > Duration::from_secs(20) && t0.elapsed() < outage {
            // streamsight's numbers stay the truth: 501 messages behind.
            lag_during.extend(
                query(&http, &prom, "kafka_consumergroup_group_sum_lag{group=\"billing\"}")
                    .await
                    .iter()
                    .filter_map(|r| r["value"][1].as_str().map(str::to_owned)),
            );
        }
        if t0.elapsed() > outage {
            let firing = prometheus_firing(&http, &prom).await;
            if !firing
                .keys()
                .any(|(a, _)| a == "KafkaConsumerStalled" || a == "KafkaProducerFailing")
            {
                resolved_at.get_or_insert(t);
            }
            if resolved_at.is_some_and(|r| t > r + 5.0) {
                break;
            }
        }
        assert!(
            t0.elapsed() < outage + Duration::from_secs(90),
            "not resolved 90 s after recovery: {:?}",
            prometheus_firing(&http, &prom).await
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    let mut table = String::from("alert | names | Prometheus fired at | streamsight fired at\n");
    let mut keys: BTreeSet<(String, String)> = prometheus_times.keys().cloned().collect();
    keys.extend(streamsight_times.keys().map(|(r, s)| (alert_name(r), s.clone())));
    for (alert, subject) in &keys {
        let p = prometheus_times
            .get(&(alert.clone(), subject.clone()))
            .map(|(t, _)| format!("+{t:.0} s"));
        let s = streamsight_times
            .iter()
            .find(|((rule, of), _)| alert_name(rule) == *alert && of == subject)
            .map(|(_, (t, _))| format!("+{t:.0} s"));
        table.push_str(&format!(
            "{alert} | {subject} | {} | {}\n",
            p.unwrap_or("-".into()),
            s.unwrap_or("-".into())
        ));
    }
    println!(
        "the seed incident, outage at +0 s for 100 s, recovery resolved in Prometheus at +{:.0} s:\n{table}",
        resolved_at.unwrap()
    );

    // Pages within 2 minutes, naming the group and the topic.
    let stalled = &prometheus_times
        .get(&("KafkaConsumerStalled".into(), "billing".into()))
        .unwrap_or_else(|| panic!("no page for billing:\n{table}"));
    assert!(stalled.0 <= 120.0, "{table}");
    assert!(stalled.1.starts_with("billing ("), "{}", stalled.1);
    let failing = &prometheus_times
        .get(&("KafkaProducerFailing".into(), "orders".into()))
        .unwrap_or_else(|| panic!("no page for the failing sends:\n{table}"));
    assert!(failing.0 <= 120.0, "{table}");
    // Words that do not contradict the numbers: lag read 501 throughout.
    assert!(
        failing.1.contains("not in Kafka") && !failing.1.contains("lag reads low"),
        "{}",
        failing.1
    );
    assert!(
        !lag_during.is_empty() && lag_during.iter().all(|v| v == "501"),
        "{lag_during:?}"
    );
    // Shipping kept up: nothing names it, in Prometheus or in streamsight.
    assert!(!keys.iter().any(|(_, s)| s == "shipping"), "{table}");
    // No loss happened: no loss page.
    assert!(!keys.iter().any(|(a, _)| a == "KafkaDataLoss"), "{table}");

    // Every query of the shipped board answers; those the incident feeds have data.
    let board: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(repo("deploy/grafana/streamsight.json")).unwrap()).unwrap();
    for panel in board["panels"].as_array().unwrap() {
        let title = panel["title"].as_str().unwrap_or("?");
        let mut exprs_of = Vec::new();
        exprs(&panel["targets"], &mut exprs_of);
        for expr in exprs_of {
            // Every per-cluster series is filtered by the board's cluster variable.
            assert!(
                expr.contains("$cluster")
                    || !metric_names(&expr, &["kafka_", "streamsight_"])
                        .iter()
                        .any(|m| first_metrics.contains(&format!("{m}{{cluster_name="))),
                "{title}: {expr} ignores $cluster"
            );
            let q = expr.replace("$cluster", ".*").replace("$__rate_interval", "1m");
            let result = query(&http, &prom, &q).await;
            let incident_feeds = !["Dead letters", "Poll time", "lower bound"]
                .iter()
                .any(|p| title.contains(p));
            assert!(!incident_feeds || !result.is_empty(), "{title}: {q} has no data");
        }
    }

    // Counters a rule or panel reads by increase or rate have every series they
    // will ever have from the start (at 0); the others read first appearances.
    let rules = std::fs::read_to_string(repo("deploy/prometheus/alerts.yml")).unwrap();
    let mut all = vec![rules];
    exprs(&board, &mut all);
    let last_metrics = streamsight_testkit::http::get_text(&http, &format!("{api}/metrics")).await;
    let series = |m: &str, family: &str| -> BTreeSet<String> {
        m.lines()
            .filter(|l| l.starts_with(&format!("{family}{{")) || l.starts_with(&format!("{family} ")))
            .map(|l| l.rsplit_once(' ').unwrap().0.to_owned())
            .collect()
    };
    let families: BTreeSet<String> = last_metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter(|l| l.ends_with(" counter"))
        .filter_map(|l| l.split(' ').next().map(str::to_owned))
        .collect();
    for family in families.iter().filter(|f| f.ends_with("_total")) {
        let read_by_increase = all
            .iter()
            .any(|e| e.contains(&format!("increase({family}")) || e.contains(&format!("rate({family}")));
        let read_first_appearance = all.iter().any(|e| e.contains(&format!("{family} * 0")));
        let born_late: Vec<String> = series(&last_metrics, family)
            .difference(&series(&first_metrics, family))
            .cloned()
            .collect();
        assert!(
            !read_by_increase || born_late.is_empty(),
            "{family} is read by increase/rate but these series appeared late (their first value is lost): {born_late:?}"
        );
        if read_by_increase || read_first_appearance {
            println!("{family}: read by a rule or panel; series born late: {born_late:?}");
        }
    }
}
