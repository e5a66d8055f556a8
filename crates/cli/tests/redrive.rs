//! Dead-letter redrive (`streamsight dlq redrive`, `POST /api/v1/dlq/…/redrive`)
//! against tansu: the dry run lists what would go where; executing sends each
//! selected dead letter back with its key, value and headers, its provenance
//! replaced by a `streamsight-redrive` header; and never twice — not after the
//! collector aborts between the broker's acknowledgement and its log's record
//! (a failpoint), not after the CLI and then the collector are killed -9
//! midway. A journey shows the redriven message's second attempt.
#![allow(clippy::unwrap_used)]

mod support;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use streamsight_testkit::http::{get_json, keyed_client};
use streamsight_testkit::{Tansu, Watchdog, eventually, free_port};
use streamsight_wire::dlq::{REDRIVE_HEADER, is_provenance, parse_redrive_header};

/// Dead letters in `orders.dlq`: the first 50 failed validation, the rest processing.
const LETTERS: i64 = 200;
const INVALID: i64 = 50;

use support::{dead_letters, trace_of};

/// `streamsight serve` on `storage` with `toml`, and `env`: (guard, API URL, OTLP URL).
fn serve(dir: &Path, toml: &str, storage: &str, env: &[(&str, &str)]) -> (support::Guard, String, String) {
    let config = dir.join("serve.toml");
    std::fs::write(&config, toml).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_streamsight"));
    cmd.args(["serve", "--intake-listen", "127.0.0.1:0", "--api-listen", "127.0.0.1:0"])
        .args(["--otlp-listen", "127.0.0.1:0", "--storage", storage, "--config"])
        .arg(&config)
        .env(
            "STREAMSIGHT_LOG",
            std::env::var("STREAMSIGHT_TEST_LOG").unwrap_or("warn".into()),
        );
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (guard, line) = support::start(&mut cmd, "streamsight serving");
    (guard, support::field(&line, "api"), support::field(&line, "otlp"))
}

fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// Every record of `topic` (all partitions) that carries a redrive header:
/// (DLQ offset) -> (partition, offset, key, value, header names).
type Copies = BTreeMap<i64, Vec<(i32, i64, String, String, Vec<String>)>>;

fn redriven(bootstrap: &str, topics: &[(&str, i32)]) -> Copies {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "redrive-test-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    let mut open = 0;
    for (t, n) in topics {
        for p in 0..*n {
            let (_, high) = consumer.fetch_watermarks(t, p, Duration::from_secs(10)).unwrap();
            if high > 0 {
                tpl.add_partition_offset(t, p, Offset::Beginning).unwrap();
                open += 1;
            }
        }
    }
    let mut out = Copies::new();
    if open == 0 {
        return out;
    }
    consumer.assign(&tpl).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while open > 0 {
        assert!(Instant::now() < deadline, "the destinations were not read to their end");
        match consumer.poll(Duration::from_millis(200)) {
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => open -= 1,
            Some(Ok(m)) => {
                let headers = m.headers().unwrap();
                let stamp = headers
                    .iter()
                    .find(|h| h.key == REDRIVE_HEADER)
                    .unwrap_or_else(|| panic!("{}[{}]@{} has no redrive header", m.topic(), m.partition(), m.offset()));
                let (_, dlq, _, offset) = parse_redrive_header(stamp.value.unwrap()).unwrap();
                assert_eq!(dlq, "orders.dlq");
                let names = headers.iter().map(|h| h.key.to_owned()).collect();
                out.entry(offset).or_default().push((
                    m.partition(),
                    m.offset(),
                    String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned(),
                    String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned(),
                    names,
                ));
            }
            _ => {}
        }
    }
    out
}

/// `streamsight dlq redrive ARGS` started with `key`, and the id of the run
/// it started (its first `redrive RUN …` line).
fn start_redrive<S: AsRef<std::ffi::OsStr>>(args: &[S], key: &str) -> (std::process::Child, String) {
    let mut cli = Command::new(env!("CARGO_BIN_EXE_streamsight"))
        .args(args)
        .env("STREAMSIGHT_API_KEY", key)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(cli.stdout.take().unwrap()).lines();
    let run = loop {
        let line = lines.next().expect("the CLI ended before its run started").unwrap();
        if let Some(rest) = line.strip_prefix("redrive ") {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
    };
    // The rest of its output is drained, so that it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (cli, run)
}

/// Polls a run's status until `done` holds, with a deadline.
async fn until_run(api: &str, key: &str, run: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let client = keyed_client(key);
    eventually(120, what, async || {
        let (status, body) = streamsight_testkit::http::get(&client, &format!("{api}/api/v1/redrives/{run}")).await;
        (status == 200 && done(&body)).then_some(body)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_redriven_once_through_an_abort_and_kill_9_and_their_second_attempt_is_shown() {
    let _watchdog = Watchdog::arm("the redrive test against tansu", Duration::from_secs(600));
    let dir = std::env::temp_dir().join(format!("streamsight-redrive-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // tansu's sqlite engine: its high watermarks are exact (memory:// answers
    // the last batch's base + 1), and a redrive reads to them.
    let broker = Tansu::start_on(free_port(), "sqlite://tansu.db", &dir, &[]);
    let b = broker.bootstrap.clone();
    dead_letters(&b, LETTERS, INVALID).await;

    let keys = dir.join("keys.json");
    let keys_file = keys.to_str().unwrap();
    let create = |scope: &str| support::create_key(keys_file, scope);
    let (read, admin) = (create("read"), create("admin"));
    let toml = format!(
        "[serve]\nkeys_file = {keys_file:?}\n[[serve.clusters]]\nname = \"tansu\"\nbootstrap = [{b:?}]\npoll_interval = \"1s\"\n\
         [[serve.dlq]]\nname = \"tansu\"\nbootstrap = {b:?}\ntopics = [\"orders.dlq\"]\nrefresh = \"1s\"\n"
    );
    let storage = format!("sqlite://{}", dir.join("collector.db").display());
    let redrive = |api: &str, key: &str, args: &[&str]| {
        let mut all = vec![
            "dlq",
            "redrive",
            "--collector",
            api,
            "--cluster",
            "tansu",
            "--dlq",
            "orders.dlq",
        ];
        all.extend_from_slice(args);
        support::run_keyed(&all, key)
    };

    // 1. The dry run: what would go where, nothing sent.
    let (serve1, api, _) = serve(
        &dir,
        &toml,
        &storage,
        &[("STREAMSIGHT_FAILPOINT", "redrive-after-delivery:2")],
    );
    let (ok, out, err) = redrive(&api, &read, &["--reason", "ValueError", "--format", "json"]);
    assert!(ok, "{err}");
    let plan = &json(&out)["plan"];
    assert_eq!(
        (plan["scanned"].as_i64(), plan["selected"].as_i64()),
        (Some(LETTERS), Some(LETTERS - INVALID))
    );
    assert_eq!(plan["to_send"], LETTERS - INVALID);
    assert_eq!(plan["by_topic"]["orders"], LETTERS - INVALID);
    let first = &plan["letters"][0];
    assert_eq!(
        (first["offset"].as_i64(), first["to_partition"].as_i64()),
        (Some(INVALID), Some(0))
    );
    assert_eq!(
        (first["status"].as_str(), first["error_class"].as_str()),
        (Some("send"), Some("ValueError"))
    );
    let (ok, table, err) = redrive(&api, &read, &["--reason", "ValueError"]);
    assert!(ok, "{err}");
    assert!(
        table.contains("150 to send (150 to orders)") && table.contains("dry run: nothing sent"),
        "{table}"
    );
    assert!(
        redriven(&b, &[("orders", 2), ("orders-retry", 1)]).is_empty(),
        "a dry run sent something"
    );
    // Executing needs an admin key; the collector's own log and unknown
    // clusters are refused, each saying why.
    let (ok, _, err) = redrive(&api, &read, &["--reason", "ValueError", "--execute"]);
    assert!(!ok && err.contains("403") && err.contains("admin"), "{err}");
    let (ok, _, err) = support::run_keyed(
        &[
            "dlq",
            "redrive",
            "--collector",
            &api,
            "--cluster",
            "nope",
            "--dlq",
            "orders.dlq",
        ],
        &read,
    );
    assert!(
        !ok && err.contains("404") && err.contains("not a cluster this collector polls"),
        "{err}"
    );
    // A dry run reads the whole topic: of a topic that is no DLQ this
    // collector watches, an admin key's question, not a read key's.
    let (ok, _, err) = support::run_keyed(
        &[
            "dlq",
            "redrive",
            "--collector",
            &api,
            "--cluster",
            "tansu",
            "--dlq",
            "orders",
        ],
        &read,
    );
    assert!(
        !ok && err.contains("403") && err.contains("not a DLQ this collector watches") && err.contains("admin"),
        "{err}"
    );
    let (_, _, err) = support::run_keyed(
        &[
            "dlq",
            "redrive",
            "--collector",
            &api,
            "--cluster",
            "tansu",
            "--dlq",
            "orders",
            "--format",
            "json",
        ],
        &admin,
    );
    assert!(!err.contains("403"), "an admin key may: {err}");
    // A selection that names what is not there says what is, and fails.
    let (ok, _, err) = redrive(&api, &read, &["--reason", "valueerror"]);
    assert!(
        !ok && err.contains("404")
            && err.contains("matches --reason valueerror")
            && err.contains("ValueError ×150")
            && err.contains("case included"),
        "{err}"
    );
    let (ok, _, err) = redrive(&api, &read, &["--letter", "0:600"]);
    assert!(
        !ok && err.contains("matches --letter 0:600") && err.contains("it holds 0:0-"),
        "{err}"
    );

    // 2. The collector aborts once the second batch is acknowledged and
    //    before its log says so: 100 recorded sent, 50 sent but in flight.
    let (ok, _, err) = redrive(&api, &admin, &["--reason", "ValueError", "--rate", "100", "--execute"]);
    assert!(!ok, "the CLI saw its collector go: {err}");
    let mut serve1 = serve1;
    let deadline = Instant::now() + Duration::from_secs(60);
    while serve1.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the failpoint did not abort the collector");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(serve1);
    assert_eq!(
        redriven(&b, &[("orders", 2)]).len() as i64,
        LETTERS - INVALID,
        "all 150 reached orders before the abort"
    );

    // 3. Restarted: the dry run knows 100 sent and 50 in flight; a run
    //    settles those from the destination and sends nothing again.
    let (serve2, api, otlp) = serve(&dir, &toml, &storage, &[]);
    let (ok, out, err) = redrive(&api, &read, &["--reason", "ValueError", "--format", "json"]);
    assert!(ok, "{err}");
    let plan = &json(&out)["plan"];
    assert_eq!(
        (
            plan["already_sent"].as_i64(),
            plan["in_flight"].as_i64(),
            plan["to_send"].as_i64()
        ),
        (Some(100), Some(50), Some(0)),
        "{plan}"
    );
    let (ok, out, err) = redrive(&api, &admin, &["--reason", "ValueError", "--execute"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("settled from an earlier run: 50 sent, 0 released") && out.contains("done"),
        "{out}"
    );
    let (ok, out, err) = redrive(&api, &read, &["--reason", "ValueError", "--format", "json"]);
    assert!(ok, "{err}");
    assert_eq!(json(&out)["plan"]["already_sent"], LETTERS - INVALID);

    // 4. Another selection to another topic, slowly: the CLI is killed -9
    //    (the run goes on in the collector), then the collector is.
    let (mut cli, run) = start_redrive(
        &[
            "dlq",
            "redrive",
            "--collector",
            &api,
            "--cluster",
            "tansu",
            "--dlq",
            "orders.dlq",
            "--reason",
            "deserialization",
            "--to-topic",
            "orders-retry",
            "--rate",
            "10",
            "--execute",
        ],
        &admin,
    );
    until_run(&api, &read, &run, "ten sent", |s| {
        s["live"]["sent"].as_u64() >= Some(10)
    })
    .await;
    cli.kill().unwrap();
    cli.wait().unwrap();
    until_run(&api, &read, &run, "the run going on without its CLI", |s| {
        s["live"]["sent"].as_u64() >= Some(20)
    })
    .await;
    let mut serve2 = serve2;
    serve2.0.kill().unwrap();
    serve2.0.wait().unwrap();
    drop(serve2);
    let (serve3, api, otlp3) = serve(&dir, &toml, &storage, &[]);
    let _ = otlp;
    let status = until_run(&api, &read, &run, "the killed run, from the log", |_| true).await;
    assert_eq!(status["interrupted"], true, "{status}");
    let (ok, out, err) = redrive(
        &api,
        &admin,
        &[
            "--reason",
            "deserialization",
            "--to-topic",
            "orders-retry",
            "--rate",
            "1000",
            "--execute",
        ],
    );
    assert!(ok, "{err}");
    assert!(out.contains("done"), "{out}");

    // 5. Every dead letter arrived exactly once, as it was, its provenance
    //    replaced by the redrive header.
    let copies = redriven(&b, &[("orders", 2), ("orders-retry", 1)]);
    assert_eq!(copies.len() as i64, LETTERS, "every dead letter was redriven");
    for (offset, sent) in &copies {
        assert_eq!(
            sent.len(),
            1,
            "dead letter {offset} was sent {} times: {sent:?}",
            sent.len()
        );
        let (partition, _, key, value, names) = &sent[0];
        assert_eq!(
            (key.as_str(), value.as_str()),
            (
                format!("order-{offset}").as_str(),
                format!("{{\"order\":{offset}}}").as_str()
            )
        );
        assert!(
            names.iter().all(|n| !is_provenance(n)),
            "provenance left on {offset}: {names:?}"
        );
        assert!(
            names.iter().any(|n| n == "traceparent") && names.iter().any(|n| n == "app-header"),
            "{names:?}"
        );
        if *offset >= INVALID {
            assert_eq!(i64::from(*partition), offset % 2, "back to its source partition");
        }
    }
    let (ok, out, err) = redrive(&api, &read, &["--format", "json"]);
    assert!(ok, "{err}");
    assert_eq!(
        (
            json(&out)["plan"]["already_sent"].as_i64(),
            json(&out)["plan"]["to_send"].as_i64()
        ),
        (Some(LETTERS), Some(0))
    );

    // 6. The journey of the last dead letter shows it redriven, then its
    //    second attempt processed.
    let last = LETTERS - 1;
    let (p, o) = (copies[&last][0].0, copies[&last][0].1);
    let client = keyed_client(&read);
    let url = format!("{api}/api/v1/journeys/{}", trace_of(last));
    let verdict = |j: &Value| {
        j["verdicts"]
            .as_array()
            .and_then(|v| v.iter().find(|v| v["group"] == "billing"))
            .and_then(|v| v["verdict"].as_str())
            .map(str::to_owned)
    };
    let journey = eventually(60, "the redriven letter's journey", async || {
        let (status, j) = streamsight_testkit::http::get(&client, &url).await;
        (status == 200 && verdict(&j).as_deref() == Some("redriven")).then_some(j)
    })
    .await;
    let step = journey["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "redriven")
        .unwrap_or_else(|| panic!("no redrive step: {journey:#}"));
    assert_eq!(
        (step["to"]["topic"].as_str(), step["to"]["offset"].as_i64()),
        (Some("orders"), Some(o))
    );
    let now = streamsight_testkit::now_ns();
    let span = serde_json::json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "billing"}}]},
        "scopeSpans": [{"spans": [{
            "traceId": trace_of(last), "spanId": "00000000000000aa", "name": "orders process", "kind": 5,
            "startTimeUnixNano": now.to_string(), "endTimeUnixNano": (now + 1_000_000).to_string(),
            "attributes": [
                {"key": "messaging.system", "value": {"stringValue": "kafka"}},
                {"key": "messaging.destination.name", "value": {"stringValue": "orders"}},
                {"key": "messaging.destination.partition.id", "value": {"stringValue": p.to_string()}},
                {"key": "messaging.kafka.offset", "value": {"intValue": o.to_string()}},
                {"key": "messaging.consumer.group.name", "value": {"stringValue": "billing"}},
                {"key": "messaging.operation.type", "value": {"stringValue": "process"}},
            ],
        }]}],
    }]});
    // Sent as the consumer's OTel SDK would (an admin key may send too).
    let posted = keyed_client(&admin)
        .post(format!("{otlp3}/v1/traces"))
        .json(&span)
        .send()
        .await
        .unwrap();
    assert!(posted.status().is_success(), "{}", posted.text().await.unwrap());
    eventually(60, "the second attempt processed", async || {
        let (_, j) = streamsight_testkit::http::get(&client, &url).await;
        (verdict(&j).as_deref() == Some("processed_on_redrive")).then_some(())
    })
    .await;
    let runs = get_json(&client, &format!("{api}/api/v1/redrives")).await;
    assert!(runs["redrives"].as_array().unwrap().len() >= 3, "{runs}");
    drop(serve3);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A redrive through the collector with the broker killed (`kill -9`) in the
/// middle and started again on its data, on Apache Kafka and on tansu: the
/// run may stop or go on, and a second run finishes what is left; every dead
/// letter is then in its source topic exactly once (the acknowledged-write
/// check: none lost, none doubled), whatever the broker acknowledged or not
/// when it died.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redrive_across_a_kill_9_of_apache_kafka_sends_each_letter_once() {
    redrive_across_a_broker_kill(streamsight_testkit::BrokerKind::ApacheKafka).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redrive_across_a_kill_9_of_tansu_sends_each_letter_once() {
    redrive_across_a_broker_kill(streamsight_testkit::BrokerKind::Tansu).await;
}

async fn redrive_across_a_broker_kill(kind: streamsight_testkit::BrokerKind) {
    const SENT: i64 = 120;
    let _watchdog = Watchdog::arm("the redrive across a broker kill", Duration::from_secs(600));
    let mut broker = streamsight_testkit::RestartableBroker::start(kind);
    let b = broker.bootstrap.clone();
    dead_letters(&b, SENT, 0).await;
    let dir = std::env::temp_dir().join(streamsight_testkit::apache_kafka::unique("streamsight-redrive-kill"));
    std::fs::create_dir_all(&dir).unwrap();
    let keys = dir.join("keys.json");
    let keys_file = keys.to_str().unwrap();
    let (read, admin) = (
        support::create_key(keys_file, "read"),
        support::create_key(keys_file, "admin"),
    );
    let toml = format!(
        "[serve]\nkeys_file = {keys_file:?}\n[[serve.clusters]]\nname = \"k\"\nbootstrap = [{b:?}]\npoll_interval = \"1s\"\n\
         [[serve.dlq]]\nname = \"k\"\nbootstrap = {b:?}\ntopics = [\"orders.dlq\"]\nrefresh = \"1s\"\n"
    );
    let storage = format!("sqlite://{}", dir.join("collector.db").display());
    let (_serve, api, _) = serve(&dir, &toml, &storage, &[]);
    let args = |rate: &'static str| {
        vec![
            "dlq".to_owned(),
            "redrive".into(),
            "--collector".into(),
            api.clone(),
            "--cluster".into(),
            "k".into(),
            "--dlq".into(),
            "orders.dlq".into(),
            "--rate".into(),
            rate.into(),
            "--execute".into(),
        ]
    };
    let (mut cli, run) = start_redrive(&args("20"), &admin);
    until_run(&api, &read, &run, "twenty sent", |s| {
        s["live"]["sent"].as_u64() >= Some(20)
    })
    .await;
    broker.kill();
    // Down for a while, as an outage is: the run's sends fail or wait.
    std::thread::sleep(Duration::from_secs(5));
    broker.restart();
    let deadline = Instant::now() + Duration::from_secs(300);
    let first = loop {
        if let Some(status) = cli.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the first run never ended");
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!("redrive across a kill of {kind:?}: the first run ended {first}");
    // Runs until nothing is left to send (the first may have finished it).
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let args = args("1000");
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, out, err) = support::run_keyed(&args, &admin);
        if ok && out.contains("done") {
            let (_, plan, _) = support::run_keyed(
                &args[..10]
                    .iter()
                    .chain(["--format", "json"].iter())
                    .copied()
                    .collect::<Vec<_>>(),
                &read,
            );
            if json(&plan)["plan"]["to_send"] == 0 {
                break;
            }
        }
        assert!(Instant::now() < deadline, "never finished: {out}{err}");
        std::thread::sleep(Duration::from_secs(1));
    }
    let copies = redriven(&b, &[("orders", 2)]);
    let doubled: Vec<_> = copies.iter().filter(|(_, c)| c.len() > 1).map(|(o, _)| *o).collect();
    let lost: Vec<i64> = (0..SENT).filter(|o| !copies.contains_key(o)).collect();
    eprintln!(
        "redrive across a kill of {kind:?}: {} letters, {} lost, {} doubled",
        copies.len(),
        lost.len(),
        doubled.len()
    );
    assert!(
        lost.is_empty() && doubled.is_empty(),
        "lost {lost:?}, doubled {doubled:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
