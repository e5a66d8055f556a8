//! Alerts against the collector's services, time passed in (the seed's incident,
//! a service gone silent), and over real HTTP (a signed webhook, no duplicate
//! after a restart).

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use streamsight_collector::ServeConfig;
use streamsight_collector::alerts::rules::AlertsConfig;
use streamsight_collector::state::Shared;
use streamsight_core::alerts::rule::{Rule, Signal};
use streamsight_core::alerts::{AlertState, Transition};
use streamsight_core::pathway::PathwayPoint;
use streamsight_core::sketch::Sketch;
use streamsight_core::{AlertEvent, EngineConfig, Millis, Observation, Partition, Record};

const T0: i64 = 1_800_000_000_000;

fn at(t: i64) -> Millis {
    Millis(T0 + t * 1000)
}

fn obs(t: i64, o: Observation<'_>) -> Record {
    Record::Observation {
        at: at(t),
        observation: o.to_owned(),
    }
}

fn orders() -> Partition<&'static str> {
    Partition {
        cluster: "prod",
        topic: "orders",
        partition: 0,
    }
}

fn rule(name: &str, signal: Signal, above: f64, for_secs: u64) -> Rule {
    toml::from_str(&format!(
        "name = \"{name}\"\nsignal = \"{}\"\nabove = {above}\nfor = \"{for_secs}s\"",
        serde_json::to_value(signal).unwrap().as_str().unwrap()
    ))
    .unwrap()
}

/// (seed time, change) of the changes that notify.
type Changes = Vec<(i64, Transition)>;
/// (rule, state) as notifiers were handed them.
type Told = Vec<(String, AlertState)>;

/// Runs the alert rounds the collector's housekeeping would, every `every` s
/// from `from` to `to`, after applying `timeline(t)`'s records; returns the
/// changes that notify, with their times, and what notifiers were handed.
fn run(shared: &Shared, (from, to, every): (i64, i64, i64), timeline: impl Fn(i64) -> Vec<Record>) -> (Changes, Told) {
    let mut changes = Vec::new();
    let mut told = Vec::new();
    for t in from..=to {
        shared.apply(&timeline(t));
        if t % every != 0 {
            continue;
        }
        let changed = streamsight_collector::alerts::of(shared).evaluate(shared, at(t));
        shared.apply(&changed);
        for r in &changed {
            if let Record::Alert { event, .. } = r
                && let AlertEvent::Changed(c) = &**event
                && c.to.notifies()
            {
                changes.push((t, c.clone()));
            }
        }
        for (n, done, _silenced) in streamsight_collector::alerts::of(shared).due(at(t)) {
            told.push((n.rule.clone(), n.state));
            shared.apply(&[done]);
        }
    }
    (changes, told)
}

fn first(changes: &[(i64, Transition)], rule: &str, to: AlertState) -> Option<i64> {
    changes
        .iter()
        .find(|(_, c)| c.rule == rule && c.to == to)
        .map(|(t, _)| *t)
}

#[test]
fn the_seed_incident_fires_producer_failing_and_lag_after_their_for_then_resolves() {
    let config = ServeConfig {
        alerts: AlertsConfig {
            rules: vec![rule("lag_over_100s", Signal::GroupLagSeconds, 100.0, 30)],
            ..AlertsConfig::default()
        },
        ..support::loopback("memory://")
    };
    let shared = streamsight_collector::node(config, EngineConfig::default()).unwrap();
    // reference.md §2: offsets 0..=1000 at 10 a second, the group stuck at 500,
    // sends failing from 110 s, recovering at 210 s.
    let timeline = |t: i64| {
        let mut r = Vec::new();
        if t <= 100 {
            r.push(obs(
                t,
                Observation::Produced {
                    partition: orders(),
                    offset: t * 10,
                },
            ));
        }
        if (110..210).contains(&t) {
            r.push(obs(
                t,
                Observation::ProduceFailed {
                    partition: orders(),
                    error: "MsgTimedOut",
                },
            ));
        }
        if t == 210 {
            r.push(obs(
                t,
                Observation::Produced {
                    partition: orders(),
                    offset: 1001,
                },
            ));
        }
        if t % 5 == 0 {
            r.push(obs(
                t,
                Observation::Committed {
                    group: "billing",
                    partition: orders(),
                    offset: (t * 10).min(500),
                },
            ));
        }
        r
    };
    let (changes, told) = run(&shared, (0, 300, 5), timeline);

    let fired = first(&changes, "producer_failing", AlertState::Firing).expect("producer_failing fires");
    assert!(
        (140..=145).contains(&fired),
        "30 s after the first failure at 110 s: {fired}"
    );
    let resolved = first(&changes, "producer_failing", AlertState::Resolved).expect("and resolves");
    assert!(
        (210..=215).contains(&resolved),
        "once a send succeeds at 210 s: {resolved}"
    );
    // Lag seconds = t - 50 while offset 500 waits: over 100 s from 150 s, held 30 s.
    let lag = first(&changes, "lag_over_100s", AlertState::Firing).expect("the lag rule fires");
    assert!((180..=190).contains(&lag), "{lag}");
    assert!(
        first(&changes, "consumer_stalled", AlertState::Firing).is_some(),
        "{changes:?}"
    );
    assert!(
        first(&changes, "lag_seconds_high", AlertState::Firing).is_none(),
        "250 s < 5 m at the end"
    );
    // Nothing is reported twice.
    let mut seen = std::collections::BTreeSet::new();
    for (rule, state) in &told {
        assert!(
            seen.insert((rule.clone(), *state)),
            "{rule} {state:?} told twice: {told:?}"
        );
    }
    assert!(told.contains(&("producer_failing".to_owned(), AlertState::Firing)));
    assert!(told.contains(&("producer_failing".to_owned(), AlertState::Resolved)));
}

#[test]
fn a_flow_drop_is_an_anomaly_with_no_threshold_configured() {
    let shared = streamsight_collector::node(support::loopback("memory://"), EngineConfig::default()).unwrap();
    // 100 messages a second for 40 minutes, then 20 a second.
    let timeline = |t: i64| {
        let offset = if t <= 2400 { t * 100 } else { 240_000 + (t - 2400) * 20 };
        vec![obs(
            t,
            Observation::Produced {
                partition: orders(),
                offset,
            },
        )]
    };
    let (changes, _) = run(&shared, (0, 3000, 10), timeline);
    let fired = first(&changes, "produce_rate_drop", AlertState::Firing).expect("the drop is found");
    assert!(
        (2400..=2520).contains(&fired),
        "within two minutes of the drop at 2400 s: {fired}"
    );
    assert!(
        changes.iter().all(|(t, c)| c.rule != "produce_rate_drop" || *t >= 2400),
        "nothing before the drop: {changes:?}"
    );
    // A deleted topic's detector goes with its series.
    assert!(streamsight_collector::alerts::of(&shared).anomaly_series() >= 1);
    shared.apply(&[obs(
        3001,
        Observation::TopicDeleted {
            cluster: "prod",
            topic: "orders",
        },
    )]);
    let later = at(3001 + 2 * 3600);
    let changed = streamsight_collector::alerts::of(&shared).evaluate(&shared, later);
    shared.apply(&changed);
    assert_eq!(streamsight_collector::alerts::of(&shared).anomaly_series(), 0);
}

#[test]
fn unread_messages_expiring_and_a_partition_left_behind_are_found() {
    let shared = streamsight_collector::node(support::loopback("memory://"), EngineConfig::default()).unwrap();
    let p = |partition| Partition {
        cluster: "prod",
        topic: "orders",
        partition,
    };
    // Partition 0: produced to 1,000,000; retention eats 10 offsets a second from 0;
    // the group sits at 20,000 (2,000 s of margin at t=0). Partition 1: the group
    // commits as records arrive, then, from 400 s, stops; partition 0 keeps
    // committing its same offset, so the group still "moves" there.
    let timeline = |t: i64| {
        let mut r = vec![
            obs(
                t,
                Observation::Produced {
                    partition: p(0),
                    offset: 1_000_000,
                },
            ),
            obs(
                t,
                Observation::LogStart {
                    partition: p(0),
                    offset: t * 10,
                },
            ),
            obs(
                t,
                Observation::Produced {
                    partition: p(1),
                    offset: t * 10,
                },
            ),
        ];
        if t % 5 == 0 {
            r.push(obs(
                t,
                Observation::Committed {
                    group: "billing",
                    partition: p(0),
                    offset: 20_000,
                },
            ));
            if t < 400 {
                r.push(obs(
                    t,
                    Observation::Committed {
                        group: "billing",
                        partition: p(1),
                        offset: t * 10,
                    },
                ));
            }
        }
        r
    };
    let (changes, _) = run(&shared, (0, 900, 10), timeline);
    let expiring = first(&changes, "unread_expiring", AlertState::Firing).expect("unread messages expiring");
    assert!(
        (60..=80).contains(&expiring),
        "once the log start was seen moving for a minute: {expiring}"
    );
    let signals = shared.signals.groups();
    let margin = signals[0].retention_margin_seconds.unwrap();
    assert!((1_000.0..1_200.0).contains(&margin), "2,000 s - 900 s: {margin}");
    let left = first(&changes, "partition_not_committing", AlertState::Firing).expect("a partition left behind");
    assert!(
        (700..=780).contains(&left),
        "5 minutes of silence after 400 s, held 1 minute: {left}"
    );
    assert_eq!(signals[0].partitions_not_committing, 1);
}

fn pathway_point(t: i64, service: &str) -> Record {
    let sketch = Sketch::from_bins(vec![(0.01, 10.0)]);
    Record::Pathway {
        at: at(t),
        point: Box::new(PathwayPoint {
            bucket_start_ms: at(t).0 - 10_000,
            bucket_ms: 10_000,
            hash: 1,
            parent_hash: 0,
            service: service.to_owned(),
            env: "prod".into(),
            edge_tags: vec!["direction:out".into(), "topic:orders".into(), "type:kafka".into()],
            edge_latency: sketch.clone(),
            pathway_latency: sketch.clone(),
            payload_size: sketch,
        }),
    }
}

#[test]
fn a_service_that_goes_silent_is_no_data_not_ok() {
    let config = ServeConfig {
        pathway_window: Duration::from_secs(60),
        ..support::loopback("memory://")
    };
    let shared = streamsight_collector::node(config, EngineConfig::default()).unwrap();
    // checkout reports every 10 s for 2 minutes, then nothing.
    let timeline = |t: i64| {
        if t % 10 == 0 && t <= 120 {
            vec![pathway_point(t, "checkout")]
        } else {
            vec![]
        }
    };
    let (changes, told) = run(&shared, (0, 900, 10), timeline);
    let silent = first(&changes, "service_silent", AlertState::NoData).expect("no_data when it stops reporting");
    // Out of the 60 s pathway window at ~170 s, then 5 minutes without a value.
    assert!((460..=500).contains(&silent), "{silent}: {changes:?}");
    assert!(
        first(&changes, "service_silent", AlertState::Resolved).is_none(),
        "silence never resolves"
    );
    assert!(told.contains(&("service_silent".to_owned(), AlertState::NoData)));
    let list = streamsight_collector::alerts::of(&shared).list(at(900), false);
    assert_eq!(list[0].alert.state, AlertState::NoData);
    assert_eq!(list[0].summary, "checkout stopped reporting");
}

/// Lag per topic and per partition, a group's worst partition, and failed
/// sends by error (a rate: unknown at the first reading, then per minute).
#[test]
fn topic_partition_lag_worst_partition_and_failed_sends_by_error() {
    let toml = r#"
        default_rules = false
        [[rules]]
        name = "orders_behind"
        signal = "topic_lag_messages"
        above = 150
        [[rules]]
        name = "worst_partition"
        signal = "group_lag_messages"
        aggregate = "max"
        above = 150
        [[rules]]
        name = "total_behind"
        signal = "group_lag_messages"
        above = 150
        [[rules]]
        name = "partition_behind"
        signal = "partition_lag_messages"
        above = 90
        [[rules]]
        name = "timeouts"
        signal = "failed_sends"
        above = 0
        scope = { error = "MsgTimedOut" }
    "#;
    let config = ServeConfig {
        alerts: toml::from_str(toml).unwrap(),
        ..support::loopback("memory://")
    };
    let shared = streamsight_collector::node(config, EngineConfig::default()).unwrap();
    let part = |topic: &'static str, partition: i32| Partition {
        cluster: "prod",
        topic,
        partition,
    };
    let failed = |t: i64, error: &str, count: u64| Record::Delivery {
        at: at(t),
        fact: Box::new(streamsight_core::delivery::Fact::FailedSends {
            cluster: "prod".into(),
            topic: "orders".into(),
            partition: Some(0),
            window_ms: 60_000,
            count,
            trace_ids: Vec::new(),
            error: error.into(),
        }),
    };
    let timeline = |t: i64| {
        let mut r = Vec::new();
        if t == 0 {
            // orders: 100 behind on each of 2 partitions; refunds: 50 behind.
            for (topic, p, end, committed) in [
                ("orders", 0, 1_000, 900),
                ("orders", 1, 1_000, 900),
                ("refunds", 0, 500, 450),
            ] {
                r.push(obs(
                    t,
                    Observation::Produced {
                        partition: part(topic, p),
                        offset: end,
                    },
                ));
                r.push(obs(
                    t,
                    Observation::Committed {
                        group: "billing",
                        partition: part(topic, p),
                        offset: committed,
                    },
                ));
            }
        }
        if t == 10 {
            r.push(failed(t, "MsgTimedOut", 3));
            r.push(failed(t, "NotEnoughReplicas", 2));
        }
        if t == 25 {
            r.push(failed(t, "MsgTimedOut", 4));
            r.push(failed(t, "NotEnoughReplicas", 2));
        }
        r
    };
    let (changes, _) = run(&shared, (0, 40, 10), timeline);
    let fired = |rule: &str| -> Vec<streamsight_core::alerts::Labels> {
        changes
            .iter()
            .filter(|(_, c)| c.rule == rule && c.to == AlertState::Firing)
            .map(|(_, c)| (*c.labels).clone())
            .collect()
    };
    let l = |pairs: &[(&str, &str)]| -> streamsight_core::alerts::Labels {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    };
    assert_eq!(
        fired("orders_behind"),
        [l(&[("cluster", "prod"), ("group", "billing"), ("topic", "orders")])],
        "200 behind on orders, 50 on refunds"
    );
    assert!(fired("worst_partition").is_empty(), "the worst partition is 100 behind");
    assert_eq!(fired("total_behind").len(), 1, "250 behind in all");
    let partitions: Vec<String> = fired("partition_behind")
        .iter()
        .map(|x| format!("{}/{}", x["topic"], x["partition"]))
        .collect();
    assert_eq!(partitions, ["orders/0", "orders/1"]);
    let timeouts = changes
        .iter()
        .find(|(_, c)| c.rule == "timeouts" && c.to == AlertState::Firing)
        .unwrap_or_else(|| panic!("{changes:#?}"));
    assert_eq!(
        timeouts.0, 10,
        "fires at the first evaluation that sees failures: a series first seen after the signal's first reading counts from 0"
    );
    assert_eq!(timeouts.1.labels["error"], "MsgTimedOut");
    // 3 failures of an error never seen before: 3 in the last minute.
    assert_eq!(timeouts.1.value, Some(3.0));
    assert!(
        changes
            .iter()
            .all(|(_, c)| c.rule != "timeouts" || c.labels["error"] == "MsgTimedOut")
    );
}

/// A webhook receiver: every body and its signature header.
async fn receiver() -> (String, Arc<Mutex<Vec<(serde_json::Value, String)>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
            let g = g.clone();
            async move {
                let sig = headers
                    .get("x-streamsight-signature")
                    .map(|v| v.to_str().unwrap().to_owned())
                    .unwrap_or_default();
                let mac = streamsight_collector::alerts::notify::hmac_sha256(b"s3cret", &body);
                let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
                assert_eq!(sig, format!("sha256={hex}"), "signed with the shared secret");
                g.lock().unwrap().push((serde_json::from_slice(&body).unwrap(), sig));
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, got)
}

fn firing(got: &Mutex<Vec<(serde_json::Value, String)>>) -> usize {
    got.lock()
        .unwrap()
        .iter()
        .filter(|(b, _)| b["alert"]["rule"] == "producer_failing" && b["alert"]["state"] == "firing")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_webhook_is_told_once_across_a_restart() {
    let (url, got) = receiver().await;
    let dir = std::env::temp_dir().join(format!("streamsight-alerts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = || {
        let mut alerts: AlertsConfig = toml::from_str(&format!(
            "[[notifiers]]\nurl = \"{url}\"\nsecret = \"s3cret\"\n\n[[rules]]\nname = \"producer_failing\"\nsignal = \"producer_failing\"\nabove = 0\n"
        ))
        .unwrap();
        alerts.max_series = 1_000;
        ServeConfig {
            history_interval: Duration::from_millis(200),
            alerts,
            ..support::loopback(&format!("sqlite://{}/s.db", dir.display()))
        }
    };
    let running = streamsight_collector::serve(config(), EngineConfig::default())
        .await
        .unwrap();
    failed_sends(running.intake_addr).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while firing(&got) == 0 {
        assert!(Instant::now() < deadline, "no notification");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let body = got.lock().unwrap()[0].0.clone();
    assert_eq!(body["alert"]["labels"]["topic"], "orders", "{body}");
    assert!(body["alert"]["url"].as_str().unwrap().contains("/topics/"), "{body}");
    // Let the record that it was told reach the store, then restart.
    tokio::time::sleep(Duration::from_millis(600)).await;
    running.shutdown().await;
    let running = streamsight_collector::serve(config(), EngineConfig::default())
        .await
        .unwrap();
    let api = format!("http://{}/api/v1/alerts", running.api_addr);
    let alerts: serde_json::Value = reqwest::get(&api).await.unwrap().json().await.unwrap();
    let replayed = alerts["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["rule"] == "producer_failing")
        .unwrap_or_else(|| panic!("{alerts}"))
        .clone();
    assert_eq!(replayed["state"], "firing", "still firing after the restart");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(firing(&got), 1, "told once, not again after the restart");
    let metrics = reqwest::get(format!("http://{}/metrics", running.api_addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("streamsight_alerts{rule=\"producer_failing\",state=\"firing\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("streamsight_notifications_failed_total 0"));
    // The rounds that fired it were timed.
    let evaluation: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("streamsight_alerts_evaluation_seconds "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{metrics}"));
    assert!(evaluation > 0.0 && evaluation < 5.0, "{evaluation}");
    running.shutdown().await;
}

/// A receiver that never answers: the notification is not delivered after its
/// retries, said once as the typed failure (counted in /metrics), and what is
/// said of the receiver names its host, never the webhook's secret path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undelivered_notification_is_a_failure_event_without_the_webhooks_path() {
    let port = streamsight_testkit::free_port();
    let url = format!("http://127.0.0.1:{port}/hooks/T000/B000/s3cretpath");
    let mut alerts: AlertsConfig = toml::from_str(&format!(
        "[[notifiers]]\nurl = \"{url}\"\n\n[[rules]]\nname = \"producer_failing\"\nsignal = \"producer_failing\"\nabove = 0\n"
    ))
    .unwrap();
    alerts.max_series = 1_000;
    let config = ServeConfig {
        history_interval: Duration::from_millis(200),
        alerts,
        ..support::loopback("memory://")
    };
    let running = streamsight_collector::serve(config, EngineConfig::default())
        .await
        .unwrap();
    failed_sends(running.intake_addr).await;
    let client = reqwest::Client::new();
    let api = format!("http://{}", running.api_addr);
    streamsight_testkit::eventually(60, "the undelivered notification counted", async || {
        let metrics = streamsight_testkit::http::get_text(&client, &format!("{api}/metrics")).await;
        let counted = streamsight_testkit::http::sample(
            &metrics,
            r#"streamsight_failures_total{failure="notification_not_delivered"}"#,
        );
        counted.filter(|&n| n > 0.0)
    })
    .await;
    let report = streamsight_testkit::http::get_json(&client, &format!("{api}/api/v1/alerts")).await;
    let notifier = &report["notifiers"][0];
    assert!(notifier["failed"].as_u64() >= Some(1), "{report}");
    let said = notifier.to_string();
    assert!(said.contains(&format!("127.0.0.1:{port}")), "{said}");
    assert!(!said.contains("s3cretpath"), "the webhook's path is its secret: {said}");
    running.shutdown().await;
}

/// Sends one payload of failed sends to `orders` partition 0 through the intake.
async fn failed_sends(intake_addr: std::net::SocketAddr) {
    let payload = streamsight_wire::dsm::payload::Payload {
        service: "checkout".into(),
        failed_sends: vec![streamsight_wire::dsm::payload::FailedSends {
            topic: "orders".into(),
            partition: 0,
            error: "MsgTimedOut".into(),
            count: 3,
            ..Default::default()
        }],
        ..Default::default()
    };
    let status = reqwest::Client::new()
        .post(format!("http://{intake_addr}/v0.1/pipeline_stats"))
        .header("Content-Type", "application/msgpack")
        .header("Content-Encoding", "gzip")
        .body(streamsight_wire::dsm::payload::encode(&payload))
        .send()
        .await
        .unwrap()
        .status();
    assert!(status.is_success(), "{status}");
}

/// Polls `what` until it holds (deadline 30 s).
async fn until(what: &str, mut holds: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !holds().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn told(got: &Mutex<Vec<(serde_json::Value, String)>>, rule: &str, state: &str) -> usize {
    got.lock()
        .unwrap()
        .iter()
        .filter(|(b, _)| b["alert"]["rule"] == rule && b["alert"]["state"] == state)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_made_through_the_api_fires_outlives_retention_and_a_restart_and_resolves_when_removed() {
    let (url, got) = receiver().await;
    let dir = std::env::temp_dir().join(format!("streamsight-alert-rules-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let storage = format!("sqlite://{}/s.db", dir.display());
    let config = || {
        let mut alerts: AlertsConfig =
            toml::from_str(&format!("[[notifiers]]\nurl = \"{url}\"\nsecret = \"s3cret\"\n")).unwrap();
        alerts.max_series = 1_000;
        ServeConfig {
            history_interval: Duration::from_millis(200),
            // The state is written again every 1.5 s; the originals go after 3 s.
            retention: Duration::from_secs(3),
            alerts,
            ..support::loopback(&storage)
        }
    };
    let running = streamsight_collector::serve(config(), EngineConfig::default())
        .await
        .unwrap();
    let http = reqwest::Client::new();
    let api = format!("http://{}/api/v1", running.api_addr);
    let put = |name: &str, body: serde_json::Value| http.put(format!("{api}/rules/{name}")).json(&body).send();
    let made_at = Millis(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64,
    );
    let r = put(
        "sends_failing",
        serde_json::json!({"signal": "producer_failing", "above": 0, "for": "0s",
            "labels": {"severity": "page"}, "summary": "sends to {topic} fail"}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    // The default rule of that signal turned off through the API.
    let r = put(
        "producer_failing",
        serde_json::json!({"signal": "producer_failing", "enabled": false}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    // Refused with the reason, nothing stored.
    for (name, body, status, kind) in [
        (
            "a b",
            serde_json::json!({"signal": "producer_failing"}),
            400,
            "bad_rule",
        ),
        (
            "x",
            serde_json::json!({"name": "y", "signal": "producer_failing"}),
            400,
            "bad_rule",
        ),
        (
            "x",
            serde_json::json!({"signal": "producer_failing", "typo": 1}),
            400,
            "bad_rule",
        ),
        ("x", serde_json::json!({"signal": "nope"}), 400, "bad_rule"),
        (
            "x",
            serde_json::json!({"signal": "producer_failing", "summary": "s".repeat(70_000)}),
            413,
            "",
        ),
    ] {
        let r = put(name, body).await.unwrap();
        assert_eq!(r.status(), status);
        if !kind.is_empty() {
            let body: serde_json::Value = r.json().await.unwrap();
            assert_eq!(body["error"], kind, "{body}");
        }
    }
    let r = http
        .put(format!("{api}/rules/x"))
        .header("content-type", "application/json")
        .body(r#"{"signal": "producer_failing", "above": 1e999}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "a threshold beyond f64");
    let rules: serde_json::Value = http
        .get(format!("{api}/rules"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let find = |rules: &serde_json::Value, name: &str| {
        rules["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {rules}"))
    };
    assert_eq!(find(&rules, "sends_failing")["source"], "api");
    assert_eq!(find(&rules, "producer_failing")["enabled"], false);
    assert_eq!(find(&rules, "lag_seconds_high")["source"], "default");
    assert!(rules["rules"].as_array().unwrap().iter().all(|r| r["name"] != "x"));

    failed_sends(running.intake_addr).await;
    until("the API rule's alert", async || {
        told(&got, "sends_failing", "firing") == 1
    })
    .await;
    assert_eq!(
        told(&got, "producer_failing", "firing"),
        0,
        "the default was turned off"
    );
    let body = got.lock().unwrap()[0].0.clone();
    assert_eq!(body["alert"]["labels"]["severity"], "page", "{body}");
    assert_eq!(body["alert"]["summary"], "sends to orders fail", "{body}");

    // A silence made and ended.
    let r = http
        .post(format!("{api}/silences"))
        .json(&serde_json::json!({"matchers": {"alertname": "nothing"}, "duration": "1h"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let id = r.json::<serde_json::Value>().await.unwrap()["silence"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = http.delete(format!("{api}/silences/{id}")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = http.delete(format!("{api}/silences/{id}")).send().await.unwrap();
    assert_eq!(r.status(), 404);

    // Retention deletes the records that made the rule and fired the alert;
    // the state was written again since.
    until("retention to delete the original records", async || {
        let mut store = streamsight_store::open(&storage).unwrap();
        let mut oldest = i64::MAX;
        store
            .scan(Millis(0), &mut |batch| {
                oldest = batch.iter().map(|r| r.at().0).fold(oldest, i64::min);
            })
            .unwrap();
        oldest > made_at.0 + 1_000
    })
    .await;
    until("the delivery to be stored", async || {
        let alerts: serde_json::Value = http
            .get(format!("{api}/alerts"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        alerts["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["rule"] == "sends_failing" && a["notified"] == "firing")
    })
    .await;
    running.shutdown().await;

    let running = streamsight_collector::serve(config(), EngineConfig::default())
        .await
        .unwrap();
    let api = format!("http://{}/api/v1", running.api_addr);
    let rules: serde_json::Value = http
        .get(format!("{api}/rules"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        find(&rules, "sends_failing")["source"],
        "api",
        "the rule outlived retention and the restart"
    );
    assert_eq!(find(&rules, "producer_failing")["enabled"], false);
    let alerts: serde_json::Value = http
        .get(format!("{api}/alerts"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let alert = alerts["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["rule"] == "sends_failing")
        .cloned()
        .unwrap_or_else(|| panic!("{alerts}"));
    assert_eq!(alert["state"], "firing", "{alert}");
    assert!(
        alerts["silences"].as_array().unwrap().is_empty(),
        "the ended silence stays ended"
    );

    // Removed: its alert resolves and people hear so; it is gone from the rules.
    let r = http.delete(format!("{api}/rules/sends_failing")).send().await.unwrap();
    assert_eq!(r.status(), 204);
    let r = http.delete(format!("{api}/rules/sends_failing")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let r = http
        .delete(format!("{api}/rules/lag_seconds_high"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404, "a default rule is turned off, not deleted");
    until("the resolution", async || told(&got, "sends_failing", "resolved") == 1).await;
    assert_eq!(told(&got, "sends_failing", "firing"), 1, "told once across the restart");
    let rules: serde_json::Value = http
        .get(format!("{api}/rules"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        rules["rules"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["name"] != "sends_failing")
    );
    running.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_made_through_the_api_are_bounded() {
    let running = streamsight_collector::serve(support::loopback("memory://"), EngineConfig::default())
        .await
        .unwrap();
    let http = reqwest::Client::new();
    let api = format!("http://{}/api/v1", running.api_addr);
    for i in 0..streamsight_collector::alerts::MAX_API_RULES {
        let r = http
            .put(format!("{api}/rules/r{i}"))
            .json(&serde_json::json!({"signal": "group_lag_messages", "above": i}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let r = http
        .put(format!("{api}/rules/one_more"))
        .json(&serde_json::json!({"signal": "group_lag_messages"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    // Replacing one that exists is still allowed.
    let r = http
        .put(format!("{api}/rules/r0"))
        .json(&serde_json::json!({"signal": "group_lag_messages", "above": 5}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    running.shutdown().await;
}
