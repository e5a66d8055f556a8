//! Alerts through the real binary: a real Prometheus Alertmanager (Debian's
//! `prometheus-alertmanager`) receives streamsight's alert and lists it in its
//! own API; and a collector killed with SIGKILL while an alert fires comes back
//! with it firing and does not notify it a second time. A real confluent-kafka
//! member exceeding `max.poll.interval.ms` on tansu is a `rebalance_storm` with
//! its cause.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

mod support;

use streamsight_testkit::brokers::TestBroker;

streamsight_testkit::on_every_broker!(a_member_exceeding_max_poll_interval_is_a_rebalance_storm_with_its_cause);

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::dsm;

const ALERTMANAGER: &str = "/usr/bin/prometheus-alertmanager";

/// Sends failed sends of `orders` to the intake, as the SDK reports them.
async fn failing_producer(intake: &str) {
    let mut p = dsm::payload("checkout", vec![]);
    p.failed_sends = vec![dsm::failed_sends(
        "orders",
        0,
        "MsgTimedOut",
        3,
        streamsight_testkit::now_ms(),
    )];
    dsm::post(&reqwest::Client::new(), intake, &p).await;
}

/// Polls `check` for up to a minute.
async fn wait_for<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    streamsight_testkit::eventually(60, what, check).await
}

const RULE: &str = "[[serve.alerts.rules]]\nname = \"producer_failing\"\nsignal = \"producer_failing\"\nabove = 0\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_alertmanager_receives_and_lists_the_alert() {
    assert!(
        std::path::Path::new(ALERTMANAGER).exists(),
        "{ALERTMANAGER} is missing: scripts/test installs Debian's prometheus-alertmanager"
    );
    let dir = std::env::temp_dir().join(format!("streamsight-am-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("am.yml"),
        "route:\n  receiver: 'null'\nreceivers:\n  - name: 'null'\n",
    )
    .unwrap();
    let port = support::free_port();
    let _am = support::Guard(
        Command::new(ALERTMANAGER)
            .arg(format!("--config.file={}", dir.join("am.yml").display()))
            .arg(format!("--storage.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--cluster.listen-address=")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let am = format!("http://127.0.0.1:{port}");
    wait_for("alertmanager to answer", async || {
        reqwest::get(format!("{am}/-/ready"))
            .await
            .ok()
            .filter(|r| r.status().is_success())
    })
    .await;

    let config = format!(
        "[serve]\nhistory_interval = \"200ms\"\n\n[[serve.alerts.notifiers]]\nurl = \"{am}/api/v2/alerts\"\nformat = \"alertmanager\"\n\n{RULE}"
    );
    let (_serve, intake, api) = support::serve_with("alertmanager", &config, "memory://");
    failing_producer(&intake).await;
    let alert = wait_for("the alert in Alertmanager", async || {
        let alerts: serde_json::Value = reqwest::get(format!("{am}/api/v2/alerts"))
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        alerts
            .as_array()?
            .iter()
            .find(|a| a["labels"]["alertname"] == "producer_failing")
            .cloned()
    })
    .await;
    assert_eq!(alert["labels"]["topic"], "orders", "{alert}");
    assert!(
        alert["annotations"]["summary"].as_str().unwrap().contains("orders"),
        "{alert}"
    );
    assert!(alert["generatorURL"].as_str().unwrap().starts_with(&api), "{alert}");
    assert_eq!(alert["status"]["state"], "active", "{alert}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_firing_neither_loses_the_alert_nor_notifies_twice() {
    let (url, got) = support::webhook_receiver();
    let dir = std::env::temp_dir().join(format!("streamsight-kill9-alerts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let storage = format!("sqlite://{}/s.db", dir.display());
    let config =
        format!("[serve]\nhistory_interval = \"200ms\"\n\n[[serve.alerts.notifiers]]\nurl = \"{url}\"\n\n{RULE}");
    let firing = |got: &Mutex<Vec<serde_json::Value>>| {
        got.lock()
            .unwrap()
            .iter()
            .filter(|b| b["alert"]["rule"] == "producer_failing" && b["alert"]["state"] == "firing")
            .count()
    };

    let (serve, intake, _) = support::serve_with("kill9-alerts", &config, &storage);
    failing_producer(&intake).await;
    wait_for("the notification", async || (firing(&got) == 1).then_some(())).await;
    // A few rounds: the record that it was told is stored.
    tokio::time::sleep(Duration::from_secs(1)).await;
    drop(serve); // SIGKILL

    let (_serve, _, api) = support::serve_with("kill9-alerts", &config, &storage);
    let alerts: serde_json::Value = reqwest::get(format!("{api}/api/v1/alerts"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let alert = alerts["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["rule"] == "producer_failing")
        .unwrap_or_else(|| panic!("lost after kill -9: {alerts}"))
        .clone();
    assert_eq!(alert["state"], "firing", "{alert}");
    // Several rounds later: still told once.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(firing(&got), 1, "{:?}", got.lock().unwrap());
    let (ok, out, _) = support::run(&["alerts", "--collector", &api]);
    assert!(
        ok && out.contains("FIRING") && out.contains("producer_failing"),
        "{out}"
    );
}

/// `streamsight alerts` changes rules and silences of a running collector: a
/// rule from a TOML file fires on the seed's failing producer, a silence covers
/// it, and removing the rule resolves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_makes_a_rule_that_fires_silences_it_and_removes_it() {
    let (_serve, intake, api) = support::serve_with(
        "alerts-cli",
        "[serve]\nhistory_interval = \"200ms\"\n\n[serve.alerts]\ndefault_rules = false\n",
        "memory://",
    );
    let rule = std::env::temp_dir().join(format!("streamsight-rule-{}.toml", std::process::id()));
    std::fs::write(
        &rule,
        "signal = \"producer_failing\"\nabove = 0\nfor = \"0s\"\nsummary = \"sends to {topic} fail\"\nlabels = { team = \"payments\" }\n",
    )
    .unwrap();
    let alerts = |args: &[&str]| {
        let mut all = vec!["alerts", "--collector", api.as_str()];
        all.extend_from_slice(args);
        support::run(&all)
    };
    let (ok, out, err) = alerts(&["set-rule", "sends_failing", "--file", rule.to_str().unwrap()]);
    assert!(ok, "{out}{err}");
    let (ok, out, err) = alerts(&["rules"]);
    assert!(ok, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("sends_failing"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.contains("producer_failing") && line.contains("api") && line.contains("above 0"),
        "{line}"
    );

    failing_producer(&intake).await;
    wait_for("the rule's alert firing", async || {
        let (_, out, _) = alerts(&[]);
        out.lines()
            .any(|l| l.starts_with("FIRING") && l.contains("sends to orders fail"))
            .then_some(())
    })
    .await;

    let (ok, out, err) = alerts(&[
        "silence",
        "--match",
        "alertname=sends_*",
        "--match",
        "team=payments",
        "--for",
        "1h",
    ]);
    assert!(ok, "{out}{err}");
    let id = serde_json::from_str::<serde_json::Value>(&out).unwrap()["silence"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, out, _) = alerts(&[]);
    assert!(out.contains("(silenced)"), "{out}");
    let (ok, _, err) = alerts(&["end-silence", &id]);
    assert!(ok, "{err}");
    let (_, out, _) = alerts(&[]);
    assert!(!out.contains("(silenced)"), "{out}");

    let (ok, _, err) = alerts(&["silence", "--match", "no-equals-sign"]);
    assert!(!ok && err.contains("label=glob"), "{err}");
    std::fs::write(&rule, "signal = \"producer_failing\"\nabove = \"high\"\n").unwrap();
    let (ok, _, err) = alerts(&["set-rule", "bad", "--file", rule.to_str().unwrap()]);
    assert!(!ok && err.contains("400"), "refused with the reason: {err}");

    let (ok, _, err) = alerts(&["remove-rule", "sends_failing"]);
    assert!(ok, "{err}");
    wait_for("the alert resolved", async || {
        let (_, out, _) = alerts(&[]);
        out.lines()
            .any(|l| l.starts_with("RESOLVED") && l.contains("sends_failing") && l.contains("the rule was removed"))
            .then_some(())
    })
    .await;
    let _ = std::fs::remove_file(&rule);
}

/// A confluent-kafka member whose handler outlasts `max.poll.interval.ms`,
/// seven times: librdkafka leaves the group each time and joins it again with a
/// new member id. The polls see it empty and fill again (tansu names no client
/// id): six rebalances in the hour, the default `rebalance_storm` rule fires,
/// and the cause says one member is cycling. On Apache Kafka and tansu.
async fn a_member_exceeding_max_poll_interval_is_a_rebalance_storm_with_its_cause(broker: TestBroker) {
    let b = broker.bootstrap.clone();
    support::fill_topic(&b, "orders", 1, 10).await;
    let toml = format!(
        "[serve]\nhistory_interval = \"200ms\"\n\n[[serve.clusters]]\nname = \"polled\"\nbootstrap = [{b:?}]\npoll_interval = \"300ms\"\n"
    );
    let name = format!("alerts-max-poll-{:?}", broker.kind);
    let (_serve, _intake, api) = support::serve_with(&name, &toml, "memory://");
    let started = std::time::Instant::now();
    let member = support::Member::stalling(&b, "orders", "billing", "billing-slow", 7, 2_000);
    let lines = member.until("done");
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("stalled")).count(),
        7,
        "{lines:?}"
    );
    let http = reqwest::Client::new();
    let group = format!("{api}/api/v1/groups/polled/billing");
    let detail = streamsight_testkit::http::wait_for_json(&http, &group, 60, "six rebalances", |v| {
        v["rebalances"]["last_hour"].as_u64().is_some_and(|n| n >= 6)
    })
    .await;
    let sixth = started.elapsed();
    let r = &detail["rebalances"];
    assert_eq!(r["storm"], true, "{r:#}");
    assert!(r["departures"].as_array().is_some_and(|d| d.len() >= 6), "{r:#}");
    let cause = r["cause"].as_str().unwrap_or_default();
    assert!(
        cause.starts_with("one member cycling") && cause.contains("max.poll.interval.ms"),
        "{cause}"
    );
    let alert = wait_for("the rebalance_storm alert", async || {
        let (_, all) = streamsight_testkit::http::get(&http, &format!("{api}/api/v1/alerts")).await;
        all["alerts"]
            .as_array()?
            .iter()
            .find(|a| a["rule"] == "rebalance_storm" && a["state"] == "firing")
            .cloned()
    })
    .await;
    assert_eq!(alert["labels"]["group"], "billing", "{alert:#}");
    // The figure the docs quote: from the storm's start to the alert.
    eprintln!(
        "rebalance storm ({:?}): the polls counted six rebalances {:.1} s after the member started, \
         rebalance_storm fired {:.1} s after it",
        broker.kind,
        sixth.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    drop(member);
}

/// Failed sends of each of `topics`, posted to the intake at `intake`.
async fn failing_topics(client: &reqwest::Client, intake: &str, topics: &[String]) {
    let mut p = dsm::payload("checkout", vec![]);
    p.failed_sends = topics
        .iter()
        .map(|t| dsm::failed_sends(t, 0, "MsgTimedOut", 3, streamsight_testkit::now_ms()))
        .collect();
    dsm::post(client, intake, &p).await;
}

/// A counter of a node's `/metrics` (0 when absent).
async fn counter_of(client: &reqwest::Client, api: &str, name: &str) -> f64 {
    let text = streamsight_testkit::http::get_text(client, &format!("{api}/metrics")).await;
    streamsight_testkit::http::sample(&text, name).unwrap_or(0.0)
}

/// Two collectors share a `kafka://` log (librdkafka's mock cluster), either
/// able to evaluate and notify; one at a time does, by the leases' group.
/// Twice, the node evaluating (`evaluates_here`) is paused (SIGSTOP) for
/// 20 s, past the group's 6 s session, while the failures that fire an alert
/// go on through the other node and a new alert fires there once it takes the
/// rules over. On resuming, a node that still believed it held the rules would
/// judge from what it knew before the pause. Every alert must be told firing
/// once and never resolved, and each resumed node must have let its leases
/// go and been assigned its share again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_paused_past_its_session_neither_notifies_twice_nor_resolves_what_fires() {
    const PAUSE: Duration = Duration::from_secs(20);
    let mock = rdkafka::mocking::MockCluster::new(1).unwrap();
    // The mock makes a topic of 4 partitions when it is first named.
    let storage = format!(
        "kafka://{}/alerts-pause?create=true&timeout_ms=5000",
        mock.bootstrap_servers()
    );
    let (url, got) = support::webhook_receiver();
    let config = format!(
        "[serve]\nhistory_interval = \"200ms\"\n\n[serve.alerts]\ndefault_rules = false\n\n\
         [[serve.alerts.notifiers]]\nurl = \"{url}\"\n\n{RULE}"
    );
    let nodes = [
        support::serve_with("alerts-pause-a", &config, &storage),
        support::serve_with("alerts-pause-b", &config, &storage),
    ];
    // No connection kept between requests: a paused node's kept connections
    // are closed under the client once it resumes.
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    // Failures of every topic in `firing` go on through every node not
    // paused, every 300 ms, for the whole test.
    let firing: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(vec!["orders-1".into()]));
    let paused: Arc<Mutex<Option<usize>>> = Arc::new(Mutex::new(None));
    let feeder = {
        let (firing, paused, client) = (firing.clone(), paused.clone(), client.clone());
        let intakes: Vec<String> = nodes.iter().map(|n| n.1.clone()).collect();
        tokio::spawn(async move {
            loop {
                for (n, intake) in intakes.iter().enumerate() {
                    if *paused.lock().unwrap() == Some(n) {
                        continue;
                    }
                    let topics = firing.lock().unwrap().clone();
                    failing_topics(&client, intake, &topics).await;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        })
    };
    let told = |got: &Mutex<Vec<serde_json::Value>>, topic: &str, state: &str| {
        got.lock()
            .unwrap()
            .iter()
            .filter(|b| b["alert"]["labels"]["topic"] == topic && b["alert"]["state"] == state)
            .count()
    };
    // Until every node's book says `topic`'s alert was told: the record of a
    // notification is stored the round after it was sent.
    let recorded = async |topic: &str| {
        for (_, _, api) in &nodes {
            wait_for(&format!("{api} to record that {topic} was told"), async || {
                let (_, all) = streamsight_testkit::http::get(&client, &format!("{api}/api/v1/alerts")).await;
                all["alerts"]
                    .as_array()?
                    .iter()
                    .any(|a| a["labels"]["topic"] == topic && a["notified"] == "firing")
                    .then_some(())
            })
            .await;
        }
    };
    wait_for("orders-1 told firing", async || {
        (told(&got, "orders-1", "firing") >= 1).then_some(())
    })
    .await;
    recorded("orders-1").await;

    for topic in ["orders-2", "orders-3"] {
        // The node evaluating now is the one paused.
        let victim = wait_for("one node evaluating the rules", async || {
            let mut evaluating = Vec::new();
            for (n, (_, _, api)) in nodes.iter().enumerate() {
                let (_, all) = streamsight_testkit::http::get(&client, &format!("{api}/api/v1/alerts")).await;
                if all["evaluates_here"] == true {
                    evaluating.push(n);
                }
            }
            (evaluating.len() == 1).then(|| evaluating[0])
        })
        .await;
        let (guard, _, api) = &nodes[victim];
        let let_go = counter_of(&client, api, "streamsight_leases_let_go_total").await;
        *paused.lock().unwrap() = Some(victim);
        guard.signal("STOP");
        let stopped = std::time::Instant::now();
        firing.lock().unwrap().push(topic.into());
        // The other node fires the new alert, holding the rules or once the
        // group hands them over.
        wait_for(&format!("{topic} told firing during the pause"), async || {
            (told(&got, topic, "firing") >= 1).then_some(())
        })
        .await;
        tokio::time::sleep(PAUSE.saturating_sub(stopped.elapsed())).await;
        guard.signal("CONT");
        *paused.lock().unwrap() = None;
        wait_for(
            &format!("node {victim} to let its leases go after the pause"),
            async || (counter_of(&client, api, "streamsight_leases_let_go_total").await > let_go).then_some(()),
        )
        .await;
        wait_for(&format!("node {victim} to hold leases again"), async || {
            (counter_of(&client, api, "streamsight_leases_held").await > 0.0).then_some(())
        })
        .await;
        recorded(topic).await;
    }
    // A few more rounds with both nodes back.
    tokio::time::sleep(Duration::from_secs(3)).await;
    feeder.abort();
    let all = got.lock().unwrap().clone();
    for topic in ["orders-1", "orders-2", "orders-3"] {
        assert_eq!(told(&got, topic, "firing"), 1, "{topic} told firing once: {all:#?}");
        assert_eq!(told(&got, topic, "resolved"), 0, "{topic} never resolved: {all:#?}");
    }
}

streamsight_testkit::on_every_broker!(a_churning_group_that_never_committed_is_shown_never_absent);

/// Two confluent-kafka members join group `churn` and leave, three times,
/// and never commit (consumers crash-looping before their first commit);
/// while the third pair is in it, the group is shown with its type, its state
/// and members as the last poll saw them, its rebalances, and lag unknown
/// (rows of unknown lag where the broker names assignments; with none, as on
/// tansu, "no commit yet"): never "no such group", never healthy, and listed
/// in `/api/v1/clusters`. tansu 0.6.0 lists only groups that committed
/// (measured): there the group is named in the configuration (`groups`),
/// as a user of such a broker would; Apache Kafka lists it.
async fn a_churning_group_that_never_committed_is_shown_never_absent(broker: TestBroker) {
    let b = broker.bootstrap.clone();
    let (topic, group) = (format!("churned-{:?}", broker.kind).to_lowercase(), "churn".to_owned());
    support::fill_topic(&b, &topic, 2, 10).await;
    let named = if broker.kind == streamsight_testkit::BrokerKind::Tansu {
        "groups = [\"churn\"]\n"
    } else {
        ""
    };
    let toml = format!(
        "[serve]\nhistory_interval = \"200ms\"\n\n[[serve.clusters]]\nname = \"v\"\nbootstrap = [{b:?}]\npoll_interval = \"300ms\"\n{named}"
    );
    let (_serve, _intake, api) = support::serve_with(&format!("churn-{:?}", broker.kind), &toml, "memory://");
    let http = reqwest::Client::new();
    let mut live = Vec::new();
    for round in 0..3 {
        for member in live.drain(..) {
            support::Member::close(member);
        }
        let a = support::Member::join(&b, &topic, &group, &format!("churn-a-{round}"), 0);
        let c = support::Member::join(&b, &topic, &group, &format!("churn-b-{round}"), 0);
        a.until("read 0");
        c.until("read 0");
        live = vec![a, c];
    }
    let url = format!("{api}/api/v1/groups/v/{group}");
    let detail = streamsight_testkit::http::wait_for_json(&http, &url, 60, "the churned group shown", |v| {
        v["polled"]["members"] == 2 && v["rebalances"]["last_hour"].as_u64().is_some_and(|n| n >= 1)
    })
    .await;
    assert_eq!(detail["status"], "stale", "never healthy: {detail:#}");
    let rows = detail["partitions"].as_array().unwrap();
    assert!(
        rows.iter().all(|p| p["lag"]["lag_messages"].is_null())
            && (!rows.is_empty()
                || detail["lag_unknown_because"]
                    .as_str()
                    .is_some_and(|w| w.starts_with("no commit yet"))),
        "{detail:#}"
    );
    // The type is ListGroups' word: unknown (null) where the broker did not list it.
    let listed_type = if named.is_empty() {
        serde_json::json!("classic")
    } else {
        serde_json::Value::Null
    };
    assert_eq!(detail["group_type"], listed_type, "{detail:#}");
    let (_, clusters) = streamsight_testkit::http::get(&http, &format!("{api}/api/v1/clusters")).await;
    let listed = clusters["clusters"]["v"]["last_poll"]["groups"]
        .as_array()
        .is_some_and(|gs| gs.iter().any(|g| g["group"] == group.as_str()));
    assert!(listed, "{clusters:#}");
    eprintln!(
        "churn on {:?}: {} rebalances, state {}, {} members, {} rows of unknown lag",
        broker.kind,
        detail["rebalances"]["last_hour"],
        detail["polled"]["state"],
        detail["polled"]["members"],
        rows.len()
    );
    for member in live {
        member.close();
    }
}
