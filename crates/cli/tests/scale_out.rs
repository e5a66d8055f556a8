//! Three `streamsight serve` processes sharing one log in Kafka (each body on
//! Apache Kafka and on tansu, run as their own processes), replicated (each holds everything) and sharded (each holds the
//! shards Kafka assigned it, and asks the others for the rest): intake spread
//! over them, the seed's incident sent through one node and read back through
//! another, then `kill -9` of one node: nothing it acknowledged is lost, the
//! others answer in full again (sharded: once they have taken its shards over,
//! and until then they name the shards they miss), and a replacement node
//! answers in full.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

mod support;

use serde_json::Value;
use std::time::{Duration, Instant};
use streamsight_testkit::{BrokerKind, RestartableBroker, eventually};
use support::dsm::{self, commit, produce};

const TOPICS: usize = 6;

async fn get(client: &reqwest::Client, api: &str, path: &str) -> (u16, Value) {
    streamsight_testkit::http::get(client, &format!("{api}{path}")).await
}

/// What a node answers of a group's lag.
#[derive(Debug)]
struct Answer {
    /// `(topic, lag_messages)`, sorted.
    rows: Vec<(String, i64)>,
    /// Shards the answer does not cover (a sharded log's); None if it failed.
    missing: Option<Vec<u64>>,
}

impl Answer {
    fn complete(&self) -> bool {
        self.missing.as_ref().is_some_and(Vec::is_empty)
    }
}

async fn lag_of(client: &reqwest::Client, api: &str, group: &str) -> Answer {
    let (status, lag) = get(client, api, &format!("/api/v1/lag?group={group}")).await;
    let missing = match &lag["shards"] {
        _ if status != 200 => None,
        Value::Null => Some(Vec::new()),
        shards => shards["missing"]
            .as_array()
            .map(|m| m.iter().filter_map(Value::as_u64).collect()),
    };
    let mut rows: Vec<(String, i64)> = lag["rows"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| {
                    (
                        r["topic"].as_str().unwrap_or("").to_owned(),
                        r["lag_messages"].as_i64().unwrap_or(-1),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    rows.sort();
    Answer { rows, missing }
}

/// Waits until the node at `api` reports `want`; how long it took.
async fn converges(client: &reqwest::Client, api: &str, group: &str, want: &[(String, i64)]) -> Duration {
    let started = Instant::now();
    let what = format!("{api} to report {want:?}");
    eventually(30, &what, async || {
        let answer = lag_of(client, api, group).await;
        (answer.complete() && answer.rows == want).then_some(())
    })
    .await;
    started.elapsed()
}

/// Round `r` of traffic, each topic's payload through node `(r + topic) % nodes`:
/// topic k produced to `(r + 1) * 100 + r` and committed to `r * 100` by group
/// g: lag `101 + r` once round r is in.
async fn round(client: &reqwest::Client, intakes: &[&str], r: i64, at_ms: i64) {
    for k in 0..TOPICS {
        let topic = format!("t{k}");
        let payload = dsm::payload(
            "svc",
            vec![(
                at_ms,
                vec![produce(&topic, 0, (r + 1) * 100 + r), commit("g", &topic, 0, r * 100)],
            )],
        );
        let node = intakes[(r as usize + k) % intakes.len()];
        dsm::post(client, node, &payload).await;
    }
}

fn every_topic(lag: i64) -> Vec<(String, i64)> {
    (0..TOPICS).map(|k| (format!("t{k}"), lag)).collect()
}

/// Rounds `0..rounds` spread over every node's intake (dated from `now`),
/// until every node reports the lag of the last.
async fn rounds_through_every_node(
    client: &reqwest::Client,
    nodes: &[(support::Guard, String, String)],
    rounds: i64,
    now: i64,
) {
    let intakes: Vec<&str> = nodes.iter().map(|(_, intake, _)| intake.as_str()).collect();
    for r in 0..rounds {
        round(client, &intakes, r, now - (40 - r) * 10_000).await;
    }
    for (_, _, api) in nodes {
        converges(client, api, "g", &every_topic(100 + rounds)).await;
    }
}

/// One test per broker (Apache Kafka, tansu) for each body taking a
/// [`BrokerKind`].
macro_rules! on_both_brokers {
    ($($name:ident => $body:expr),* $(,)?) => {$(
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn apache_kafka() {
                ($body)(BrokerKind::ApacheKafka).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn tansu() {
                ($body)(BrokerKind::Tansu).await;
            }
        }
    )*};
}

on_both_brokers!(
    three_nodes_replicating_one_log_lose_nothing_when_one_is_killed =>
        |kind| three_nodes_lose_nothing_when_one_is_killed(kind, "replicated"),
    three_nodes_sharding_one_log_lose_nothing_when_one_is_killed =>
        |kind| three_nodes_lose_nothing_when_one_is_killed(kind, "sharded"),
    a_sharded_node_paused_past_its_session_never_answers_from_before_the_pause =>
        paused_past_its_session,
    the_alert_rules_lease_moves_to_a_survivor_after_kill_9_of_its_holder =>
        lease_moves_after_kill_9,
    a_node_that_would_disagree_with_the_live_nodes_of_its_log_is_refused =>
        disagreeing_nodes_are_refused,
);

/// Until the survivors answer in full, an answer that says it is complete is
/// right: the shards it cannot answer for are named, never left out silently.
/// How long they took.
async fn complete_again(client: &reqwest::Client, apis: &[&str], want: &[(String, i64)]) -> Duration {
    let started = Instant::now();
    for api in apis {
        eventually(30, "the survivors to answer in full", async || {
            let answer = lag_of(client, api, "g").await;
            if answer.complete() {
                assert_eq!(answer.rows, want, "{api} said it was complete");
                return Some(());
            }
            None
        })
        .await;
    }
    started.elapsed()
}

/// A broker of `kind` in a directory of its own, and the URL of a log of
/// six partitions on it in `mode` (`replicated`, `sharded`), made by the
/// first node (`create=true`). The directory is the broker's (removed with
/// it); the path returned is a scratch directory beside it.
fn log_on(kind: BrokerKind, mode: &str) -> (std::path::PathBuf, RestartableBroker, String) {
    let broker = RestartableBroker::start(kind);
    let dir = std::env::temp_dir().join(streamsight_testkit::apache_kafka::unique("streamsight-scale-out"));
    std::fs::create_dir_all(&dir).unwrap();
    let log = format!(
        "kafka://{}/streamsight-log?partitions=6&create=true&timeout_ms=5000&mode={mode}",
        broker.bootstrap
    );
    (dir, broker, log)
}

async fn three_nodes_lose_nothing_when_one_is_killed(kind: BrokerKind, mode: &str) {
    let (dir, broker, log) = log_on(kind, mode);
    let client = reqwest::Client::new();
    let mut nodes: Vec<_> = (0..3).map(|_| support::serve(&log)).collect();
    let now = streamsight_testkit::now_ms();

    // Intake spread over the three nodes; every node answers for all of it.
    rounds_through_every_node(&client, &nodes, 10, now).await;

    // The seed's incident through node 1: acknowledged offsets, then a failed
    // send's placeholder (-1 on partition 0 and -1). Read through node 2, lag
    // is the consumer's real distance, not 0.
    let incident = dsm::payload(
        "checkout",
        vec![
            (
                now - 30_000,
                vec![produce("orders", 0, 1_000), commit("billing", "orders", 0, 400)],
            ),
            (now - 20_000, vec![produce("orders", 0, -1), produce("orders", -1, -1)]),
        ],
    );
    dsm::post(&client, &nodes[1].1, &incident).await;
    converges(&client, &nodes[2].2, "billing", &[("orders".to_owned(), 601)]).await;

    // kill -9 node 0, then more traffic through the other two.
    let (mut killed, _, _) = nodes.remove(0);
    killed.0.kill().unwrap();
    killed.0.wait().unwrap();
    let apis: Vec<&str> = nodes.iter().map(|(_, _, api)| api.as_str()).collect();
    let took = complete_again(&client, &apis, &every_topic(110)).await;
    eprintln!("scale_out ({kind:?}, {mode}): the survivors answered in full {took:?} after the kill");
    assert!(took < Duration::from_secs(30), "{took:?}");
    let intakes: Vec<&str> = nodes.iter().map(|(_, intake, _)| intake.as_str()).collect();
    for r in 10..20 {
        round(&client, &intakes, r, now - (40 - r) * 10_000).await;
    }
    for (_, _, api) in &nodes {
        converges(&client, api, "g", &every_topic(120)).await;
        converges(&client, api, "billing", &[("orders".to_owned(), 601)]).await;
    }

    // A replacement node replays the whole log: complete within 30 s of its start.
    let started = Instant::now();
    let (_replacement, _, api) = support::serve(&log);
    converges(&client, &api, "g", &every_topic(120)).await;
    converges(&client, &api, "billing", &[("orders".to_owned(), 601)]).await;
    let took = started.elapsed();
    eprintln!("scale_out ({kind:?}, {mode}): a replacement node answered in full {took:?} after it was started");
    assert!(took < Duration::from_secs(30), "{took:?}");
    drop(nodes);
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two nodes sharding one log (tansu); one is paused (SIGSTOP) for 20 s, past
/// the shards group's 6 s session, while traffic goes on through the other.
/// Once it resumes, the paused node still believes it holds its shards until
/// librdkafka hears from the group, and what it built of them is from before
/// the pause: answering from that, or announcing the shards afresh so that
/// the other node asks it, would show lag as it was. From the moment it
/// resumes, every row either node answers must be current (an answer may
/// name shards it cannot answer for, never give old rows for them).
async fn paused_past_its_session(kind: BrokerKind) {
    const PAUSE: Duration = Duration::from_secs(20);
    let (dir, broker, log) = log_on(kind, "sharded");
    let nodes = [support::serve(&log), support::serve(&log)];
    // No connection kept between requests: a paused node's kept connections
    // are closed under the client once it resumes.
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let now = streamsight_testkit::now_ms();
    rounds_through_every_node(&client, &nodes, 3, now).await;
    let (paused, _, paused_api) = &nodes[0];
    let (_, other_intake, other_api) = &nodes[1];
    paused.signal("STOP");
    let stopped = Instant::now();
    for r in 3..6 {
        round(&client, &[other_intake.as_str()], r, now - (40 - r) * 10_000).await;
    }
    tokio::time::sleep(PAUSE.saturating_sub(stopped.elapsed())).await;
    paused.signal("CONT");
    let resumed = Instant::now();
    // From the first request on, for 15 s: no row from before the pause.
    let (mut answers, mut rows) = (0, 0);
    while resumed.elapsed() < Duration::from_secs(15) {
        for api in [paused_api, other_api] {
            let answer = lag_of(&client, api, "g").await;
            answers += 1;
            rows += answer.rows.len();
            for (topic, lag) in &answer.rows {
                assert_eq!(
                    *lag,
                    106,
                    "{api} answered {topic} from before the pause {:?} after resuming: {answer:?}",
                    resumed.elapsed()
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "scale_out ({kind:?}, paused): {answers} answers with {rows} rows in the 15 s after resuming, all current"
    );
    // The paused node knew it was paused (and let its shards go); the other did not.
    let pauses = async |api: &str| {
        let text = streamsight_testkit::http::get_text(&client, &format!("{api}/metrics")).await;
        streamsight_testkit::http::sample(&text, "streamsight_process_pauses_total")
    };
    assert_eq!(pauses(paused_api).await, Some(1.0));
    assert_eq!(pauses(other_api).await, Some(0.0));
    for api in [paused_api, other_api] {
        converges(&client, api, "g", &every_topic(106)).await;
    }
    drop(nodes);
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Which of `apis` evaluates the alert rules now.
async fn evaluators(client: &reqwest::Client, apis: &[&str]) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, api) in apis.iter().enumerate() {
        let (_, v) = get(client, api, "/api/v1/alerts").await;
        if v["evaluates_here"] == true {
            out.push(i);
        }
    }
    out
}

/// Deliveries of `rule`'s notifications in `state` the receiver counted.
fn told(got: &std::sync::Mutex<Vec<Value>>, rule: &str, state: &str) -> usize {
    got.lock()
        .unwrap()
        .iter()
        .filter(|b| b["alert"]["rule"] == rule && b["alert"]["state"] == state)
        .count()
}

/// Whether every node of `apis` says the rules are evaluated (the holder by
/// its rounds, the others by its word in the log), on the API and in
/// `streamsight_alerts_evaluated`.
async fn all_say_evaluated(client: &reqwest::Client, apis: &[&str]) -> bool {
    for api in apis {
        let (_, v) = get(client, api, "/api/v1/alerts").await;
        let text = streamsight_testkit::http::get_text(client, &format!("{api}/metrics")).await;
        if v["evaluated"] != true
            || streamsight_testkit::http::sample(&text, "streamsight_alerts_evaluated") != Some(1.0)
        {
            return false;
        }
    }
    true
}

/// Three nodes sharding one log on tansu, a webhook receiver, and a rule
/// made through the API that fires on failed sends: `kill -9` of the node
/// that evaluates the alert rules hands its lease to a survivor within the
/// leases group's session (and some), measured; the alert is told firing
/// once across the move, resolved once when the rule is removed, and still
/// once each after a node is started again.
async fn lease_moves_after_kill_9(kind: BrokerKind) {
    const RULE: &str = "sends_failing";
    let (dir, broker, log) = log_on(kind, "sharded");
    let (hook, got) = support::webhook_receiver();
    let config = format!(
        "[serve]\nhistory_interval = \"200ms\"\n\n[serve.alerts]\ndefault_rules = false\n\n\
         [[serve.alerts.notifiers]]\nurl = \"{hook}\"\n"
    );
    let client = reqwest::Client::new();
    let mut nodes: Vec<_> = (0..3)
        .map(|n| support::serve_with(&format!("lease-move-{n}"), &config, &log))
        .collect();
    let apis: Vec<String> = nodes.iter().map(|(_, _, api)| api.clone()).collect();
    let refs: Vec<&str> = apis.iter().map(String::as_str).collect();
    let holder = eventually(60, "one node evaluating the rules", async || {
        let e = evaluators(&client, &refs).await;
        (e.len() == 1).then(|| e[0])
    })
    .await;
    eventually(30, "every node saying the rules are evaluated", async || {
        all_say_evaluated(&client, &refs).await.then_some(())
    })
    .await;
    let rule = dir.join("rule.toml");
    std::fs::write(&rule, "signal = \"producer_failing\"\nabove = 0\nfor = \"0s\"\n").unwrap();
    let (ok, out, err) = support::run(&[
        "alerts",
        "--collector",
        &apis[holder],
        "set-rule",
        RULE,
        "--file",
        rule.to_str().unwrap(),
    ]);
    assert!(ok, "{out}{err}");
    // Failed sends through every node but the holder, all along.
    let intakes: Vec<String> = nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != holder)
        .map(|(_, (_, intake, _))| intake.clone())
        .collect();
    let feeding = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let feeder = {
        let (client, feeding) = (client.clone(), feeding.clone());
        tokio::spawn(async move {
            while feeding.load(std::sync::atomic::Ordering::Relaxed) {
                for intake in &intakes {
                    let mut p = dsm::payload("checkout", vec![]);
                    p.failed_sends = vec![dsm::failed_sends(
                        "orders",
                        0,
                        "MsgTimedOut",
                        3,
                        streamsight_testkit::now_ms(),
                    )];
                    dsm::post(&client, intake, &p).await;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        })
    };
    eventually(60, "the alert told firing", async || {
        (told(&got, RULE, "firing") == 1).then_some(())
    })
    .await;

    let (mut killed, _, _) = nodes.remove(holder);
    killed.0.kill().unwrap();
    killed.0.wait().unwrap();
    let killed_at = Instant::now();
    let survivors: Vec<&str> = refs
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != holder)
        .map(|(_, a)| *a)
        .collect();
    eventually(60, "a survivor evaluating the rules", async || {
        let e = evaluators(&client, &survivors).await;
        (e.len() == 1).then(|| e[0])
    })
    .await;
    let took = killed_at.elapsed();
    eprintln!("scale_out ({kind:?}): the alert rules' lease moved {took:?} after kill -9 of its holder");
    assert!(took < Duration::from_secs(30), "{took:?}");
    // Every lease is held by a survivor: the dead node's jobs (pollers, DLQ
    // monitors, probes) moved too, not only the rules.
    eventually(30, "every lease held by the survivors", async || {
        let mut held = 0;
        for api in &survivors {
            let text = streamsight_testkit::http::get_text(&client, &format!("{api}/metrics")).await;
            held += text
                .lines()
                .find_map(|l| l.strip_prefix("streamsight_leases_held "))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0);
        }
        (held == 64).then_some(())
    })
    .await;
    eventually(30, "the survivors saying the rules are evaluated", async || {
        all_say_evaluated(&client, &survivors).await.then_some(())
    })
    .await;

    // Resolved by removing the rule, through a survivor; then a node started
    // again replays the log, and nothing is told a second time.
    feeding.store(false, std::sync::atomic::Ordering::Relaxed);
    let _ = feeder.await;
    let (ok, out, err) = support::run(&["alerts", "--collector", survivors[0], "remove-rule", RULE]);
    assert!(ok, "{out}{err}");
    eventually(60, "the alert told resolved", async || {
        (told(&got, RULE, "resolved") == 1).then_some(())
    })
    .await;
    let restarted = support::serve_with("lease-move-again", &config, &log);
    eventually(60, "the restarted node saying the rules are evaluated", async || {
        all_say_evaluated(&client, &[restarted.2.as_str()]).await.then_some(())
    })
    .await;
    // Rounds of every node (five a second each) with the restarted one in.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let all = got.lock().unwrap().clone();
    assert_eq!(told(&got, RULE, "firing"), 1, "{all:#?}");
    assert_eq!(told(&got, RULE, "resolved"), 1, "{all:#?}");
    eprintln!(
        "scale_out ({kind:?}): {} notifications across a kill -9 of the rules' holder and a node started again: firing 1, resolved 1",
        all.len()
    );
    // A second kill -9, of the new holder, leaving one node: tansu 0.6.0's
    // group then revokes the last node's leases and never assigns them again
    // (measured: 3 of 4 runs, rejoining after 15 s with nothing held did not
    // help), so it is not asserted here; docs/scale-out.md says so.
    drop(restarted);
    drop(nodes);
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `streamsight serve` on `log` (free loopback ports, `extra` arguments)
/// until it exits or writes a line to stderr that holds `until` (then it is
/// killed): its exit status if it exited, and what it wrote to stderr.
fn serve_until(log: &str, extra: &[&str], until: &str) -> (Option<std::process::ExitStatus>, String) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_streamsight"))
        .args(["serve", "--intake-listen", "127.0.0.1:0", "--api-listen", "127.0.0.1:0"])
        .args(["--otlp-listen", "127.0.0.1:0", "--storage", log])
        .args(extra)
        .env("STREAMSIGHT_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut said = String::new();
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => {
                said.push_str(&line);
                said.push('\n');
                if line.contains(until) {
                    let _ = child.kill();
                    let _ = child.wait();
                    return (None, said);
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return (Some(child.wait().unwrap()), said),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                panic!("serve neither exited nor said {until:?} within 60 s: {said}");
            }
        }
    }
}

/// A node that would disagree with the live nodes of its log is refused, by
/// name and cause: one advertising another live node's API address, one of
/// the other mode, one naming a log topic that does not exist. One node
/// more than the log has partitions is warned of. A node killed and
/// started again at once with its address is not refused.
async fn disagreeing_nodes_are_refused(kind: BrokerKind) {
    let (dir, broker, log) = log_on(kind, "sharded");
    let (live, _, api) = support::serve(&log);

    let (exit, said) = serve_until(&log, &["--advertise-api", &api], "streamsight serving");
    assert!(exit.is_some_and(|e| !e.success()), "{said}");
    assert!(
        said.contains("not joining the nodes of log streamsight-log")
            && said.contains(&format!("advertises the same API address, {api}")),
        "{said}"
    );

    let replicated = log.replace("mode=sharded", "mode=replicated");
    let (exit, said) = serve_until(&replicated, &[], "streamsight serving");
    assert!(exit.is_some_and(|e| !e.success()), "{said}");
    assert!(
        said.contains("runs mode=sharded on it, and this node's URL says mode=replicated"),
        "{said}"
    );

    let misspelt = log
        .replace("streamsight-log?", "streamsight-logs?")
        .replace("create=true&", "");
    let (exit, said) = serve_until(&misspelt, &[], "streamsight serving");
    assert!(exit.is_some_and(|e| !e.success()), "{said}");
    assert!(
        said.contains("the log topic \"streamsight-logs\" does not exist") && said.contains("create=true"),
        "{said}"
    );

    // kill -9 and at once a node with the same address: the old
    // announcement is fresh, but never renewed, so the new node joins.
    let port = api.rsplit(':').next().unwrap().to_owned();
    drop(live);
    let (restarted, _) = support::start(
        std::process::Command::new(env!("CARGO_BIN_EXE_streamsight")).args([
            "serve",
            "--intake-listen",
            "127.0.0.1:0",
            "--api-listen",
            &format!("127.0.0.1:{port}"),
            "--otlp-listen",
            "127.0.0.1:0",
            "--storage",
            &log,
        ]),
        "streamsight serving",
    );
    drop(restarted);

    // A log of one partition and two nodes: the second is told it holds none.
    let one = log.replace("streamsight-log?partitions=6", "one-partition-log?partitions=1");
    let (_first, _, _) = support::serve(&one);
    let (exit, said) = serve_until(&one, &[], "fewer partitions than the nodes");
    assert!(exit.is_none(), "{said}");
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}
