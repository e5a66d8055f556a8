//! `streamsight lag`, straight against a cluster and through a collector that
//! polls it (`serve --cluster`), on librdkafka's mock cluster.
#![allow(clippy::unwrap_used)]

mod support;

use rdkafka::mocking::MockCluster;
use std::time::{Duration, Instant};

fn lag(args: &[&str]) -> (bool, String, String) {
    support::run(&[&["lag"], args].concat())
}

#[test]
fn lag_from_the_cluster_and_from_a_collector_polling_it() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("orders", 2, 1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    support::seed_cluster(&bootstrap, "orders", &[5, 5], "billing", &[2, 5]);

    // Directly: the mock cannot list groups, so the group is named.
    let (ok, out, err) = lag(&[
        "--bootstrap-server",
        &bootstrap,
        "--group",
        "billing",
        "--format",
        "json",
    ]);
    assert!(ok, "{err}");
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let lags: Vec<_> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["lag_messages"].as_i64())
        .collect();
    assert_eq!(lags, [Some(3), Some(0)]);
    assert!(
        rows[0]["lag_seconds"].is_null(),
        "one look cannot tell seconds: {rows:#}"
    );
    assert_eq!(rows[1]["lag_seconds"].as_f64(), Some(0.0));
    // One look cannot tell whether a group behind keeps up: not "ok".
    assert_eq!(
        (rows[0]["status"].as_str(), rows[1]["status"].as_str()),
        (Some("stale"), Some("ok")),
        "{rows:#}"
    );

    let (ok, out, err) = lag(&["--bootstrap-server", &bootstrap, "--group", "billing"]);
    assert!(ok && err.contains("one look"), "{err}");
    let mut lines = out.lines();
    assert!(lines.next().unwrap().starts_with("GROUP"));
    let first: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&first[..7], ["billing", "orders", "0", "2", "5", "3", "-"]);

    // A broker nobody answers on: a clear error, not an empty table.
    let (ok, _, err) = lag(&["--bootstrap-server", "127.0.0.1:1", "--group", "billing"]);
    assert!(!ok);
    assert!(err.contains("127.0.0.1:1"), "{err}");

    // Through a collector polling the cluster, configured in TOML (the mock
    // cannot list groups, so the config names the group).
    let toml = format!(
        "[[serve.clusters]]\nname = \"mock\"\nbootstrap = [\"{bootstrap}\"]\ngroups = [\"billing\"]\npoll_interval = \"200ms\"\n"
    );
    let (_guard, api) = support::serve_with_config("lag", &toml);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (ok, out, err) = lag(&["--collector", &api, "--cluster", "mock", "--format", "json"]);
        // Before the first poll lands the collector holds nothing for the
        // cluster and `lag` says so as an error: not yet, not a failure.
        let rows: serde_json::Value = if ok {
            serde_json::from_str(&out).unwrap()
        } else {
            assert!(err.contains("holds no lag"), "{err}");
            serde_json::Value::Array(vec![])
        };
        if rows.as_array().unwrap().len() == 2 && rows[0]["group"] == "billing" {
            assert_eq!(rows[0]["lag_messages"].as_i64(), Some(3));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the collector never showed billing: {rows:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // A group that is not there: said, with what is, and a failure.
    let (ok, _, err) = lag(&["--collector", &api, "--group", "nosuch"]);
    assert!(
        !ok && err.contains("no lag for group \"nosuch\"") && err.contains("it holds groups billing on topics orders"),
        "{err}"
    );
}

/// A cluster the collector polls that does not answer: `lag` says so and
/// fails, rather than "nothing reported yet".
#[test]
fn an_unreachable_cluster_is_said_and_fails() {
    let nobody = support::free_port();
    let toml = format!(
        "[[serve.clusters]]\nname = \"wrong\"\nbootstrap = [\"127.0.0.1:{nobody}\"]\npoll_interval = \"200ms\"\n"
    );
    let (_guard, api) = support::serve_with_config("lag-unreachable", &toml);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (ok, _, err) = lag(&["--collector", &api]);
        if err.contains("did not answer") {
            assert!(!ok && err.contains("wrong") && err.contains("lag is unknown"), "{err}");
            break;
        }
        assert!(Instant::now() < deadline, "never said unreachable: {err}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (ok, _, err) = lag(&["--collector", &api, "--cluster", "elsewhere"]);
    assert!(
        !ok && err.contains("polls no cluster of that name (it polls: wrong)"),
        "{err}"
    );
}
