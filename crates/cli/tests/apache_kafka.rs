//! streamsight on Apache Kafka 4 (KRaft, from `scripts/kafka`), held against
//! the broker's own answers: `streamsight lag` for a classic group and a
//! KIP-848 `consumer` group of real confluent-kafka members equals what
//! Apache Kafka's own `ConsumerGroupCommand` (`kafka-consumer-groups.sh
//! --describe`) says of them, row for row, members included, from a
//! collector and straight from the cluster.
#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

mod support;

use std::collections::BTreeMap;
use streamsight_testkit::ApacheKafka;
use streamsight_testkit::apache_kafka::{kafka_tool, tool_table, unique};

/// A row of a group's partition: current offset, log end, lag, member, client.
type Row = (String, String, String, String, String);

/// `kafka-consumer-groups.sh --describe --group GROUP`, by (topic, partition).
fn described_by_kafka(bootstrap: &str, group: &str) -> BTreeMap<(String, i32), Row> {
    let (ok, out, err) = kafka_tool(
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        &["--bootstrap-server", bootstrap, "--describe", "--group", group],
    );
    assert!(ok, "{out}{err}");
    out.lines()
        .filter(|l| l.starts_with(group))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            // GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
            (
                (w[1].to_owned(), w[2].parse().unwrap()),
                (w[3].into(), w[4].into(), w[5].into(), w[6].into(), w[8].into()),
            )
        })
        .collect()
}

/// `streamsight lag --group GROUP`'s rows, by (topic, partition), from a
/// collector (`--collector URL`) or straight from the cluster
/// (`--bootstrap-server HOST:PORT`).
fn described_by_streamsight(from: &[&str], group: &str) -> BTreeMap<(String, i32), Row> {
    let mut args = vec!["lag"];
    args.extend_from_slice(from);
    args.extend_from_slice(&["--group", group]);
    let (ok, out, err) = support::run(&args);
    assert!(ok, "{out}{err}");
    out.lines()
        .filter(|l| l.starts_with(group))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            // GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG LAG-SECONDS STATUS CONSUMER-ID HOST CLIENT-ID NOTE
            (
                (w[1].to_owned(), w[2].parse().unwrap()),
                (w[3].into(), w[4].into(), w[5].into(), w[8].into(), w[10].into()),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lag_of_classic_and_kip_848_groups_equals_kafkas_own_consumer_group_command() {
    let kafka = ApacheKafka::shared();
    let b = kafka.bootstrap.as_str();
    let (topic, classic, modern) = (unique("orders"), unique("billing"), unique("fraud"));
    support::fill_topic(b, &topic, 3, 200).await;
    // Each reads some, commits each record, and stays a member.
    let billing = support::Member::join(b, &topic, &classic, "billing-1", 250);
    let fraud = support::Member::join_with(b, &topic, &modern, "fraud-1", 130, "consumer");
    billing.until("read");
    fraud.until("read");
    let toml = format!(
        "[serve]\nhistory_interval = \"200ms\"\n\n[[serve.clusters]]\nname = \"apache-kafka\"\nbootstrap = [{b:?}]\npoll_interval = \"300ms\"\n"
    );
    let (_serve, _intake, api) = support::serve_with("apache-kafka-lag", &toml, "memory://");
    for group in [&classic, &modern] {
        let truth = described_by_kafka(b, group);
        assert!(!truth.is_empty(), "Kafka describes {group}");
        // Until the collector has polled the group (then every poll agrees).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let ours = loop {
            let ours = described_by_streamsight(&["--collector", &api], group);
            if ours == truth || std::time::Instant::now() > deadline {
                break ours;
            }
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        };
        assert_eq!(ours, truth, "streamsight lag --collector");
        let direct = described_by_streamsight(&["--bootstrap-server", b], group);
        assert_eq!(direct, truth, "streamsight lag --bootstrap-server");
        eprintln!(
            "apache_kafka: {group}: {} rows equal Kafka's own, from the collector and directly",
            ours.len()
        );
    }
    // The KIP-848 group is a `consumer` group, with its member's epoch.
    let (_, detail) = streamsight_testkit::http::get(
        &reqwest::Client::new(),
        &format!("{api}/api/v1/groups/apache-kafka/{modern}"),
    )
    .await;
    assert_eq!(detail["group_type"], "consumer", "{detail:#}");
    // State, group epoch and members (ids, hosts, client ids, member epochs,
    // assignments) as Kafka's own `--describe --state/--members --verbose`.
    for (group, epochs) in [(&classic, false), (&modern, true)] {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let truth = membership_by_kafka(b, group, epochs);
            let ours = membership_by_streamsight(&api, group, epochs).await;
            if ours == truth {
                eprintln!("apache_kafka: {group}'s membership equals Kafka's own: {ours:?}");
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{group}: ours {ours:?}, Kafka's {truth:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
    }
    billing.close();
    fraud.close();
}

/// A group's state, group epoch (KIP-848 groups) and members as
/// (id, host, client id, member epoch, assignment `topic:p,p`).
type Membership = (
    String,
    Option<String>,
    Vec<(String, String, String, Option<String>, String)>,
);

/// `kafka-consumer-groups.sh --describe --state --verbose` and `--members --verbose`.
fn membership_by_kafka(bootstrap: &str, group: &str, epochs: bool) -> Membership {
    let tool = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";
    let (ok, state, err) = kafka_tool(
        tool,
        &[
            "--bootstrap-server",
            bootstrap,
            "--describe",
            "--group",
            group,
            "--state",
            "--verbose",
        ],
    );
    assert!(ok, "{state}{err}");
    let (ok, members, err) = kafka_tool(
        tool,
        &[
            "--bootstrap-server",
            bootstrap,
            "--describe",
            "--group",
            group,
            "--members",
            "--verbose",
        ],
    );
    assert!(ok, "{members}{err}");
    let state = tool_table(&state, "GROUP").pop().unwrap_or_default();
    let mut members: Vec<_> = tool_table(&members, "GROUP")
        .into_iter()
        .map(|m| {
            // "-": none (a classic member has no epoch).
            let column = |name: &str| {
                let v = m.get(name).cloned().unwrap_or_else(|| panic!("no {name} in {members}"));
                if v == "-" { String::new() } else { v }
            };
            (
                column("CONSUMER-ID"),
                column("HOST"),
                column("CLIENT-ID"),
                epochs.then(|| column("CURRENT-EPOCH")),
                column("CURRENT-ASSIGNMENT"),
            )
        })
        .collect();
    members.sort();
    (
        state.get("STATE").cloned().unwrap_or_default(),
        epochs.then(|| state.get("GROUP-EPOCH").cloned().unwrap_or_default()),
        members,
    )
}

/// The same from the collector's last poll (`/api/v1/clusters`).
async fn membership_by_streamsight(api: &str, group: &str, epochs: bool) -> Membership {
    let (_, clusters) =
        streamsight_testkit::http::get(&reqwest::Client::new(), &format!("{api}/api/v1/clusters")).await;
    let g = clusters["clusters"]["apache-kafka"]["last_poll"]["groups"]
        .as_array()
        .and_then(|gs| gs.iter().find(|g| g["group"] == group).cloned())
        .unwrap_or_default();
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    };
    let mut members: Vec<_> = g["members"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let assignment: Vec<String> = m["assignment"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|tp| {
                    let parts: Vec<String> = tp[1].as_array().into_iter().flatten().map(text).collect();
                    format!("{}:{}", text(&tp[0]), parts.join(","))
                })
                .collect();
            (
                text(&m["member_id"]),
                text(&m["host"]),
                text(&m["client_id"]),
                epochs.then(|| text(&m["member_epoch"])),
                assignment.join(";"),
            )
        })
        .collect();
    members.sort();
    (text(&g["state"]), epochs.then(|| text(&g["group_epoch"])), members)
}

/// The broker's log start and end of `topic`'s partition 0 (ListOffsets).
fn watermarks(bootstrap: &str, topic: &str) -> (i64, i64) {
    use rdkafka::consumer::Consumer;
    let c: rdkafka::consumer::BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    c.fetch_watermarks(topic, 0, std::time::Duration::from_secs(10))
        .unwrap()
}

/// Retention deleting what a group has not read, on Apache Kafka: a topic
/// kept 20 s in 1 s segments, written ten times a second, and a group
/// committed at 50 that reads no further. `unread_expiring` fires before
/// the broker deletes offset 50, with a margin that held; then the group is
/// `data_loss`, and once writes stop its `data_loss_messages` is exactly
/// what the broker's log start says was deleted unread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_deleting_unread_records_is_foretold_then_counted_exactly() {
    use std::time::{Duration, Instant};
    let kafka = ApacheKafka::shared();
    let b = kafka.bootstrap.clone();
    let (topic, group) = (unique("retained"), unique("slow"));
    let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &b)
        .create()
        .unwrap();
    let new = rdkafka::admin::NewTopic::new(&topic, 1, rdkafka::admin::TopicReplication::Fixed(1))
        .set("retention.ms", "20000")
        .set("segment.ms", "1000");
    let opts = rdkafka::admin::AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    for r in admin.create_topics([&new], &opts).await.unwrap() {
        r.unwrap();
    }
    let writing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let writer = {
        let (b, topic, writing) = (b.clone(), topic.clone(), writing.clone());
        tokio::spawn(async move {
            let producer: rdkafka::producer::FutureProducer = rdkafka::ClientConfig::new()
                .set("bootstrap.servers", &b)
                .set("linger.ms", "0")
                .create()
                .unwrap();
            while writing.load(std::sync::atomic::Ordering::Relaxed) {
                let record = rdkafka::producer::FutureRecord::<(), _>::to(&topic)
                    .partition(0)
                    .payload("x");
                producer.send(record, Duration::from_secs(5)).await.unwrap();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    streamsight_testkit::eventually(30, "60 records written", async || {
        (watermarks(&b, &topic).1 >= 60).then_some(())
    })
    .await;
    support::seed_commits(&b, &topic, &group, &[50]);
    let toml = format!(
        "[serve]\nhistory_interval = \"200ms\"\n\n[[serve.clusters]]\nname = \"apache-kafka\"\nbootstrap = [{b:?}]\npoll_interval = \"500ms\"\n"
    );
    let (_serve, _intake, api) = support::serve_with("apache-kafka-retention", &toml, "memory://");
    let http = reqwest::Client::new();

    // Foretold: the alert fires while offset 50 is still on the broker.
    let started = Instant::now();
    let (margin, foretold_at) = streamsight_testkit::eventually(90, "unread_expiring firing", async || {
        let (_, all) = streamsight_testkit::http::get(&http, &format!("{api}/api/v1/alerts")).await;
        let alert = all["alerts"]
            .as_array()?
            .iter()
            .find(|a| a["rule"] == "unread_expiring" && a["labels"]["group"] == group && a["state"] == "firing")?
            .clone();
        Some((alert["value"].as_f64()?, Instant::now()))
    })
    .await;
    let start_then = watermarks(&b, &topic).0;
    assert!(
        start_then <= 50,
        "fired only after the broker deleted offset 50 (log start {start_then})"
    );
    // Deleted: the broker's log start passes the commit.
    let deleted_at = streamsight_testkit::eventually(90, "offset 50 deleted", async || {
        (watermarks(&b, &topic).0 > 50).then(Instant::now)
    })
    .await;
    let took = deleted_at.duration_since(foretold_at).as_secs_f64();
    eprintln!(
        "apache_kafka: unread_expiring fired {:.1} s after the collector started with a margin of {margin:.1} s; the broker deleted offset 50 {took:.1} s later",
        foretold_at.duration_since(started).as_secs_f64()
    );
    assert!(
        took >= margin - 5.0,
        "the margin did not hold: {margin:.1} s foretold, deleted {took:.1} s later"
    );

    // Writes stop; the last segment stays. data_loss_messages equals the
    // broker's log start less the commit, at a moment the broker's stood still.
    writing.store(false, std::sync::atomic::Ordering::Relaxed);
    writer.await.unwrap();
    let url = format!("{api}/api/v1/groups/apache-kafka/{group}");
    let (lost, start) = streamsight_testkit::eventually(90, "data_loss_messages as the broker says", async || {
        let before = watermarks(&b, &topic).0;
        let (_, detail) = streamsight_testkit::http::get(&http, &url).await;
        let lag = detail["partitions"][0]["lag"].clone();
        let after = watermarks(&b, &topic).0;
        (before == after && lag["status"] == "data_loss" && lag["data_loss_messages"] == before - 50)
            .then(|| (lag["data_loss_messages"].as_i64().unwrap(), after))
    })
    .await;
    eprintln!("apache_kafka: {lost} messages deleted unread (the broker's log start {start}, the commit 50)");
}

/// An administrator's DeleteRecords past what a group read, on Apache Kafka:
/// the group is `data_loss` with exactly the records deleted unread, and
/// another group that had read past the cut is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_past_a_commit_is_data_loss_counted_exactly() {
    use std::time::Duration;
    let kafka = ApacheKafka::shared();
    let b = kafka.bootstrap.clone();
    let (topic, behind, ahead) = (unique("cut"), unique("behind"), unique("ahead"));
    support::fill_topic(&b, &topic, 1, 100).await;
    support::seed_commits(&b, &topic, &behind, &[30]);
    support::seed_commits(&b, &topic, &ahead, &[80]);
    let toml = format!(
        "[serve]\nhistory_interval = \"200ms\"\n\n[[serve.clusters]]\nname = \"apache-kafka\"\nbootstrap = [{b:?}]\npoll_interval = \"300ms\"\n"
    );
    let (_serve, _intake, api) = support::serve_with("apache-kafka-delete-records", &toml, "memory://");
    let http = reqwest::Client::new();
    let lag_of = |group: &str| format!("{api}/api/v1/groups/apache-kafka/{group}");
    streamsight_testkit::http::wait_for_json(&http, &lag_of(&behind), 60, "the group polled", |v| {
        v["partitions"][0]["lag"]["lag_messages"] == 70
    })
    .await;
    // Prometheus reads the loss counter by its increase: it is there at 0
    // before the first loss, so the first loss is an increase.
    let loss_line = |metrics: &str| {
        let series = format!(
            "streamsight_data_loss_messages_total{{cluster_name=\"apache-kafka\",group=\"{behind}\",topic=\"{topic}\"}} "
        );
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series.as_str()).map(str::to_owned))
    };
    let metrics = streamsight_testkit::http::get_text(&http, &format!("{api}/metrics")).await;
    assert_eq!(loss_line(&metrics).as_deref(), Some("0"), "before the cut");
    let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &b)
        .create()
        .unwrap();
    let mut cut = rdkafka::TopicPartitionList::new();
    cut.add_partition_offset(&topic, 0, rdkafka::Offset::Offset(60))
        .unwrap();
    let opts = rdkafka::admin::AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    admin.delete_records(&cut, &opts).await.unwrap();
    assert_eq!(
        watermarks(&b, &topic).0,
        60,
        "the broker's log start after DeleteRecords"
    );
    let detail = streamsight_testkit::http::wait_for_json(&http, &lag_of(&behind), 60, "data_loss", |v| {
        v["partitions"][0]["lag"]["status"] == "data_loss"
    })
    .await;
    let lag = &detail["partitions"][0]["lag"];
    assert_eq!(
        (
            &lag["data_loss_messages"],
            &lag["log_start_offset"],
            &lag["lag_messages"]
        ),
        (&serde_json::json!(30), &serde_json::json!(60), &serde_json::json!(40)),
        "{lag:#}"
    );
    let metrics = streamsight_testkit::http::get_text(&http, &format!("{api}/metrics")).await;
    assert_eq!(loss_line(&metrics).as_deref(), Some("30"), "after the cut");
    let (_, other) = streamsight_testkit::http::get(&http, &lag_of(&ahead)).await;
    let lag = &other["partitions"][0]["lag"];
    assert_eq!(
        (&lag["data_loss_messages"], &lag["lag_messages"]),
        (&serde_json::json!(0), &serde_json::json!(20)),
        "{lag:#}"
    );
    assert_ne!(lag["status"], "data_loss", "{lag:#}");
}

/// `streamsight record` reads what real clients write on Apache Kafka: a
/// batch compressed with each of gzip, snappy, lz4 and zstd, one not
/// compressed, and a transactional one, each record's key and value
/// byte-exact (confluent-kafka writes them, `tests/python/compressed_producer.py`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_reads_every_codec_and_a_transactional_batch_byte_exact() {
    let kafka = ApacheKafka::shared();
    let b = kafka.bootstrap.as_str();
    let topic = unique("codecs");
    support::fill_topic(b, &topic, 1, 0).await;
    let out = std::process::Command::new(support::python())
        .arg(support::script("compressed_producer.py"))
        .args([b, &topic])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("done"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written: Vec<(String, i64, String)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("wrote "))
        .map(|l| {
            let mut w = l.splitn(3, ' ');
            let (codec, offset) = (w.next().unwrap().to_owned(), w.next().unwrap().parse().unwrap());
            (codec, offset, w.next().unwrap().to_owned())
        })
        .collect();
    assert_eq!(written.len(), 18, "{text}");
    for (codec, offset, value) in &written {
        let (ok, out, err) = support::run(&[
            "record",
            "--bootstrap-server",
            b,
            "--topic",
            &topic,
            "--partition",
            "0",
            "--offset",
            &offset.to_string(),
            "--format",
            "json",
        ]);
        assert!(ok, "{codec} at {offset}: {err}");
        let r: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(r["offset"], *offset, "{codec}: {r:#}");
        assert_eq!(r["value"]["text"], *value, "{codec} at {offset}: {r:#}");
        if codec != "transactional" {
            let i = value.split(' ').nth(2).unwrap();
            assert_eq!(r["key"]["text"], format!("{codec}-{i}"), "{codec}: {r:#}");
        }
    }
}

/// A CA and a certificate for 127.0.0.1 it signed, made for the test
/// (openssl), as a company's PKI hands them out: (the CA's certificate, the
/// broker's PEM keystore: its key, then its certificate).
fn certificate(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let openssl = |args: &[&str]| {
        let made = std::process::Command::new("openssl")
            .current_dir(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&made.stderr)
        );
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign",
        "-keyout",
        "ca-key.pem",
        "-out",
        "ca.pem",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        "key.pem",
        "-out",
        "broker.csr",
    ]);
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n").unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "broker.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca-key.pem",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "san.ext",
        "-out",
        "cert.pem",
    ]);
    let store = dir.join("keystore.pem");
    let pem = [
        std::fs::read(dir.join("key.pem")).unwrap(),
        std::fs::read(dir.join("cert.pem")).unwrap(),
    ]
    .concat();
    std::fs::write(&store, pem).unwrap();
    (dir.join("ca.pem"), store)
}

/// Security as users deploy it: an Apache Kafka node with a SASL_SSL
/// listener (SCRAM-SHA-512 and PLAIN) on a certificate made for the test.
/// The poller authenticates with each mechanism and reads the group's lag;
/// a wrong password is an error naming the cluster, never an empty estate;
/// the `kafka://` log authenticates too, and with a wrong password `serve`
/// stops at once saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_ssl_with_scram_and_plain_authenticates_and_a_wrong_password_names_the_cluster() {
    let dir = std::env::temp_dir().join(unique("streamsight-sasl-ssl"));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, keystore) = certificate(&dir);
    let (plain, secure, controller) = (
        streamsight_testkit::free_port(),
        streamsight_testkit::free_port(),
        streamsight_testkit::free_port(),
    );
    let listeners =
        format!("PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{secure},CONTROLLER://127.0.0.1:{controller}");
    let advertised = format!("PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{secure}");
    let keystore = keystore.display().to_string();
    let mut config: Vec<(&str, &str)> = streamsight_testkit::apache_kafka::TEST_CONFIG.to_vec();
    config.extend([
        ("listeners", listeners.as_str()),
        ("advertised.listeners", advertised.as_str()),
        ("sasl.enabled.mechanisms", "SCRAM-SHA-512,PLAIN"),
        (
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config",
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        ),
        (
            "listener.name.sasl_ssl.plain.sasl.jaas.config",
            "org.apache.kafka.common.security.plain.PlainLoginModule required user_bob=\"bob-secret\";",
        ),
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.location", keystore.as_str()),
    ]);
    let controller_port = controller.to_string();
    let kafka = ApacheKafka::start_with_args(
        &dir.join("broker"),
        plain,
        &config,
        &[
            "--controller-port",
            &controller_port,
            "--add-scram",
            "SCRAM-SHA-512=[name=alice,password=alice-secret]",
        ],
    );
    let b = kafka.bootstrap.as_str();
    let (topic, group) = (unique("payments"), unique("ledger"));
    support::fill_topic(b, &topic, 1, 10).await;
    support::seed_commits(b, &topic, &group, &[4]);
    // Dead letters and the probe's topic, for a monitor and a probe that
    // reach the cluster only through its SASL_SSL listener.
    support::dead_letters(b, 5, 0).await;
    let probe_topic = unique("probe");
    support::fill_topic(b, &probe_topic, 1, 0).await;

    let ca = cert.display().to_string();
    let cluster = |name: &str, mechanism: &str, user: &str, password: &str| {
        format!(
            "[[serve.clusters]]\nname = {name:?}\nbootstrap = [\"127.0.0.1:{secure}\"]\npoll_interval = \"500ms\"\nsecurity_protocol = \"sasl_ssl\"\n\
             [serve.clusters.sasl]\nmechanism = {mechanism:?}\nusername = {user:?}\npassword = {password:?}\n\
             [serve.clusters.tls]\nca_file = {ca:?}\n"
        )
    };
    let toml = [
        cluster("scram", "SCRAM-SHA-512", "alice", "alice-secret"),
        cluster("plain", "PLAIN", "bob", "bob-secret"),
        cluster("wrong", "SCRAM-SHA-512", "alice", "guess"),
        // Each names a cluster: its bootstrap and security settings.
        "[[serve.dlq]]\nname = \"secure-dlq\"\ncluster = \"scram\"\nrefresh = \"1s\"\n".to_owned(),
        format!(
            "[[serve.probes]]\nname = \"secure-probe\"\ncluster = \"plain\"\ntopic = {probe_topic:?}\ninterval = \"200ms\"\n"
        ),
    ]
    .concat();
    let log = format!(
        "kafka://127.0.0.1:{secure}/{}?create=true&partitions=2&security.protocol=sasl_ssl&sasl.mechanism=SCRAM-SHA-512\
         &sasl.username=alice&sasl.password=alice-secret&ssl.ca.location={ca}",
        unique("secure-log")
    );
    let (_serve, _intake, api) = support::serve_with(
        "apache-kafka-sasl-ssl",
        &format!("[serve]\nhistory_interval = \"200ms\"\n{toml}"),
        &log,
    );
    let http = reqwest::Client::new();
    for name in ["scram", "plain"] {
        let url = format!("{api}/api/v1/groups/{name}/{group}");
        streamsight_testkit::http::wait_for_json(&http, &url, 60, &format!("{name}: the group's lag"), |v| {
            v["partitions"][0]["lag"]["lag_messages"] == 6
        })
        .await;
    }
    let clusters = streamsight_testkit::http::wait_for_json(
        &http,
        &format!("{api}/api/v1/clusters"),
        60,
        "the wrong password said",
        |v| {
            v["clusters"]["wrong"]["last_poll"]["errors"]
                .to_string()
                .contains("authentication failed")
        },
    )
    .await;
    let said = clusters["clusters"]["wrong"]["last_poll"]["errors"].to_string();
    assert!(
        said.contains("wrong") || said.contains("alice"),
        "names the cluster or the user: {said}"
    );
    let (ok, out, err) = support::run(&["lag", "--collector", &api, "--group", &group]);
    assert!(ok, "{err}");
    assert!(
        out.lines().filter(|l| l.starts_with(group.as_str())).count() >= 2,
        "{out}"
    );
    // The log lives on the polled cluster: its own topics and the groups
    // that read them (the leases') are not the estate's.
    let (ok, all, err) = support::run(&["lag", "--collector", &api]);
    assert!(ok, "{err}");
    assert!(
        !all.contains("secure-log"),
        "the collector's own log shown as the estate's: {all}"
    );

    // The kafka:// log with a wrong password: serve stops, saying why.
    // The DLQ monitor and the probe through SASL_SSL, with the clusters' settings.
    streamsight_testkit::http::wait_for_json(
        &http,
        &format!("{api}/api/v1/dlq"),
        60,
        "letters read over SASL_SSL",
        |v| {
            v["clusters"].as_array().is_some_and(|cs| {
                cs.iter().any(|c| {
                    c["cluster"] == "secure-dlq"
                        && c["topics"]
                            .as_array()
                            .is_some_and(|ts| ts.iter().any(|t| t["dlq_topic"] == "orders.dlq" && t["read"] == 5))
                })
            })
        },
    )
    .await;
    streamsight_testkit::http::wait_for_json(
        &http,
        &format!("{api}/api/v1/probes"),
        60,
        "the probe over SASL_SSL",
        |v| {
            v["probes"].as_array().is_some_and(|ps| {
                ps.iter().any(|p| {
                    p["cluster"] == "secure-probe"
                        && p["report"]["partitions"][0]["received"].as_u64().is_some_and(|n| n > 0)
                })
            })
        },
    )
    .await;
    // Acting through the collector on the secured cluster: a record read, a
    // reset shown then made, the broker's own tool reading it back.
    let (ok, out, err) = support::run(&[
        "record",
        "--collector",
        &api,
        "--cluster",
        "scram",
        "--topic",
        &topic,
        "--partition",
        "0",
        "--offset",
        "3",
    ]);
    assert!(ok, "{out}{err}");
    let args = [
        "groups",
        "reset",
        "--collector",
        &api,
        "--cluster",
        "scram",
        "--group",
        &group,
        "--to-offset",
        "2",
    ];
    let (ok, out, err) = support::run(&args);
    assert!(ok && out.contains('4') && out.contains('2'), "{out}{err}");
    let (ok, out, err) = support::run(&[&args[..], &["--execute"]].concat());
    assert!(ok, "{out}{err}");
    let described = described_by_kafka(b, &group);
    assert_eq!(described[&(topic.clone(), 0)].0, "2", "{described:?}");

    let bad_log = log.replace("sasl.password=alice-secret", "sasl.password=guess");
    let (ok, _, err) = support::serve_to_the_end(&bad_log);
    assert!(!ok, "serve started on a log it cannot authenticate to");
    eprintln!(
        "apache_kafka: a kafka:// log with a wrong password: {}",
        err.lines().last().unwrap_or_default()
    );
    assert!(err.to_lowercase().contains("authentication"), "{err}");
    drop(kafka);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An open transaction on Apache Kafka, named wherever a user looks: the
/// group's verdict (the API's reason, which the dashboard's group page
/// shows), its row in `streamsight lag`, and the `transaction_open` alert's
/// summary say which transactional id and producer hold the partition, as
/// Kafka's own `kafka-transactions.sh describe` says. A committed one
/// afterwards leaves nothing named and nothing blocked; a writer fenced by a
/// new instance of its transactional id (the epoch bumped, its transaction
/// aborted) holds nothing, and the new instance is named with its epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_transaction_is_named_by_the_verdict_the_row_and_the_alert() {
    use rdkafka::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use std::time::Duration;
    let kafka = ApacheKafka::shared();
    let b = kafka.bootstrap.clone();
    let (topic, group, id) = (unique("ledger"), unique("settle"), unique("ledger-writer"));
    support::fill_topic(&b, &topic, 1, 10).await;
    let t = Duration::from_secs(30);
    let tx: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &b)
        .set("transactional.id", &id)
        .set("transaction.timeout.ms", "600000")
        .create()
        .unwrap();
    tx.init_transactions(t).unwrap();
    tx.begin_transaction().unwrap();
    for i in 0..5 {
        tx.send(
            BaseRecord::<(), _>::to(&topic)
                .partition(0)
                .payload(&format!("entry {i}")),
        )
        .unwrap();
    }
    tx.flush(t).unwrap();
    // A read_committed member reads to the open transaction and commits there.
    let reading = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let reader = {
        let (b, topic, group, reading) = (b.clone(), topic.clone(), group.clone(), reading.clone());
        std::thread::spawn(move || {
            let c: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &b)
                .set("group.id", &group)
                .set("isolation.level", "read_committed")
                .set("enable.auto.commit", "false")
                .set("auto.offset.reset", "earliest")
                .create()
                .unwrap();
            c.subscribe(&[&topic]).unwrap();
            while reading.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some(Ok(_)) = c.poll(Duration::from_millis(200)) {
                    let _ = c.commit_consumer_state(CommitMode::Sync);
                }
            }
        })
    };
    let toml = format!(
        "[engine]\nopen_transaction_after = \"2s\"\n\n[serve]\nhistory_interval = \"200ms\"\n\n[[serve.clusters]]\nname = \"apache-kafka\"\nbootstrap = [{b:?}]\npoll_interval = \"300ms\"\n"
    );
    let (_serve, _intake, api) = support::serve_with("apache-kafka-open-transaction", &toml, "memory://");
    let http = reqwest::Client::new();
    let url = format!("{api}/api/v1/groups/apache-kafka/{group}");
    let detail = streamsight_testkit::http::wait_for_json(&http, &url, 90, "blocked and named", |v| {
        let lag = &v["partitions"][0]["lag"];
        lag["status"] == "blocked" && lag["open_transaction"]["transactional_id"].is_string()
    })
    .await;
    // Kafka's own word on the transaction.
    let (ok, out, err) = kafka_tool(
        "org.apache.kafka.tools.TransactionsCommand",
        &["--bootstrap-server", &b, "describe", "--transactional-id", &id],
    );
    assert!(ok, "{out}{err}");
    let row = tool_table(&out, "CoordinatorId")
        .pop()
        .unwrap_or_else(|| panic!("{out}"));
    let column = |name: &str| -> i64 { row[name].parse().unwrap() };
    let lag = &detail["partitions"][0]["lag"];
    let held = &lag["open_transaction"];
    assert_eq!(
        (
            &held["transactional_id"],
            &held["producer_id"],
            &held["producer_epoch"],
            &held["first_offset"],
            &held["timeout_ms"],
            &lag["last_stable_offset"],
        ),
        (
            &serde_json::json!(id),
            &serde_json::json!(column("ProducerId")),
            &serde_json::json!(column("ProducerEpoch")),
            &serde_json::json!(10),
            &serde_json::json!(column("TransactionTimeoutMs")),
            &serde_json::json!(10),
        ),
        "{detail:#}\n{out}"
    );
    let holder = format!(
        "transactional id {id:?} (producer {}, epoch {})",
        column("ProducerId"),
        column("ProducerEpoch")
    );
    let reason = detail["partitions"][0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!(
            "blocked by an open transaction: {holder} has held offset 10 for "
        )),
        "{reason}"
    );
    assert!(
        reason.contains("its coordinator aborts it at its 10 m timeout"),
        "{reason}"
    );
    let alerts_url = format!("{api}/api/v1/alerts");
    let alerts = streamsight_testkit::http::wait_for_json(&http, &alerts_url, 60, "transaction_open firing", |v| {
        v["alerts"].as_array().is_some_and(|a| {
            a.iter()
                .any(|a| a["rule"] == "transaction_open" && a["labels"]["topic"] == topic && a["state"] == "firing")
        })
    })
    .await;
    let alert = alerts["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["rule"] == "transaction_open" && a["labels"]["topic"] == topic)
        .unwrap();
    let summary = alert["summary"].as_str().unwrap();
    assert!(summary.contains(&format!("; held by {holder} (open ")), "{summary}");
    let (ok, out, err) = support::run(&["lag", "--collector", &api, "--group", &group]);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains(&format!("held by an open transaction of {holder}")),
        "{out}"
    );

    // Committed: the reader passes it; nothing is held, nobody named (a
    // poll may see the reader past the marker before the stable offset moves:
    // the next one agrees).
    tx.commit_transaction(t).unwrap();
    streamsight_testkit::http::wait_for_json(&http, &url, 60, "caught up, nothing held", |v| {
        let lag = &v["partitions"][0]["lag"];
        lag["status"] == "ok" && lag["lag_messages"] == 0 && lag.get("open_transaction").is_none()
    })
    .await;

    // Fenced: the writer opens another transaction and a new instance with
    // the same transactional id starts, bumping the epoch; the broker aborts
    // the old one, and nothing holds the partition. The new instance's own
    // transaction is named with the new epoch; aborted, it is never lag.
    tx.begin_transaction().unwrap();
    tx.send(BaseRecord::<(), _>::to(&topic).partition(0).payload("zombie"))
        .unwrap();
    tx.flush(t).unwrap();
    let old_epoch = streamsight_testkit::http::wait_for_json(&http, &url, 60, "the first instance named", |v| {
        v["partitions"][0]["lag"]["open_transaction"]["transactional_id"] == id
    })
    .await["partitions"][0]["lag"]["open_transaction"]["producer_epoch"]
        .as_i64()
        .unwrap();
    let successor: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &b)
        .set("transactional.id", &id)
        .create()
        .unwrap();
    successor.init_transactions(t).unwrap();
    streamsight_testkit::http::wait_for_json(&http, &url, 60, "the fenced transaction aborted", |v| {
        let lag = &v["partitions"][0]["lag"];
        lag["status"] == "ok" && lag["lag_messages"] == 0 && lag.get("open_transaction").is_none()
    })
    .await;
    successor.begin_transaction().unwrap();
    successor
        .send(BaseRecord::<(), _>::to(&topic).partition(0).payload("successor"))
        .unwrap();
    successor.flush(t).unwrap();
    let detail = streamsight_testkit::http::wait_for_json(&http, &url, 60, "the successor named", |v| {
        v["partitions"][0]["lag"]["open_transaction"]["transactional_id"] == id
    })
    .await;
    let new_epoch = detail["partitions"][0]["lag"]["open_transaction"]["producer_epoch"]
        .as_i64()
        .unwrap();
    assert!(new_epoch > old_epoch, "epoch {old_epoch} then {new_epoch}: {detail:#}");
    successor.abort_transaction(t).unwrap();
    streamsight_testkit::http::wait_for_json(&http, &url, 60, "the aborted records are no lag", |v| {
        let lag = &v["partitions"][0]["lag"];
        lag["status"] == "ok" && lag["lag_messages"] == 0 && lag.get("open_transaction").is_none()
    })
    .await;
    reading.store(false, std::sync::atomic::Ordering::Relaxed);
    reader.join().unwrap();
}

/// A share group (KIP-932) from Apache Kafka's own console share consumer:
/// streamsight reads it as a share group, with each share-partition's start
/// offset and share-group lag equal to what Kafka's own `kafka-share-groups.sh
/// --describe` says, and `streamsight lag` says it is a share group rather
/// than "no such group".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_share_group_from_a_real_share_consumer_reads_as_kafka_says() {
    let kafka = ApacheKafka::shared();
    let b = kafka.bootstrap.clone();
    let (topic, group) = (unique("jobs"), unique("workers"));
    support::fill_topic(&b, &topic, 1, 30).await;
    // A new share group starts at the end unless told otherwise.
    let (ok, out, err) = kafka_tool(
        "org.apache.kafka.tools.ConfigCommand",
        &[
            "--bootstrap-server",
            &b,
            "--alter",
            "--entity-type",
            "groups",
            "--entity-name",
            &group,
            "--add-config",
            "share.auto.offset.reset=earliest",
        ],
    );
    assert!(ok, "{out}{err}");
    let (ok, out, err) = kafka_tool(
        "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
        &[
            "--bootstrap-server",
            &b,
            "--topic",
            &topic,
            "--group",
            &group,
            "--max-messages",
            "12",
            "--timeout-ms",
            "60000",
        ],
    );
    assert!(ok, "{out}{err}");
    let (ok, out, err) = kafka_tool(
        "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
        &["--bootstrap-server", &b, "--describe", "--group", &group],
    );
    assert!(ok, "{out}{err}");
    let row = tool_table(&out, "GROUP").pop().unwrap_or_else(|| panic!("{out}"));
    let (start, lag): (i64, i64) = (row["START-OFFSET"].parse().unwrap(), row["LAG"].parse().unwrap());
    assert_eq!(start + lag, 30, "{out}");
    let toml = format!("[[serve.clusters]]\nname = \"apache-kafka\"\nbootstrap = [{b:?}]\npoll_interval = \"300ms\"\n");
    let (_serve, _intake, api) = support::serve_with("apache-kafka-share-group", &toml, "memory://");
    let http = reqwest::Client::new();
    let url = format!("{api}/api/v1/groups/apache-kafka/{group}");
    let detail = streamsight_testkit::http::wait_for_json(&http, &url, 60, "the share group described", |v| {
        v["share_partitions"][0]["start_offset"].is_i64()
    })
    .await;
    let p = &detail["share_partitions"][0];
    assert_eq!(
        (&detail["group_type"], &p["start_offset"], &p["end_offset"], &p["lag"]),
        (
            &serde_json::json!("share"),
            &serde_json::json!(start),
            &serde_json::json!(30),
            &serde_json::json!(lag)
        ),
        "{detail:#}\n{out}"
    );
    let (ok, _, err) = support::run(&["lag", "--bootstrap-server", &b, "--group", &group]);
    assert!(!ok);
    assert!(
        err.contains(&format!("{group} is a share group: it commits no offsets"))
            && err.contains(&format!("{topic}[0] {lag}")),
        "{err}"
    );

    // A member reading the rest (ShareGroupDescribe): state, member and its
    // client id as Kafka's own --describe --members says; gone, Empty.
    let consumer = {
        let (b, topic, group) = (b.clone(), topic.clone(), group.clone());
        std::thread::spawn(move || {
            kafka_tool(
                "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
                &[
                    "--bootstrap-server",
                    &b,
                    "--topic",
                    &topic,
                    "--group",
                    &group,
                    "--timeout-ms",
                    "10000",
                ],
            )
        })
    };
    let clusters = format!("{api}/api/v1/clusters");
    let share_group = |v: &serde_json::Value| {
        v["clusters"]["apache-kafka"]["last_poll"]["groups"]
            .as_array()
            .and_then(|gs| gs.iter().find(|g| g["group"] == group.as_str()).cloned())
            .unwrap_or_default()
    };
    let seen = streamsight_testkit::http::wait_for_json(&http, &clusters, 60, "the share member described", |v| {
        share_group(v)["members"].as_array().is_some_and(|m| m.len() == 1)
    })
    .await;
    let (ok, out, err) = kafka_tool(
        "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
        &["--bootstrap-server", &b, "--describe", "--group", &group, "--members"],
    );
    assert!(ok, "{out}{err}");
    let row = tool_table(&out, "GROUP").pop().unwrap_or_else(|| panic!("{out}"));
    let column = |name: &str| row.get(name).map(String::as_str).unwrap_or_else(|| panic!("{out}"));
    let g = share_group(&seen);
    assert_eq!(
        (
            g["state"].as_str(),
            g["members"][0]["client_id"].as_str(),
            g["members"][0]["member_id"].as_str()
        ),
        (Some("Stable"), Some(column("CLIENT-ID")), Some(column("CONSUMER-ID"))),
        "{g:#}\n{out}"
    );
    let (ok, out, err) = consumer.join().unwrap();
    assert!(ok, "{out}{err}");
    streamsight_testkit::http::wait_for_json(&http, &clusters, 60, "the share group empty", |v| {
        let g = share_group(v);
        g["state"] == "Empty" && g["members"].as_array().is_some_and(Vec::is_empty)
    })
    .await;
}

/// A classic group upgraded online to KIP-848's `consumer` protocol (Kafka
/// converts it when a `consumer` member joins while a classic one is in it):
/// streamsight follows the type from `classic` to `consumer` with the same
/// group's commits, before and after, in one history (a group forgotten and
/// found again would have lost the classic ones).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_classic_group_upgraded_online_to_the_consumer_protocol_keeps_its_history() {
    let kafka = ApacheKafka::shared();
    let b = kafka.bootstrap.clone();
    let (topic, group) = (unique("upgraded"), unique("ledger"));
    support::fill_topic(&b, &topic, 1, 30).await;
    let toml = format!(
        "[serve]\nhistory_interval = \"200ms\"\n\n[[serve.clusters]]\nname = \"apache-kafka\"\nbootstrap = [{b:?}]\npoll_interval = \"300ms\"\n"
    );
    let (_serve, _intake, api) = support::serve_with("apache-kafka-upgrade", &toml, "memory://");
    let http = reqwest::Client::new();
    let url = format!("{api}/api/v1/groups/apache-kafka/{group}");
    let classic = support::Member::join_with(&b, &topic, &group, "ledger-classic", 10, "classic");
    classic.until("read 10");
    // Seen, and sampled into its history (a sample is taken each
    // history_interval: the group shown is not yet a group sampled).
    streamsight_testkit::http::wait_for_json(&http, &url, 60, "the classic group at 10, sampled", |v| {
        v["group_type"] == "classic"
            && v["partitions"][0]["lag"]["committed_offset"] == 10
            && v["history"].as_array().is_some_and(|h| !h.is_empty())
    })
    .await;
    // The upgrade: a consumer-protocol member joins, the classic one leaves.
    let before_upgrade = streamsight_testkit::now_ms();
    let upgraded = support::Member::join_with(&b, &topic, &group, "ledger-848", 10, "consumer");
    classic.close();
    upgraded.until("read 10");
    let detail = streamsight_testkit::http::wait_for_json(&http, &url, 60, "the consumer group at 20", |v| {
        v["group_type"] == "consumer" && v["partitions"][0]["lag"]["committed_offset"] == 20
    })
    .await;
    // The group's sampled history runs from before the upgrade (a group
    // forgotten and found again starts a new one), its last commit the new
    // protocol's.
    let samples: Vec<i64> = detail["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["at_ms"].as_i64())
        .collect();
    let commits: Vec<i64> = detail["partitions"][0]["recent_commits"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["offset"].as_i64())
        .collect();
    assert!(
        samples.first().is_some_and(|&first| first < before_upgrade) && commits.last() == Some(&20),
        "one history from the classic group to the consumer one: samples from {:?}, upgrade at {before_upgrade}, commits {commits:?}\n{detail:#}",
        samples.first()
    );
    upgraded.close();
}

/// A static member (KIP-345, `group.instance.id`) restarted four times within
/// its session: Kafka gives each start a new member id and no rebalance, and
/// streamsight counts none, names no departure and calls no storm (a rolling
/// restart is not a storm), while the polls saw the member ids change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_restarting_is_no_rebalance_and_no_storm() {
    let kafka = ApacheKafka::shared();
    let b = kafka.bootstrap.clone();
    let (topic, group) = (unique("static"), unique("billing"));
    support::fill_topic(&b, &topic, 1, 30).await;
    let first = support::Member::join_static(&b, &topic, &group, "billing-static", 1, "billing-0");
    first.until("read 1");
    let toml = format!(
        "[serve]\nhistory_interval = \"200ms\"\n\n[[serve.clusters]]\nname = \"apache-kafka\"\nbootstrap = [{b:?}]\npoll_interval = \"300ms\"\n"
    );
    let (_serve, _intake, api) = support::serve_with("apache-kafka-static", &toml, "memory://");
    let http = reqwest::Client::new();
    let clusters = format!("{api}/api/v1/clusters");
    let member_id = async || {
        let (_, v) = streamsight_testkit::http::get(&http, &clusters).await;
        v["clusters"]["apache-kafka"]["last_poll"]["groups"]
            .as_array()
            .and_then(|gs| gs.iter().find(|g| g["group"] == group.as_str()).cloned())
            .and_then(|g| g["members"][0]["member_id"].as_str().map(str::to_owned))
    };
    let mut seen = std::collections::BTreeSet::new();
    seen.insert(streamsight_testkit::eventually(60, "the member polled", async || member_id().await).await);
    first.close();
    for restart in 2..=5 {
        let member = support::Member::join_static(&b, &topic, &group, "billing-static", 1, "billing-0");
        member.until("read 1");
        // Each start polled under its new member id.
        let id = streamsight_testkit::eventually(60, "the restarted member polled", async || {
            member_id().await.filter(|id| !seen.contains(id))
        })
        .await;
        seen.insert(id);
        if restart < 5 {
            member.close();
        } else {
            let detail = streamsight_testkit::http::get(&http, &format!("{api}/api/v1/groups/apache-kafka/{group}"))
                .await
                .1;
            let r = &detail["rebalances"];
            assert_eq!(
                (&r["last_hour"], r["departures"].as_array().map(Vec::len), &r["storm"]),
                (&serde_json::json!(0), Some(0), &serde_json::json!(false)),
                "{} member ids seen: {seen:?}\n{r:#}",
                seen.len()
            );
            member.close();
        }
    }
    assert_eq!(seen.len(), 5, "{seen:?}");
}

/// `share.auto.offset.reset=earliest` for `group`: a new share group starts
/// at the end unless told otherwise.
fn share_group_from_earliest(bootstrap: &str, group: &str) {
    let (ok, out, err) = kafka_tool(
        "org.apache.kafka.tools.ConfigCommand",
        &[
            "--bootstrap-server",
            bootstrap,
            "--alter",
            "--entity-type",
            "groups",
            "--entity-name",
            group,
            "--add-config",
            "share.auto.offset.reset=earliest",
        ],
    );
    assert!(ok, "{out}{err}");
}

/// Exact share-group lag (KIP-1226) from a real `KafkaShareConsumer` that
/// acknowledges out of order: of 10 records, offset 0 released (available
/// again), 1 rejected (archived), 2 and 3 held acquired, 4-9 accepted from
/// the highest down. The start offset stays 0, so start-to-end would say 10;
/// the broker's DescribeShareGroupOffsets v1 says 3 (0, 2, 3 not yet
/// acknowledged), as Kafka's own `kafka-share-groups.sh --describe` does, and
/// so does streamsight everywhere it shows share-group lag: the group API,
/// `/api/v1/clusters`, `/metrics` (no `upper_bound` label) and `streamsight lag`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn share_group_lag_is_exact_with_records_released_rejected_and_held() {
    let kafka = ApacheKafka::shared();
    let b = kafka.bootstrap.clone();
    let (topic, group) = (unique("tasks"), unique("pickers"));
    support::fill_topic(&b, &topic, 1, 10).await;
    share_group_from_earliest(&b, &group);
    let member = support::Member::java_share(&b, &topic, &group, 10, [&[0], &[1], &[2, 3]]);
    let acked = member.until("acked");
    assert_eq!(acked.last().map(String::as_str), Some("acked 6 1 1 2"), "{acked:?}");
    let tool = "org.apache.kafka.tools.consumer.group.ShareGroupCommand";
    let kafka_says = || {
        let (ok, out, err) = kafka_tool(tool, &["--bootstrap-server", &b, "--describe", "--group", &group]);
        assert!(ok, "{out}{err}");
        let row = tool_table(&out, "GROUP").pop().unwrap_or_else(|| panic!("{out}"));
        let figure = |c: &str| row[c].parse::<i64>().unwrap_or_else(|_| panic!("{c} in {out}"));
        (figure("START-OFFSET"), figure("LAG"))
    };
    let (start, lag) = kafka_says();
    assert_eq!((start, lag), (0, 3), "Kafka's own figure");

    let toml = format!("[[serve.clusters]]\nname = \"apache-kafka\"\nbootstrap = [{b:?}]\npoll_interval = \"300ms\"\n");
    let (_serve, _intake, api) = support::serve_with("apache-kafka-share-exact", &toml, "memory://");
    let http = reqwest::Client::new();
    let url = format!("{api}/api/v1/groups/apache-kafka/{group}");
    let detail = streamsight_testkit::http::wait_for_json(&http, &url, 60, "the share group's exact lag", |v| {
        v["share_partitions"][0]["lag"].is_i64()
    })
    .await;
    assert_eq!(
        detail["share_partitions"],
        serde_json::json!([{"group": group, "topic": topic, "partition": 0, "start_offset": start,
                            "end_offset": 10, "lag": lag, "upper_bound": false}]),
        "{detail:#}"
    );
    // A member holding records is no consumer: no consumer-lag row.
    assert_eq!(detail["partitions"], serde_json::json!([]), "{detail:#}");
    let burrow =
        streamsight_testkit::http::get_json(&http, &format!("{api}/v3/kafka/apache-kafka/consumer/{group}/status"))
            .await;
    let status = &burrow["status"];
    assert_eq!(
        (
            &status["totallag"],
            &status["streamsight"]["group_type"],
            &status["streamsight"]["share_lag"],
            &status["streamsight"]["share_lag_upper_bound"]
        ),
        (
            &serde_json::json!(lag),
            &serde_json::json!("share"),
            &serde_json::json!(lag),
            &serde_json::json!(false)
        ),
        "{burrow:#}"
    );
    let browser = support::browser::Browser::start(1400, 1000).await;
    browser.open(&format!("{api}/groups/apache-kafka/{group}")).await;
    browser
        .wait_until(
            "the share group's page",
            "return document.body.innerText.includes('Share-partitions (1)')",
        )
        .await;
    browser.check_page("kafka-share-group-exact").await;
    let page = browser.text("main").await;
    assert!(
        browser.text("#share-lag-total").await == format!("{lag} messages") && !page.contains('≤'),
        "{page}"
    );
    let clusters = streamsight_testkit::http::get_json(&http, &format!("{api}/api/v1/clusters")).await;
    let listed = clusters["clusters"]["apache-kafka"]["last_poll"]["groups"]
        .as_array()
        .and_then(|gs| gs.iter().find(|g| g["group"] == group.as_str()).cloned())
        .unwrap_or_default();
    assert_eq!(
        (&listed["share_lag"], &listed["share_lag_upper_bound"]),
        (&serde_json::json!(lag), &serde_json::json!(false)),
        "{listed:#}"
    );
    let metrics = streamsight_testkit::http::get_text(&http, &format!("{api}/metrics")).await;
    let series = format!(
        "streamsight_share_group_lag{{cluster_name=\"apache-kafka\",group=\"{group}\",topic=\"{topic}\",partition=\"0\"}}"
    );
    assert_eq!(
        streamsight_testkit::http::sample(&metrics, &series),
        Some(lag as f64),
        "{series}"
    );
    let (ok, out, err) = support::run(&["lag", "--bootstrap-server", &b, "--group", &group]);
    assert!(
        !ok && err.contains(&format!("{topic}[0] {lag}")) && !err.contains(&format!("{topic}[0] ≤")),
        "{out}{err}"
    );
    // The broker's figure did not move while streamsight read it.
    assert_eq!(kafka_says(), (start, lag));
    member.close();
}

/// A streams group (KIP-1071) from a real Kafka Streams application
/// (`group.protocol=streams`; `StreamsApp` counts a topic by value through a
/// repartition topic and a state store): streamsight describes it with
/// StreamsGroupDescribe as Kafka's own `kafka-streams-groups.sh --describe`
/// does (state, epochs, the member, its process, client and tasks), labels
/// its topics (source, repartition; the changelog named in its topology and
/// never a lag row), and, with the application stopped and 7 records more,
/// reads the lag of each source and repartition partition as the tool's
/// OFFSET-LAG, in the API, Burrow's API and `/metrics`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streams_group_from_a_real_kafka_streams_app_reads_as_kafka_says() {
    let kafka = ApacheKafka::shared();
    let b = kafka.bootstrap.clone();
    let (app, input, output) = (unique("counter"), unique("words"), unique("counts"));
    support::fill_topic(&b, &input, 2, 5).await;
    support::fill_topic(&b, &output, 1, 0).await;
    let running = support::Member::streams_app(&b, &app, &input, &output);
    running.until("running");
    // A rule scoped to the application: its lag alerts as any group's.
    let toml = format!(
        "[[serve.clusters]]\nname = \"apache-kafka\"\nbootstrap = [{b:?}]\npoll_interval = \"300ms\"\n\n\
         [[serve.alerts.rules]]\nname = \"streams_behind\"\nsignal = \"group_lag_messages\"\nabove = 5\n\
         for = \"0s\"\nscope = {{ group = \"{app}\" }}\nsummary = \"{{group}} is {{value}} messages behind\"\n"
    );
    let (_serve, _intake, api) = support::serve_with("apache-kafka-streams-group", &toml, "memory://");
    let http = reqwest::Client::new();
    let url = format!("{api}/api/v1/groups/apache-kafka/{app}");
    let repartition = format!("{app}-by-value-repartition");
    // Caught up: every input partition, source and repartition, committed.
    let detail = streamsight_testkit::http::wait_for_json(&http, &url, 90, "the streams group caught up", |v| {
        let rows = v["partitions"].as_array().cloned().unwrap_or_default();
        v["streams"]["members"].as_array().is_some_and(|m| m.len() == 1)
            && rows.len() == 4
            && rows.iter().all(|r| r["lag"]["lag_messages"] == 0)
    })
    .await;
    assert_eq!(
        (&detail["group_type"], &detail["polled"]["state"]),
        (&serde_json::json!("streams"), &serde_json::json!("Stable")),
        "{detail:#}"
    );
    let roles: BTreeMap<String, String> = detail["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["topic"].as_str().unwrap().to_owned(),
                r["topic_role"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        roles,
        BTreeMap::from([
            (input.clone(), "source".to_owned()),
            (repartition.clone(), "repartition".to_owned())
        ]),
        "{detail:#}"
    );
    let streams = &detail["streams"];
    let changelogs: Vec<&str> = streams["subtopologies"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| {
            s["changelog_topics"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|t| t.as_str())
        })
        .collect();
    assert!(
        changelogs.len() == 1 && changelogs[0].starts_with(&app) && changelogs[0].ends_with("-changelog"),
        "{streams:#}"
    );

    // The lag as Kafka's own tool says it while the application runs.
    let tool = "org.apache.kafka.tools.streams.StreamsGroupCommand";
    let (ok, out, err) = kafka_tool(
        tool,
        &["--bootstrap-server", &b, "--describe", "--group", &app, "--offsets"],
    );
    assert!(ok, "{out}{err}");
    let by_kafka: BTreeMap<(String, i64), i64> = tool_table(&out, "GROUP")
        .into_iter()
        .map(|r| {
            (
                (r["TOPIC"].clone(), r["PARTITION"].parse().unwrap()),
                r["OFFSET-LAG"].parse().unwrap(),
            )
        })
        .collect();
    assert_eq!(by_kafka, lag_by_the_broker(&b, &app, &[&input, &repartition]), "{out}");
    assert_eq!(by_kafka.len(), 4, "{out}");

    // The member as Kafka's own tool says it.
    let (ok, out, err) = kafka_tool(
        tool,
        &[
            "--bootstrap-server",
            &b,
            "--describe",
            "--group",
            &app,
            "--members",
            "--verbose",
        ],
    );
    assert!(ok, "{out}{err}");
    // The last column (ASSIGNMENTS) holds spaces: the first eight are read by
    // name, the rest is the assignment.
    let mut lines = out.lines().skip_while(|l| !l.starts_with("GROUP"));
    let names: Vec<&str> = lines.next().unwrap_or_default().split_whitespace().collect();
    let values: Vec<&str> = lines.next().unwrap_or_default().split_whitespace().collect();
    assert!(names.len() == 9 && values.len() > 8, "{out}");
    let row: BTreeMap<String, String> = names[..8]
        .iter()
        .zip(&values)
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect();
    let m = &streams["members"][0];
    let text = |v: &serde_json::Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
    assert_eq!(
        (
            text(&streams["assignment_epoch"]),
            text(&streams["topology_epoch"]),
            text(&m["member_id"]),
            text(&m["tasks"]["member_epoch"]),
            text(&m["tasks"]["process_id"]),
            text(&m["client_id"]),
        ),
        (
            row["TARGET-ASSIGNMENT-EPOCH"].clone(),
            row["TOPOLOGY-EPOCH"].clone(),
            row["MEMBER"].clone(),
            row["MEMBER-EPOCH"].clone(),
            row["PROCESS"].clone(),
            row["CLIENT-ID"].clone(),
        ),
        "{out}"
    );
    let active: Vec<String> = m["tasks"]["active"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let parts: Vec<String> = t[1].as_array().unwrap().iter().map(|p| p.to_string()).collect();
            format!("{}:[{}]", text(&t[0]), parts.join(","))
        })
        .collect();
    let assignments = values[8..].join(" ");
    assert!(
        assignments.starts_with(&format!("ACTIVE: {};", active.join("; "))),
        "{active:?} in {out}"
    );

    // The group's page: its type, topic roles, topology and tasks.
    let browser = support::browser::Browser::start(1400, 1100).await;
    browser.open(&format!("{api}/groups/apache-kafka/{app}")).await;
    browser
        .wait_until(
            "the streams application",
            "return document.body.innerText.includes('Sub-topologies (2)')",
        )
        .await;
    browser.check_page("kafka-streams-group").await;
    browser
        .eval("document.getElementById('streams').scrollIntoView(); return true")
        .await;
    browser.screenshot("kafka-streams-group-topology").await;
    let page = browser.text("main").await;
    for expected in [
        "streams group",
        "(repartition)",
        changelogs[0],
        &active.join("; "),
        &text(&m["tasks"]["process_id"]),
    ] {
        assert!(page.contains(expected), "{expected:?} not on the page: {page}");
    }

    // Stopped, and 7 records more: the lag per partition as the tool's.
    running.close();
    let producer: rdkafka::producer::FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &b)
        .create()
        .unwrap();
    for i in 0..7 {
        let record = rdkafka::producer::FutureRecord::<str, str>::to(&input)
            .partition(i % 2)
            .payload("late");
        producer.send(record, std::time::Duration::from_secs(10)).await.unwrap();
    }
    let detail = streamsight_testkit::http::wait_for_json(&http, &url, 60, "7 records of lag", |v| {
        let rows = v["partitions"].as_array().cloned().unwrap_or_default();
        rows.iter()
            .filter_map(|r| r["lag"]["lag_messages"].as_i64())
            .sum::<i64>()
            == 7
    })
    .await;
    // Kafka's own tool says nothing of a stopped application's lag ("Streams
    // group '…' has no active members"; kafka-consumer-groups.sh: "not a
    // consumer group"): the truth is the broker's commits (OffsetFetch) and
    // log ends (ListOffsets), read with librdkafka.
    let (ok, out, _) = kafka_tool(
        tool,
        &["--bootstrap-server", &b, "--describe", "--group", &app, "--offsets"],
    );
    assert!(
        ok && tool_table(&out, "GROUP").is_empty(),
        "Kafka's tool now shows it: {out}"
    );
    let by_kafka = lag_by_the_broker(&b, &app, &[&input, &repartition]);
    let by_streamsight: BTreeMap<(String, i64), i64> = detail["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                (
                    r["topic"].as_str().unwrap().to_owned(),
                    r["partition"].as_i64().unwrap(),
                ),
                r["lag"]["lag_messages"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(by_streamsight, by_kafka, "{out}");
    assert_eq!(detail["polled"]["state"], "Empty", "{detail:#}");
    let burrow =
        streamsight_testkit::http::get_json(&http, &format!("{api}/v3/kafka/apache-kafka/consumer/{app}/status")).await;
    assert_eq!(
        (
            &burrow["status"]["streamsight"]["group_type"],
            &burrow["status"]["totallag"]
        ),
        (&serde_json::json!("streams"), &serde_json::json!(7)),
        "{burrow:#}"
    );
    let alert = streamsight_testkit::eventually(60, "streams_behind firing", async || {
        let all = streamsight_testkit::http::get_json(&http, &format!("{api}/api/v1/alerts")).await;
        all["alerts"]
            .as_array()?
            .iter()
            .find(|a| a["rule"] == "streams_behind" && a["state"] == "firing")
            .cloned()
    })
    .await;
    assert_eq!(
        (&alert["labels"]["group"], &alert["value"]),
        (&serde_json::json!(app), &serde_json::json!(7.0)),
        "{alert:#}"
    );
    let metrics = streamsight_testkit::http::get_text(&http, &format!("{api}/metrics")).await;
    let info = format!(
        "streamsight_group_info{{cluster_name=\"apache-kafka\",group=\"{app}\",group_type=\"streams\",state=\"Empty\"}}"
    );
    assert_eq!(streamsight_testkit::http::sample(&metrics, &info), Some(1.0), "{info}");
}

/// The lag of `group` on every partition of `topics` as the broker holds it:
/// log end (ListOffsets) minus committed offset (OffsetFetch), by (topic,
/// partition), for partitions with a commit.
fn lag_by_the_broker(bootstrap: &str, group: &str, topics: &[&str]) -> BTreeMap<(String, i64), i64> {
    use rdkafka::consumer::Consumer;
    let c: rdkafka::consumer::BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .create()
        .unwrap();
    let timeout = std::time::Duration::from_secs(10);
    let mut asked = rdkafka::TopicPartitionList::new();
    for t in topics {
        let metadata = c.fetch_metadata(Some(t), timeout).unwrap();
        for p in metadata.topics()[0].partitions() {
            asked.add_partition(t, p.id());
        }
    }
    let committed = c.committed_offsets(asked, timeout).unwrap();
    committed
        .elements()
        .iter()
        .filter_map(|e| {
            let rdkafka::Offset::Offset(at) = e.offset() else {
                return None;
            };
            let (_, end) = c.fetch_watermarks(e.topic(), e.partition(), timeout).unwrap();
            Some(((e.topic().to_owned(), i64::from(e.partition())), end - at))
        })
        .collect()
}
