//! The dashboard in a real browser (headless Chromium over WebDriver):
//!
//! - against `streamsight demo`: every page loads with no console error, no
//!   failed request and no WCAG 2.1 AA violation (axe-core), shows what the
//!   demo's pipeline is doing, and can be used from the keyboard alone;
//! - against the seed's incident sent to `streamsight serve`: the group page says
//!   501 messages, lag seconds that keep rising and that producers are failing,
//!   never 0; a group whose lag is unknown says "unknown"; a hostile name is text.
//!
//! Screenshots of every page land in `target/dashboard-screenshots/`.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

mod support;

use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};
use support::browser::{Browser, seconds};
use support::dsm;

use streamsight_testkit::http::get_json as get;

async fn wait_for(client: &reqwest::Client, url: &str, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    streamsight_testkit::http::wait_for_json(client, url, 120, what, ready).await
}

fn group<'a>(overview: &'a Value, name: &str) -> Option<&'a Value> {
    overview["groups"]["rows"]
        .as_array()?
        .iter()
        .find(|g| g["group"] == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_of_the_demo_loads_clean_accessible_and_true() {
    let (_demo, line) = support::start(
        Command::new(env!("CARGO_BIN_EXE_streamsight"))
            .args(["demo", "--api-listen", "127.0.0.1:0", "--first-incident-after", "60s"])
            .args(["--incident-every", "1h", "--incident-for", "10m"])
            .env("STREAMSIGHT_LOG", "warn"),
        "streamsight serving",
    );
    let api = support::field(&line, "api");
    let http = reqwest::Client::new();
    // Before the broker starts rejecting sends: a stuck group, dead letters, pathways.
    wait_for(&http, &format!("{api}/api/v1/overview"), "the demo's groups", |v| {
        ["billing", "shipping", "fraud"].iter().all(|g| group(v, g).is_some())
            && group(v, "fraud").is_some_and(|g| g["status"] == "stall")
            && v["incidents"]["dlq"].as_array().is_some_and(|a| !a.is_empty())
    })
    .await;
    wait_for(&http, &format!("{api}/api/v1/dlq"), "dead letters read", |v| {
        v["clusters"][0]["topics"][0]["recent"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
    })
    .await;
    // Drop accounting reconciles minute windows once they close.
    wait_for(
        &http,
        &format!("{api}/api/v1/deliveries"),
        "dead letters accounted",
        |v| {
            v["totals"].as_array().is_some_and(|t| {
                t.iter()
                    .any(|x| x["totals"]["missing"]["dead_lettered"].as_u64() > Some(0))
            })
        },
    )
    .await;
    wait_for(&http, &format!("{api}/api/v1/pathways"), "pathways", |v| {
        v["edges"].as_array().is_some_and(|e| e.len() >= 4)
    })
    .await;
    // Then the incident.
    wait_for(
        &http,
        &format!("{api}/api/v1/overview"),
        "the producers' incident",
        |v| {
            v["incidents"]["producers_failing"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        },
    )
    .await;

    let b = Browser::start(1400, 1000).await;
    let pages = [
        ("overview", "/"),
        ("group-fraud", "/groups/demo/fraud"),
        ("group-shipping", "/groups/demo/shipping"),
        ("topic-orders", "/topics/demo/orders"),
        ("pathways", "/pathways"),
        ("dlq", "/dlq"),
        ("probes", "/probes"),
        ("clusters", "/clusters"),
        ("alerts", "/alerts"),
    ];
    for (name, path) in pages {
        b.open(&format!("{api}{path}")).await;
        b.check_page(name).await;
    }

    // What the pages say.
    b.open(&format!("{api}/")).await;
    let incidents = b.text("#inc + *").await;
    assert!(incidents.contains("Producers failing: orders"), "{incidents}");
    assert!(incidents.contains("NotEnoughReplicas"), "{incidents}");
    assert!(incidents.contains("Dead letters: orders.dlq"), "{incidents}");
    let first_row = b.text("tbody tr").await;
    assert!(
        first_row.starts_with("STALL") && first_row.contains("fraud"),
        "worst first: {first_row}"
    );
    assert!(first_row.contains("unchanged for"), "the reason in words: {first_row}");

    b.open(&format!("{api}/groups/demo/fraud")).await;
    assert!(b.text("#producer-failing").await.contains("Producers are failing"));
    // Lag in messages, lag in time, and (a polled cluster) its members.
    b.wait_for_charts(3).await;
    b.screenshot("group-fraud-charts").await;

    // The derived signals: one read model, the same values on the group page,
    // in its API, in /metrics and in the alerts' API (read again until one
    // housekeeping round's values are seen by all four).
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let detail: Value = get(&http, &format!("{api}/api/v1/groups/demo/fraud")).await;
        let signals = &detail["signals"];
        let (Some(catch_up), Some(not_committing)) = (
            signals["catch_up_seconds"].as_f64(),
            signals["partitions_not_committing"].as_u64(),
        ) else {
            assert!(Instant::now() < deadline, "no derived signals for fraud: {detail}");
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        b.open(&format!("{api}/groups/demo/fraud")).await;
        let shown = b.text("#signals").await;
        let page_not_committing = b.text("#signals dd:nth-of-type(3)").await;
        let page_catch_up = b.text("#signals dd:nth-of-type(2)").await;
        let metrics = streamsight_testkit::http::get_text(&http, &format!("{api}/metrics")).await;
        let exported = streamsight_testkit::http::sample(
            &metrics,
            r#"streamsight_catch_up_seconds{cluster_name="demo",group="fraud"}"#,
        );
        let alerts: Value = get(&http, &format!("{api}/api/v1/alerts")).await;
        let listed = alerts["group_signals"]
            .as_array()
            .and_then(|a| a.iter().find(|g| g["group"] == "fraud"))
            .cloned()
            .unwrap_or_default();
        let agree = page_not_committing == not_committing.to_string()
            && (catch_up >= 1e12) == page_catch_up.contains("never: falling behind")
            && exported.is_some_and(|e| (e >= 1e12) == (catch_up >= 1e12))
            && listed["partitions_not_committing"].as_u64() == Some(not_committing);
        if agree {
            assert!(shown.contains("Retention deletes unread messages in"), "{shown}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "page {shown:?}, API {signals}, /metrics {exported:?}, alerts {listed}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    b.screenshot("group-fraud-signals").await;

    b.open(&format!("{api}/topics/demo/orders")).await;
    let topic = b.text("main").await;
    assert!(
        topic.contains("Failed sends by error") && topic.contains("NotEnoughReplicas"),
        "{topic}"
    );
    assert!(topic.contains("dead lettered"), "{topic}");

    b.open(&format!("{api}/pathways")).await;
    let edges = b.eval("return document.querySelectorAll('svg a.edge').length").await;
    assert!(edges.as_u64().unwrap() >= 4, "{edges}");
    // Opening an edge: its details, with a URL that can be shared.
    b.client
        .find(fantoccini::Locator::Css("svg a.edge"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_until("the edge's panel", "return !!document.getElementById('edge')")
        .await;
    assert!(b.client.current_url().await.unwrap().query().unwrap().contains("edge="));
    b.check_page("pathways-edge").await;

    b.open(&format!("{api}/dlq")).await;
    let dlq = b.text("main").await;
    assert!(
        dlq.contains("schema_violation") || dlq.contains("deserialization"),
        "{dlq}"
    );
    assert!(dlq.contains("orders["), "provenance: {dlq}");

    // Silencing an alert from its row, then ending the silence.
    b.open(&format!("{api}/alerts")).await;
    b.wait_until(
        "an alert with its Silence button",
        "return [...document.querySelectorAll('main button')].some(b => b.textContent === 'Silence…')",
    )
    .await;
    // The rules' table says an anomaly rule's floor: lag_growth pages only above a minute.
    let rules = b.text("main").await;
    assert!(rules.contains("anomalous rise (4 spreads) and above 60"), "{rules}");
    b.eval(
        "[...document.querySelectorAll('main button')].find(b => b.textContent === 'Silence…').click(); return true",
    )
    .await;
    b.wait_until(
        "the silence dialog",
        "return document.getElementById('silence-dialog').open",
    )
    .await;
    let matchers = b.eval("return document.getElementById('silence-matchers').value").await;
    assert!(matchers.as_str().unwrap().starts_with("alertname="), "{matchers}");
    b.eval("document.getElementById('silence-comment').value = 'deploying <b>fix</b>'; return true")
        .await;
    b.check_page("alerts-silence-dialog").await;
    b.eval("document.querySelector('#silence-dialog button[type=submit]').click(); return true")
        .await;
    b.wait_until(
        "the silence listed",
        "return !document.getElementById('silence-dialog').open && document.querySelector('main').innerText.includes('deploying <b>fix</b>')",
    )
    .await;
    let silences: Value = get(&http, &format!("{api}/api/v1/silences")).await;
    assert_eq!(silences["silences"].as_array().unwrap().len(), 1, "{silences}");
    b.wait_until(
        "the alert marked silenced",
        "return document.querySelector('main table').innerText.includes('(silenced)')",
    )
    .await;
    b.check_page("alerts-silenced").await;
    b.eval("[...document.querySelectorAll('main button')].find(b => b.textContent === 'End').click(); return true")
        .await;
    b.wait_until(
        "the silence ended",
        "return document.querySelector('main').innerText.includes('No silence is active.')",
    )
    .await;

    // The keyboard alone: the skip link first, then into the content, then to a group.
    b.open(&format!("{api}/")).await;
    b.client
        .active_element()
        .await
        .unwrap()
        .send_keys("\u{E004}")
        .await
        .unwrap();
    let focused = b.eval("return document.activeElement.className").await;
    assert_eq!(focused, "skip", "Tab reaches the skip link first");
    b.client
        .active_element()
        .await
        .unwrap()
        .send_keys("\u{E007}")
        .await
        .unwrap();
    assert_eq!(b.eval("return document.activeElement.id").await, "main");
    let mut reached = false;
    for _ in 0..40 {
        b.client
            .active_element()
            .await
            .unwrap()
            .send_keys("\u{E004}")
            .await
            .unwrap();
        let href = b.eval("return document.activeElement.getAttribute('href')").await;
        if href.as_str().is_some_and(|h| h.starts_with("/groups/")) {
            reached = true;
            break;
        }
    }
    assert!(reached, "Tab reaches a group link");
    b.client
        .active_element()
        .await
        .unwrap()
        .send_keys("\u{E007}")
        .await
        .unwrap();
    b.wait_until(
        "Enter opens the group",
        "return location.pathname.startsWith('/groups/') && document.body.dataset.loaded === 'true'",
    )
    .await;
}

/// Seed times (s) are mapped to `t0 + t`.
fn seed_payloads(t0: i64, now_s: i64) -> Vec<dsm::Payload> {
    let at = |t: i64| t0 + t * 1000;
    // Offsets 0..=1000 at 10 a second: 500 at t=50 s, 1000 at t=100 s.
    let produced = (0..=10)
        .map(|k| (at(k * 10), vec![dsm::produce("orders", 0, k * 100)]))
        .collect();
    let mut producer = dsm::payload("checkout", produced);
    // Sends fail from t=110 s on, and still fail now.
    producer.failed_sends = vec![dsm::failed_sends("orders", 0, "MsgTimedOut", 17, at(now_s))];
    // The group follows to 500 and stays there, committing every 5 s.
    let commits = (0..=now_s / 5)
        .map(|k| (at(k * 5), vec![dsm::commit("billing", "orders", 0, (k * 50).min(500))]))
        .collect();
    // A group whose partition nobody reports an end for: its lag is unknown.
    let unknown = vec![(at(now_s), vec![dsm::commit("audit", "payments", 0, 10)])];
    // A name meant to run as markup.
    let hostile = vec![(
        at(now_s),
        vec![dsm::commit("<img src=x onerror=alert(1)>", "orders", 0, 900)],
    )];
    vec![
        producer,
        dsm::payload("billing", commits),
        dsm::payload("audit", unknown),
        dsm::payload("mallory", hostile),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_incident_reads_right_on_the_group_page() {
    let (serve, intake, api) =
        support::serve_with("dashboard-seed", "[serve]\nhistory_interval = \"1s\"\n", "memory://");
    let http = reqwest::Client::new();
    // Seed time 170 s is now: 60 s into the producer's failure.
    let now_s = 170;
    let t0 = streamsight_testkit::now_ms() - now_s * 1000;
    for p in seed_payloads(t0, now_s) {
        dsm::post(&http, &intake, &p).await;
    }
    let overview = wait_for(&http, &format!("{api}/api/v1/overview"), "the seed's groups", |v| {
        group(v, "billing").is_some() && group(v, "audit").is_some()
    })
    .await;
    // The cluster's name may hold a '/': the page's path carries it encoded.
    let cluster = group(&overview, "billing").unwrap()["cluster"]
        .as_str()
        .unwrap()
        .replace('/', "%2F");

    let b = Browser::start(1400, 1000).await;
    b.open(&format!("{api}/groups/{cluster}/billing")).await;
    b.wait_for_charts(2).await;
    b.check_page("seed-incident").await;
    assert!(
        b.text("#producer-failing")
            .await
            .contains("Producers are failing on orders")
    );
    assert!(
        b.text("#why").await.contains("501 messages wait"),
        "{}",
        b.text("#why").await
    );
    let cells = |row: Value| -> Vec<String> { serde_json::from_value(row).unwrap() };
    let row_script = "return [...document.querySelectorAll('tbody tr')[0].cells].map(c => c.innerText)";
    let row = cells(b.eval(row_script).await);
    // Topic, Partition, Status, Why, Committed, End offset, Lag, Lag (time), Owner, Last commit
    assert_eq!(
        (row[0].as_str(), row[1].as_str(), row[2].as_str()),
        ("orders", "0", "STALL"),
        "{row:?}"
    );
    assert_eq!(row[6], "501", "lag in messages: {row:?}");
    let first = seconds(&row[7]).unwrap_or_else(|| panic!("lag seconds known: {row:?}"));
    assert!((115.0..200.0).contains(&first), "about 120 s behind, never 0: {row:?}");
    // It keeps rising while the producer fails: the page refreshes by itself.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let row = cells(b.eval(row_script).await);
        let now = seconds(&row[7]).unwrap();
        assert_eq!(row[6], "501", "{row:?}");
        if now >= first + 2.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "lag seconds stuck at {now} s (first {first} s)"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let chart = b
        .eval("return document.querySelectorAll('figure [role=img]')[1].getAttribute('aria-label')")
        .await;
    assert!(!chart.as_str().unwrap().contains("latest 0 s"), "{chart}");
    b.screenshot("seed-incident-later").await;

    b.open(&format!("{api}/groups/{cluster}/audit")).await;
    let row = cells(b.eval(row_script).await);
    assert_eq!(
        (row[2].as_str(), row[6].as_str(), row[7].as_str()),
        ("STALE", "unknown", "unknown"),
        "{row:?}"
    );
    b.check_page("unknown-lag").await;

    b.open(&format!("{api}/")).await;
    let hostile = b
        .eval("return [...document.querySelectorAll('a')].some(a => a.innerText === '<img src=x onerror=alert(1)>')")
        .await;
    assert_eq!(hostile, Value::Bool(true), "the hostile name is shown as text");
    assert_eq!(b.eval("return document.querySelectorAll('img').length").await, 0);
    b.check_page("overview-seed").await;
    // A group whose lag nothing knows reads unknown, not "≥ 0".
    let audit = b
        .eval("return [...document.querySelectorAll('tbody tr')].find(r => r.cells[1].innerText === 'audit').cells[4].innerText")
        .await;
    assert_eq!(audit.as_str(), Some("unknown"), "{audit}");

    // The accessibility check is not vacuous: an image without a text alternative fails it.
    b.eval("document.body.append(Object.assign(document.createElement('img'), { src: 'data:,' })); return true")
        .await;
    let violations = b.accessibility_violations().await;
    assert!(violations.iter().any(|v| v.starts_with("image-alt")), "{violations:?}");

    // A page whose collector stops answering says it is stale, and keeps the
    // last data it had rather than going blank.
    b.open(&format!("{api}/groups/{cluster}/billing")).await;
    drop(serve);
    b.wait_until(
        "the stale notice",
        "return document.getElementById('freshness').innerText.startsWith('Stale: last update')",
    )
    .await;
    assert!(b.text("main").await.contains("501"));
    b.screenshot("stale").await;
}

/// A message's journey page: its spans (OTLP/JSON, as an OpenTelemetry SDK
/// sends them), its log line, the failed processing as the group's verdict; a
/// hostile service name stays text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journey_page_shows_the_path_and_where_it_stopped() {
    let (_serve, line) =
        support::serve_with_line("dashboard-journey", "[serve]\nhistory_interval = \"1s\"\n", "memory://");
    let (api, otlp) = (support::field(&line, "api"), support::field(&line, "otlp"));
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let now_ns = streamsight_testkit::now_ms() as u128 * 1_000_000;
    let attrs = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| serde_json::json!({"key": k, "value": {"stringValue": v}}))
            .collect::<Vec<_>>()
    };
    let body = serde_json::json!({"resourceSpans": [{
        "resource": {"attributes": attrs(&[("service.name", "<img src=x onerror=alert(1)>")])},
        "scopeSpans": [{"spans": [
            {"traceId": trace, "spanId": "00f067aa0ba902b7", "name": "orders send", "kind": 4,
             "startTimeUnixNano": now_ns.to_string(), "endTimeUnixNano": (now_ns + 1_000_000).to_string(),
             "attributes": attrs(&[("messaging.destination.name", "orders"), ("messaging.operation.type", "publish")])},
            {"traceId": trace, "spanId": "00f067aa0ba902b8", "parentSpanId": "00f067aa0ba902b7",
             "name": "orders process", "kind": 5,
             "startTimeUnixNano": (now_ns + 5_000_000).to_string(), "endTimeUnixNano": (now_ns + 9_000_000).to_string(),
             "attributes": attrs(&[("messaging.destination.name", "orders"), ("messaging.destination.partition.id", "2"),
                                   ("messaging.kafka.offset", "41"), ("messaging.consumer.group.name", "billing"),
                                   ("messaging.operation.type", "process")]),
             "status": {"code": 2, "message": "CardDeclined"}}
        ]}]
    }]});
    let http = reqwest::Client::new();
    let r = http.post(format!("{otlp}/v1/traces")).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let logs = serde_json::json!({"resourceLogs": [{"scopeLogs": [{"logRecords": [
        {"timeUnixNano": (now_ns + 7_000_000).to_string(), "severityText": "ERROR",
         "body": {"stringValue": "charging order 41 failed"}, "traceId": trace}
    ]}]}]});
    let r = http.post(format!("{otlp}/v1/logs")).json(&logs).send().await.unwrap();
    assert_eq!(r.status(), 200);

    let b = Browser::start(1400, 1000).await;
    b.open(&format!("{api}/journeys/{trace}")).await;
    b.check_page("journey").await;
    let main = b.text("main").await;
    assert!(main.contains("failed while processing: CardDeclined"), "{main}");
    assert!(main.contains("charging order 41 failed"), "{main}");
    assert!(main.contains("orders[2] @41 · billing"), "{main}");
    assert!(
        main.contains("<img src=x onerror=alert(1)>"),
        "the name is text: {main}"
    );
    assert_eq!(b.eval("return document.querySelectorAll('main img').length").await, 0);
}

/// A sharded log whose node was killed: until the survivor takes its shards
/// over, the overview says it is partial and names the shards; then it is
/// whole again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_node_says_which_shards_it_cannot_answer_for() {
    use streamsight_testkit::{Tansu, free_port};
    if streamsight_testkit::tansu_installed().is_none() {
        panic!("tansu is not installed: scripts/test installs it");
    }
    let dir = std::env::temp_dir().join(format!("streamsight-dashboard-shards-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let broker = Tansu::start_on(free_port(), "sqlite://tansu.db", &dir, &[]);
    let log = format!(
        "kafka://{}/dashboard-log?partitions=4&create=true&mode=sharded",
        broker.bootstrap
    );
    // Each node holds half of the group's lag (2,404 of 4,808): the rule
    // fires only on the sum of both parts.
    let toml = "[serve]\nhistory_interval = \"1s\"\n\n[serve.alerts]\ndefault_rules = false\n\n\
                [[serve.alerts.rules]]\nname = \"billing_behind\"\nsignal = \"group_lag_messages\"\nabove = 3000\n";
    let (_a, intake, api) = support::serve_with("dashboard-shards", toml, &log);
    let (mut b, _, _) = support::serve_with("dashboard-shards", toml, &log);
    let http = reqwest::Client::new();
    let now = streamsight_testkit::now_ms();
    let topics: Vec<String> = (0..8).map(|i| format!("t{i}")).collect();
    let points = topics
        .iter()
        .flat_map(|t| [dsm::produce(t, 0, 1_000), dsm::commit("billing", t, 0, 400)])
        .collect();
    dsm::post(&http, &intake, &dsm::payload("checkout", vec![(now - 30_000, points)])).await;
    // Both nodes hold shards: the one killed has some to lose.
    wait_for(
        &http,
        &format!("{api}/api/v1/nodes"),
        "both nodes holding shards",
        |v| {
            let owners = v["owners"].as_array().cloned().unwrap_or_default();
            let holders: std::collections::BTreeSet<&str> = owners.iter().filter_map(|o| o["node"].as_str()).collect();
            owners.len() == 4 && owners.iter().all(|o| o["node"].is_string()) && holders.len() == 2
        },
    )
    .await;
    wait_for(&http, &format!("{api}/api/v1/lag"), "every row from both", |v| {
        v["shards"]["missing"] == serde_json::json!([]) && v["rows"].as_array().is_some_and(|r| r.len() == 8)
    })
    .await;

    // One node evaluates the rules on every shard's signals: the group's lag
    // is the sum of both nodes' parts, and the alert fires on either node.
    let firing = |v: &serde_json::Value| {
        v["alerts"].as_array().is_some_and(|a| {
            a.iter()
                .any(|x| x["rule"] == "billing_behind" && x["state"] == "firing" && x["value"] == 4808.0)
        })
    };
    wait_for(
        &http,
        &format!("{api}/api/v1/alerts"),
        "the rule firing on the whole group",
        firing,
    )
    .await;
    let browser = Browser::start(1400, 900).await;
    browser.open(&format!("{api}/alerts")).await;
    browser
        .wait_until(
            "the firing alert",
            "return document.body.innerText.includes('billing_behind')",
        )
        .await;
    // A round skipped while the shards were still moving between the nodes
    // is said so until a round evaluates again.
    browser
        .wait_until(
            "the rules evaluated",
            "return document.getElementById('not-evaluated') === null",
        )
        .await;
    browser.check_page("sharded-alerts").await;

    b.0.kill().unwrap();
    b.0.wait().unwrap();
    browser.open(&format!("{api}/")).await;
    browser
        .wait_until(
            "the partial banner",
            "return document.getElementById('partial') !== null",
        )
        .await;
    browser.check_page("sharded-partial").await;
    let banner = browser.text("#partial").await;
    assert!(
        banner.starts_with("Partial:") && banner.contains("of 4 shards"),
        "{banner}"
    );
    // What is known of the group is shown as a lower bound, never as all.
    let lag = browser
        .eval("return document.querySelectorAll('tbody tr')[0].cells[4].innerText")
        .await;
    assert!(lag.as_str().is_some_and(|l| l.starts_with('≥')), "{lag}");
    // The survivor takes the killed node's shards over: the page is whole
    // again, with every partition of the group.
    browser
        .wait_until(
            "the survivor to hold every shard",
            "return document.getElementById('partial') === null && document.body.innerText.includes('billing')",
        )
        .await;
    browser.check_page("sharded-whole").await;
    // What fired while a shard was missing was never resolved for want of it.
    let alerts = get(&http, &format!("{api}/api/v1/alerts")).await;
    assert!(firing(&alerts), "{alerts}");
    let row = browser
        .eval("return [...document.querySelectorAll('tbody tr')[0].cells].map(c => c.innerText)")
        .await;
    assert_eq!((row[4].as_str(), row[6].as_str()), (Some("4,808"), Some("8")), "{row}");
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Kafka 4 estate (testkit's broker on kafka-protocol's encodings: no broker
/// here lists group types or holds a transaction open): the cluster page names
/// each group's type, a `consumer` group is described with its members, and a
/// group waiting at an open transaction reads `blocked` with the transaction
/// named, not stalled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_4_groups_and_an_open_transaction_read_right() {
    use std::collections::BTreeMap;
    use streamsight_testkit::kafka::{WireBroker, WireCluster, WireGroup, WireMember, WirePartition};
    let offsets = |pairs: &[(i32, i64)]| {
        pairs
            .iter()
            .map(|&(p, o)| (("payments".to_owned(), p), o))
            .collect::<BTreeMap<_, _>>()
    };
    let open = WirePartition {
        log_start: 0,
        high_watermark: 140,
        last_stable: 100,
    };
    let closed = WirePartition {
        log_start: 0,
        high_watermark: 80,
        last_stable: 80,
    };
    let broker = WireBroker::start(WireCluster {
        topics: BTreeMap::from([("payments".to_owned(), vec![open, closed])]),
        groups: BTreeMap::from([
            (
                "ledger".to_owned(),
                WireGroup {
                    state: "Stable".into(),
                    group_type: "consumer".into(),
                    offsets: offsets(&[(0, 100), (1, 80)]),
                    epoch: 12,
                    members: vec![WireMember {
                        member_id: "m-1".into(),
                        client_id: "ledger-app".into(),
                        host: "/10.0.0.7".into(),
                        epoch: 12,
                        assignment: vec![("payments".into(), vec![0, 1])],
                    }],
                },
            ),
            (
                "legacy".to_owned(),
                WireGroup {
                    state: "Stable".into(),
                    group_type: "classic".into(),
                    offsets: offsets(&[(1, 70)]),
                    ..WireGroup::default()
                },
            ),
            (
                // A group type newer than this collector: shown as the broker
                // names it, membership unknown, never dropped.
                "next-gen".to_owned(),
                WireGroup {
                    state: "Stable".into(),
                    group_type: "future".into(),
                    offsets: offsets(&[(1, 60)]),
                    ..WireGroup::default()
                },
            ),
            (
                "work-queue".to_owned(),
                WireGroup {
                    state: "Stable".into(),
                    group_type: "share".into(),
                    // Share-partition start offsets; -1: not read yet.
                    offsets: offsets(&[(0, 110), (1, -1)]),
                    ..WireGroup::default()
                },
            ),
        ]),
        ..WireCluster::default()
    })
    .await;
    let toml = format!(
        "[engine]\nopen_transaction_after = \"1s\"\n\n[serve]\nhistory_interval = \"1s\"\n\n\
         [[serve.clusters]]\nname = \"k4\"\nbootstrap = [\"{}\"]\npoll_interval = \"250ms\"\n",
        broker.addr
    );
    let (_serve, _intake, api) = support::serve_with("dashboard-k4", &toml, "memory://");
    let http = reqwest::Client::new();
    let lag = wait_for(
        &http,
        &format!("{api}/api/v1/lag?group=ledger"),
        "ledger blocked",
        |v| {
            v["rows"]
                .as_array()
                .is_some_and(|r| r.iter().any(|r| r["status"] == "blocked"))
        },
    )
    .await;
    let row = lag["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["partition"] == 0)
        .unwrap();
    assert_eq!(row["consumer"]["group_type"], "consumer", "{row:#}");
    assert_eq!(row["consumer"]["client_id"], "ledger-app", "{row:#}");
    let burrow = get(&http, &format!("{api}/v3/kafka/k4/consumer/ledger/status")).await;
    assert_eq!(burrow["status"]["streamsight"]["group_type"], "consumer", "{burrow:#}");
    let metrics = streamsight_testkit::http::get_text(&http, &format!("{api}/metrics")).await;
    for (group, kind) in [
        ("ledger", "consumer"),
        ("legacy", "classic"),
        ("work-queue", "share"),
        ("next-gen", "future"),
    ] {
        let series = format!(
            "streamsight_group_info{{cluster_name=\"k4\",group=\"{group}\",group_type=\"{kind}\",state=\"Stable\"}}"
        );
        assert_eq!(
            streamsight_testkit::http::sample(&metrics, &series),
            Some(1.0),
            "{series}"
        );
    }

    // The unknown type: its lag as any group's, its type raw everywhere, its
    // membership unknown (never "no members").
    let next = get(&http, &format!("{api}/api/v1/groups/k4/next-gen")).await;
    assert_eq!(
        (
            &next["group_type"],
            &next["polled"]["members"],
            &next["partitions"][0]["lag"]["lag_messages"]
        ),
        (
            &serde_json::json!("future"),
            &serde_json::Value::Null,
            &serde_json::json!(20)
        ),
        "{next:#}"
    );
    assert!(
        next["polled"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("of type \"future\", which this collector cannot describe")),
        "{next:#}"
    );
    let burrow = get(&http, &format!("{api}/v3/kafka/k4/consumer/next-gen/status")).await;
    assert_eq!(burrow["status"]["streamsight"]["group_type"], "future", "{burrow:#}");

    // One partition whose catch-up cannot be told (no second commit) makes the
    // group's unknown, never the other partition's 0 s.
    let detail = get(&http, &format!("{api}/api/v1/groups/k4/ledger")).await;
    assert!(
        detail["signals"]["catch_up_seconds"].is_null(),
        "{:#}",
        detail["signals"]
    );
    // Its rebalances, from the polls: none in a group whose members never changed.
    assert_eq!(detail["rebalances"]["last_hour"], 0, "{:#}", detail["rebalances"]);
    assert!(
        detail["rebalances"]["timeline"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    );
    assert_eq!(
        streamsight_testkit::http::sample(
            &metrics,
            "streamsight_group_rebalances_last_hour{cluster_name=\"k4\",group=\"ledger\"}"
        ),
        Some(0.0)
    );

    // The share group: share-group lag from its start offsets, labelled so,
    // in the group API and /metrics; never a consumer lag row.
    let share = get(&http, &format!("{api}/api/v1/groups/k4/work-queue")).await;
    assert_eq!(share["group_type"], "share", "{share:#}");
    assert_eq!(
        share["share_partitions"],
        serde_json::json!([
            {"group": "work-queue", "topic": "payments", "partition": 0, "start_offset": 110, "end_offset": 140, "lag": 30, "upper_bound": true},
            {"group": "work-queue", "topic": "payments", "partition": 1, "start_offset": null, "end_offset": 80, "lag": null, "upper_bound": true},
        ]),
        "{share:#}"
    );
    assert_eq!(share["partitions"], serde_json::json!([]), "no consumer lag: {share:#}");
    assert_eq!(
        streamsight_testkit::http::sample(
            &metrics,
            "streamsight_share_group_lag{cluster_name=\"k4\",group=\"work-queue\",topic=\"payments\",partition=\"0\",upper_bound=\"true\"}"
        ),
        Some(30.0),
        "{metrics}"
    );
    let rows = get(&http, &format!("{api}/api/v1/lag?group=work-queue")).await;
    assert_eq!(rows["rows"], serde_json::json!([]), "{rows:#}");

    let b = Browser::start(1400, 1000).await;
    b.open(&format!("{api}/groups/k4/work-queue")).await;
    b.wait_until(
        "the share group's page",
        "return document.body.innerText.includes('Share-partitions (2)')",
    )
    .await;
    b.check_page("k4-share-group").await;
    let page = b.text("main").await;
    assert!(page.contains("no consumer lag") && page.contains("≤ 30"), "{page}");
    assert!(page.contains("not read yet"), "{page}");

    b.open(&format!("{api}/clusters")).await;
    b.wait_until(
        "the groups table",
        "return document.body.innerText.includes('work-queue')",
    )
    .await;
    b.check_page("k4-cluster-groups").await;
    let rows: Vec<Vec<String>> = serde_json::from_value(
        b.eval(
            "return [...document.querySelectorAll('table')].find(t => t.innerText.includes('work-queue'))
               .querySelectorAll('tbody tr').values().map(r => [...r.cells].map(c => c.innerText)).toArray()",
        )
        .await,
    )
    .unwrap();
    let kinds: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| (r[0].as_str(), r[1].as_str(), r[2].as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("ledger", "consumer", "Stable"),
            ("legacy", "classic", "Stable"),
            ("next-gen", "future", "Stable"),
            ("work-queue", "share", "Stable")
        ],
        "{rows:?}"
    );

    b.open(&format!("{api}/groups/k4/ledger")).await;
    // Lag in messages, lag in time, and (a polled cluster) its members.
    b.wait_for_charts(3).await;
    b.check_page("k4-group-blocked").await;
    let page = b.text("main").await;
    assert!(
        page.contains("Catches up in\tunknown") || page.contains("Catches up in\nunknown"),
        "{page}"
    );
    let why = b.text("#why").await;
    assert!(
        why.contains("blocked by an open transaction") && why.contains("offset 100"),
        "{why}"
    );
    let first: Vec<String> = serde_json::from_value(
        b.eval("return [...document.querySelectorAll('tbody tr')[0].cells].map(c => c.innerText)")
            .await,
    )
    .unwrap();
    assert_eq!(first[2], "BLOCKED", "{first:?}");
    assert!(
        first[8].contains("ledger-app") && first[8].contains("consumer group"),
        "{first:?}"
    );
}

/// The group page's Reset… dialog against Apache Kafka: the dry run is shown before
/// anything changes, the reset is confirmed only after it, and the group's
/// committed offsets move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_is_shown_as_a_dry_run_then_confirmed_from_the_group_page() {
    let broker = streamsight_testkit::ApacheKafka::shared();
    support::fill_topic(&broker.bootstrap, "orders", 2, 20).await;
    support::seed_commits(&broker.bootstrap, "orders", "billing", &[5, 12]);
    let toml = format!(
        "[[serve.clusters]]\nname = \"kafka\"\nbootstrap = [\"{}\"]\npoll_interval = \"500ms\"\n",
        broker.bootstrap
    );
    let (_serve, _intake, api) = support::serve_with("dashboard-reset", &toml, "memory://");
    let http = reqwest::Client::new();
    wait_for(
        &http,
        &format!("{api}/api/v1/lag?group=billing"),
        "billing polled",
        |v| v["rows"].as_array().is_some_and(|r| r.len() == 2),
    )
    .await;

    let b = Browser::start(1400, 1000).await;
    b.open(&format!("{api}/groups/kafka/billing")).await;
    b.wait_until("the reset button", "return !!document.getElementById('reset-open')")
        .await;
    b.eval("document.getElementById('reset-open').click(); return true")
        .await;
    b.wait_until(
        "the reset dialog",
        "return document.getElementById('reset-dialog').open",
    )
    .await;
    assert_eq!(
        b.eval("return document.getElementById('reset-confirm').disabled").await,
        Value::Bool(true),
        "no reset before a dry run"
    );
    b.eval("document.getElementById('reset-dry-run').click(); return true")
        .await;
    b.wait_until(
        "the dry run's plan",
        "return document.getElementById('reset-plan').innerText.includes('23 offsets skipped')",
    )
    .await;
    b.check_page("group-reset-dry-run").await;
    // Nothing changed yet.
    let before = get(&http, &format!("{api}/api/v1/lag?group=billing")).await;
    let committed = |v: &Value| -> Vec<i64> {
        let mut c: Vec<i64> = v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["committed_offset"].as_i64())
            .collect();
        c.sort_unstable();
        c
    };
    assert_eq!(committed(&before), [5, 12], "{before}");
    b.eval("document.getElementById('reset-confirm').click(); return true")
        .await;
    b.wait_until(
        "the reset done",
        "return document.getElementById('reset-message').innerText.includes('recorded as the group')",
    )
    .await;
    b.check_page("group-reset-done").await;
    // A record of the topic, read once, laid out.
    b.open(&format!("{api}/records/kafka/orders/1/3")).await;
    b.wait_until(
        "the record",
        "return document.querySelector('main').innerText.includes('record 3')",
    )
    .await;
    b.check_page("record").await;
    let text = b.text("main").await;
    assert!(
        text.contains("Record orders[1] @ 3") && text.contains("create time"),
        "{text}"
    );
    // Read once, and said so: never "Live".
    b.wait_until(
        "the record page's freshness",
        "return document.getElementById('freshness').innerText.startsWith('Read once')",
    )
    .await;
    wait_for(
        &http,
        &format!("{api}/api/v1/lag?group=billing"),
        "the group at the end",
        |v| {
            v["rows"]
                .as_array()
                .is_some_and(|r| r.len() == 2 && r.iter().all(|r| r["committed_offset"] == 20))
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_selected_on_the_dlq_page_and_redriven_after_a_dry_run() {
    // A node of its own: the dead letters' topics have fixed names.
    let broker = streamsight_testkit::ApacheKafka::start();
    support::dead_letters(&broker.bootstrap, 20, 5).await;
    let b = &broker.bootstrap;
    let toml = format!(
        "[[serve.clusters]]\nname = \"kafka\"\nbootstrap = [{b:?}]\npoll_interval = \"1s\"\n\
         [[serve.dlq]]\nname = \"kafka\"\nbootstrap = {b:?}\ntopics = [\"orders.dlq\"]\nrefresh = \"1s\"\n"
    );
    let (_serve, _intake, api) = support::serve_with("dashboard-redrive", &toml, "memory://");
    let http = reqwest::Client::new();
    wait_for(&http, &format!("{api}/api/v1/dlq"), "the dead letters read", |v| {
        v["clusters"][0]["topics"][0]["recent"]
            .as_array()
            .is_some_and(|r| r.len() == 20)
    })
    .await;

    let browser = Browser::start(1400, 1100).await;
    browser.open(&format!("{api}/dlq")).await;
    browser
        .wait_until(
            "the recent records",
            "return document.querySelectorAll('main input[type=checkbox]').length === 20",
        )
        .await;
    // Three dead letters selected, then the dialog: no redrive before a dry run.
    browser
        .eval(
            "for (const o of [10, 11, 12]) document.querySelector(`input[aria-label='Select the dead letter at offset ${o}']`).click(); \
             document.querySelector('button[data-redrive]').click(); return true",
        )
        .await;
    browser
        .wait_until(
            "the redrive dialog",
            "return document.getElementById('redrive-dialog').open",
        )
        .await;
    assert!(
        browser
            .text("#redrive-scope")
            .await
            .contains("3 selected dead letter(s) of orders.dlq"),
        "{}",
        browser.text("#redrive-scope").await
    );
    assert_eq!(
        browser
            .eval("return document.getElementById('redrive-confirm').disabled")
            .await,
        Value::Bool(true),
        "no redrive before a dry run"
    );
    browser
        .eval("document.getElementById('redrive-dry-run').click(); return true")
        .await;
    browser
        .wait_until(
            "the dry run's plan",
            "return document.getElementById('redrive-plan').innerText.includes('3 to send (3 to orders)')",
        )
        .await;
    browser.check_page("dlq-redrive-dry-run").await;
    browser
        .eval("document.getElementById('redrive-confirm').click(); return true")
        .await;
    browser
        .wait_until(
            "the redrive done",
            "return document.getElementById('redrive-message').innerText.includes('sent 3 of 3') \
             && document.getElementById('redrive-message').innerText.includes('Done')",
        )
        .await;
    browser.check_page("dlq-redrive-done").await;
    browser
        .eval("document.getElementById('redrive-dialog').close(); return true")
        .await;
    // The page says where each went, after its next refresh.
    browser
        .wait_until(
            "the redriven letters marked",
            "return [...document.querySelectorAll('main tr')].filter((r) => r.innerText.includes('to orders[')).length === 3",
        )
        .await;
    browser.check_page("dlq-redriven").await;
    // The journey of one of them: its dead letter, then the redrive.
    browser.open(&format!("{api}/journeys/{}", support::trace_of(10))).await;
    browser
        .wait_until(
            "the redriven journey",
            "return document.querySelector('main').innerText.includes('REDRIVEN')",
        )
        .await;
    browser.check_page("journey-redriven").await;
    let text = browser.text("main").await;
    assert!(
        text.contains("dead-lettered, then redriven to orders[0] @0") && text.contains("second attempt"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_page_shows_its_membership_from_the_polls() {
    // A node of its own: its topic and group have the names the others use.
    let broker = streamsight_testkit::ApacheKafka::start();
    let b = broker.bootstrap.clone();
    support::fill_topic(&b, "orders", 1, 10).await;
    let toml = format!("[[serve.clusters]]\nname = \"kafka\"\nbootstrap = [{b:?}]\npoll_interval = \"500ms\"\n");
    let (_serve, _intake, api) = support::serve_with("dashboard-membership", &toml, "memory://");
    let http = reqwest::Client::new();
    // A real confluent-kafka member joins, reads, and leaves.
    let member = support::Member::join(&b, "orders", "billing", "billing-py-1", 10);
    member.until("read 10");
    let url = format!("{api}/api/v1/groups/kafka/billing");
    wait_for(&http, &url, "the member seen by a poll", |v| {
        v["rebalances"]["timeline"]
            .as_array()
            .is_some_and(|t| t.iter().any(|p| p["members"] == 1))
    })
    .await;
    member.close();
    wait_for(&http, &url, "the member's departure", |v| {
        v["rebalances"]["departures"].as_array().is_some_and(|d| d.len() == 1)
    })
    .await;

    let browser = Browser::start(1400, 1400).await;
    browser.open(&format!("{api}/groups/kafka/billing")).await;
    browser
        .wait_until(
            "the membership section",
            "return (document.getElementById('membership') || {innerText: ''}).innerText.includes('Members that left in the last hour (1)')",
        )
        .await;
    browser
        .eval("document.getElementById('membership').scrollIntoView(); return true")
        .await;
    browser.check_page("group-membership").await;
    let text = browser.text("#membership").await;
    assert!(
        text.contains("Members (each poll)") && text.contains("Rebalances in the last hour"),
        "{text}"
    );
    assert!(
        text.contains("EMPTY"),
        "the group's state after the member left: {text}"
    );
    // The time axis: UTC clock times, the date once above the first, never
    // a locale's "12/7/26 5:05" running into the next label.
    let ticks = browser
        .eval("return timeTicks([1796620000, 1796620060, 1796620120, 1796688000], 60)")
        .await;
    assert_eq!(
        ticks,
        serde_json::json!(["12-07\n05:06", "05:07", "05:08", "12-08\n00:00"]),
        "{ticks}"
    );
    let drawn = browser
        .eval("return live.charts.map((c) => (c.axes[0]._values || []).map(String))")
        .await;
    for chart in drawn.as_array().unwrap() {
        let labels: Vec<&str> = chart.as_array().unwrap().iter().filter_map(|v| v.as_str()).collect();
        assert!(
            labels
                .iter()
                .all(|l| !l.contains('/') && !l.contains("am") && !l.contains("pm")),
            "{labels:?}"
        );
        let distinct: std::collections::BTreeSet<&&str> = labels.iter().collect();
        assert_eq!(distinct.len(), labels.len(), "two ticks read the same: {labels:?}");
    }
    assert!(
        drawn
            .as_array()
            .is_some_and(|c| c.iter().any(|l| l.as_array().is_some_and(|l| !l.is_empty()))),
        "no axis drawn: {drawn}"
    );
}

/// tansu's sqlite engine cannot describe a group: its page says the
/// membership is unknown and why, never "0 members" or a rebalancing band,
/// and the cluster's table says unknown where the count would be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_nobody_could_describe_reads_unknown_never_empty() {
    let dir = std::env::temp_dir().join(format!("streamsight-dashboard-undescribed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let broker = streamsight_testkit::Tansu::start_on(support::free_port(), "sqlite://tansu.db", &dir, &[]);
    let b = broker.bootstrap.clone();
    support::fill_topic(&b, "orders", 1, 10).await;
    let member = support::Member::join(&b, "orders", "stuck", "stuck-py-1", 5);
    member.until("read 5");
    let toml = format!(
        "[[serve.clusters]]\nname = \"tansu\"\nbootstrap = [{b:?}]\ngroups = [\"stuck\"]\npoll_interval = \"500ms\"\n"
    );
    let (_serve, _intake, api) = support::serve_with("dashboard-undescribed", &toml, "memory://");
    let http = reqwest::Client::new();
    let url = format!("{api}/api/v1/groups/tansu/stuck");
    let group = wait_for(&http, &url, "three polls that could not describe it", |v| {
        v["rebalances"]["timeline"]
            .as_array()
            .is_some_and(|t| t.len() >= 3 && t.iter().all(|p| p["members"].is_null()))
    })
    .await;
    assert_eq!(group["rebalances"]["not_stable_ms"], 0, "{group}");

    let browser = Browser::start(1400, 1400).await;
    browser.open(&format!("{api}/groups/tansu/stuck")).await;
    browser
        .wait_until(
            "the membership-unknown banner",
            "return !!document.getElementById('membership-unknown')",
        )
        .await;
    browser
        .eval("document.getElementById('membership').scrollIntoView(); return true")
        .await;
    browser.check_page("group-membership-unknown").await;
    let text = browser.text("#membership").await;
    assert!(
        text.contains("Membership unknown") && text.contains("DescribeGroups") && text.contains("nothing acts on it"),
        "{text}"
    );
    assert!(!text.contains("Latest: 0 members"), "{text}");
    browser.open(&format!("{api}/clusters")).await;
    browser
        .wait_until(
            "the cluster's groups",
            "return document.body.innerText.includes('Groups as the brokers describe them')",
        )
        .await;
    browser.check_page("cluster-membership-unknown").await;
    let row = browser
        .eval("return [...document.querySelectorAll('tr')].map((r) => r.innerText).find((t) => t.startsWith('stuck')) || ''")
        .await;
    let row = row.as_str().unwrap_or_default();
    assert!(row.contains("unknown") && row.contains("DescribeGroups"), "{row}");
    member.close();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A group whose member never committed, on Apache Kafka (which names the
/// member's assignment: a row of unknown lag): the page says why its lag is
/// unknown, stale, never healthy. (Where a broker names no assignment, the
/// page says "Lag unknown: no commit yet" with what the last poll saw.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_that_never_committed_says_why_its_lag_is_unknown() {
    let broker = streamsight_testkit::ApacheKafka::shared();
    let b = broker.bootstrap.clone();
    let (topic, group) = (
        streamsight_testkit::apache_kafka::unique("crashloop"),
        streamsight_testkit::apache_kafka::unique("never"),
    );
    support::fill_topic(&b, &topic, 1, 10).await;
    let member = support::Member::join(&b, &topic, &group, "never-1", 0);
    member.until("read 0");
    let toml = format!("[[serve.clusters]]\nname = \"kafka\"\nbootstrap = [{b:?}]\npoll_interval = \"300ms\"\n");
    let (_serve, _intake, api) = support::serve_with("dashboard-never", &toml, "memory://");
    let http = reqwest::Client::new();
    wait_for(
        &http,
        &format!("{api}/api/v1/groups/kafka/{group}"),
        "the group polled",
        |v| v["polled"]["members"] == 1,
    )
    .await;
    let browser = Browser::start(1400, 900).await;
    browser.open(&format!("{api}/groups/kafka/{group}")).await;
    browser
        .wait_until("the reason", "return !!document.getElementById('why')")
        .await;
    browser.check_page("group-never-committed").await;
    let text = browser.text("#why").await;
    assert!(
        text.contains("no committed offset") || text.contains("Lag unknown: no commit yet"),
        "{text}"
    );
    let status = browser.text("h1").await;
    assert!(!status.contains("OK"), "{status}");
    member.close();
}
