//! Acting on a group (`streamsight groups reset`, `POST …/reset`) against
//! Apache Kafka and tansu (one body each), with real confluent-kafka consumers
//! (classic, and on Apache Kafka KIP-848's `consumer` protocol too): a live member blocks a reset and
//! is named; the dry run says what would be skipped or read again; after
//! `--execute` a restarted consumer reads from the target; through a collector
//! the reset needs an admin key and is recorded as the group's own.
#![allow(clippy::unwrap_used)]

mod support;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::Value;
use std::time::{Duration, Instant};
use streamsight_testkit::http::{get_json, keyed_client, wait_for_json};
use streamsight_testkit::{Tansu, TestBroker, Watchdog, on_every_broker};
use support::Member;

fn reset(args: &[&str]) -> (bool, String, String) {
    let mut all = vec!["groups", "reset"];
    all.extend_from_slice(args);
    support::run(&all)
}

fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// The plan's partition `p` of `orders`.
fn part(answer: &Value, p: i64) -> &Value {
    answer["plan"]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["partition"] == p)
        .unwrap_or_else(|| panic!("no partition {p} in {answer}"))
}

/// Polls the dry run until the group has no members, with a deadline.
fn until_empty(bootstrap: &str, group: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (ok, out, err) = reset(&[
            "--bootstrap-server",
            bootstrap,
            "--group",
            group,
            "--to-latest",
            "--format",
            "json",
        ]);
        assert!(ok, "{err}");
        if json(&out)["would_refuse"].is_null() {
            return;
        }
        assert!(Instant::now() < deadline, "the group kept members: {out}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

on_every_broker!(a_live_member_blocks_a_reset_and_a_restarted_consumer_reads_from_the_target);

/// The same with a KIP-848 member (`group.protocol=consumer`: the broker
/// assigns, and describes the group with ConsumerGroupDescribe).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_kip_848_member_blocks_a_reset_on_apache_kafka() {
    live_member_blocks_a_reset(TestBroker::apache_kafka(), "consumer", Client::Python).await;
}

async fn a_live_member_blocks_a_reset_and_a_restarted_consumer_reads_from_the_target(broker: TestBroker) {
    live_member_blocks_a_reset(broker, "classic", Client::Python).await;
}

/// Apache Kafka's own Java client as the member, with each protocol.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_java_member_blocks_a_reset_on_apache_kafka() {
    live_member_blocks_a_reset(TestBroker::apache_kafka(), "classic", Client::Java).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_java_kip_848_member_blocks_a_reset_on_apache_kafka() {
    live_member_blocks_a_reset(TestBroker::apache_kafka(), "consumer", Client::Java).await;
}

/// Which real client a member is.
#[derive(Clone, Copy)]
enum Client {
    /// confluent-kafka (librdkafka), `tests/python/group_member.py`.
    Python,
    /// Apache Kafka's kafka-clients, `harness/java-clients`.
    Java,
}

impl Client {
    fn join(self, b: &str, topic: &str, group: &str, id: &str, count: usize, protocol: &str) -> Member {
        match self {
            Client::Python => Member::join_with(b, topic, group, id, count, protocol),
            Client::Java => Member::java(b, topic, group, id, count, protocol),
        }
    }
}

async fn live_member_blocks_a_reset(broker: TestBroker, protocol: &str, client: Client) {
    let _watchdog = Watchdog::arm("the reset test", Duration::from_secs(300));
    let b = broker.bootstrap.as_str();
    let (orders, billing) = (broker.name("orders"), broker.name("billing"));
    let (orders, billing) = (orders.as_str(), billing.as_str());
    support::fill_topic(b, orders, 2, 20).await;
    let member = client.join(b, orders, billing, "billing-py-1", 10, protocol);
    member.until("read 10");

    // The dry run names what would happen, and that the member blocks it.
    let (ok, out, err) = reset(&[
        "--bootstrap-server",
        b,
        "--group",
        billing,
        "--to-latest",
        "--format",
        "json",
    ]);
    assert!(ok, "{err}");
    let plan = json(&out);
    assert_eq!(plan["dry_run"], true);
    // The member read 10 records, from one partition or both.
    let committed: Vec<Option<i64>> = (0..2).map(|p| part(&plan, p)["committed"].as_i64()).collect();
    assert_eq!(committed.iter().flatten().sum::<i64>(), 10, "{plan}");
    let skip: i64 = committed.iter().flatten().map(|c| 20 - c).sum();
    assert_eq!(plan["plan"]["skip"], skip, "{plan}");
    let refusal = plan["would_refuse"].as_str().unwrap();
    assert!(
        refusal.contains("live member") && refusal.contains("billing-py-1"),
        "{refusal}"
    );
    // The table says the same to a person, with the records' times.
    let (ok, table, _) = reset(&["--bootstrap-server", b, "--group", billing, "--to-latest"]);
    assert!(ok);
    assert!(
        table.contains(&format!("{skip} offset(s) skipped")) && table.contains("would be refused"),
        "{table}"
    );
    assert!(table.contains("RECORDS WRITTEN") && table.contains("Z .. "), "{table}");

    // Executing while the member lives is refused, naming it; nothing moves.
    let (ok, _, err) = reset(&["--bootstrap-server", b, "--group", billing, "--to-latest", "--execute"]);
    assert!(!ok);
    assert!(err.contains("live member") && err.contains("billing-py-1"), "{err}");

    member.close();
    until_empty(b, billing);

    // One partition forward to 15, one the group committed 5 or more on back by 5.
    let back = (0..2).find(|&p| committed[p as usize].is_some_and(|c| c >= 5)).unwrap();
    let forward = 1 - back;
    let (fwd, bck) = (format!("{orders}:{forward}"), format!("{orders}:{back}"));
    let (ok, out, err) = reset(&[
        "--bootstrap-server",
        b,
        "--group",
        billing,
        "--topic",
        &fwd,
        "--to-offset",
        "15",
        "--execute",
        "--format",
        "json",
    ]);
    assert!(ok, "{err}");
    let done = json(&out);
    assert_eq!(
        (done["executed"].as_bool(), part(&done, forward)["target"].as_i64()),
        (Some(true), Some(15))
    );
    let (ok, out, err) = reset(&[
        "--bootstrap-server",
        b,
        "--group",
        billing,
        "--topic",
        &bck,
        "--shift-by",
        "-5",
        "--execute",
        "--format",
        "json",
    ]);
    assert!(ok, "{err}");
    let moved = json(&out);
    let pb = part(&moved, back);
    let target = pb["target"].as_i64().unwrap();
    assert_eq!(target, committed[back as usize].unwrap() - 5);
    assert_eq!(
        (pb["reread"].as_i64(), pb["skip"].as_i64()),
        (Some(5), Some(0)),
        "{moved}"
    );

    // A consumer started afresh reads from the targets.
    let again = Member::join_with(
        b,
        orders,
        billing,
        "billing-py-2",
        (20 - 15 + 20 - target) as usize,
        protocol,
    );
    let lines = again.until("read");
    assert!(lines.contains(&format!("first {forward} 15")), "{lines:?}");
    assert!(lines.contains(&format!("first {back} {target}")), "{lines:?}");
    again.close();

    // By time, on the broker's ListOffsets: an hour ago is before every record
    // (the log start), a time to come is past the last (the end).
    let (ok, out, err) = reset(&[
        "--bootstrap-server",
        b,
        "--group",
        billing,
        "--to-time",
        "-1h",
        "--format",
        "json",
    ]);
    assert!(ok, "{err}");
    let earlier = json(&out);
    assert!((0..2).all(|p| part(&earlier, p)["target"] == 0), "{earlier}");
    let (ok, out, err) = reset(&[
        "--bootstrap-server",
        b,
        "--group",
        billing,
        "--to-time",
        "2099-01-01T00:00:00Z",
        "--format",
        "json",
    ]);
    assert!(ok, "{err}");
    let later = json(&out);
    assert!((0..2).all(|p| part(&later, p)["target"] == 20), "{later}");

    // Mistakes get their reason.
    let (ok, _, err) = reset(&[
        "--bootstrap-server",
        b,
        "--group",
        billing,
        "--topic",
        "nope",
        "--to-latest",
    ]);
    assert!(!ok && err.contains("no topic nope"), "{err}");
    let (ok, _, err) = reset(&[
        "--bootstrap-server",
        b,
        "--group",
        billing,
        "--topic",
        &format!("{orders}:7"),
        "--to-latest",
    ]);
    assert!(!ok && err.contains("no partition 7"), "{err}");
    let (ok, _, err) = reset(&["--bootstrap-server", b, "--group", billing]);
    assert!(!ok && err.contains("--to-"), "{err}");
}

on_every_broker!(a_reset_through_the_collector_needs_an_admin_key_and_is_recorded_as_the_groups_own);

async fn a_reset_through_the_collector_needs_an_admin_key_and_is_recorded_as_the_groups_own(broker: TestBroker) {
    let _watchdog = Watchdog::arm("the collector reset test", Duration::from_secs(300));
    let b = broker.bootstrap.clone();
    let cluster = broker.label();
    let (orders, audit, cards) = (broker.name("orders"), broker.name("audit"), broker.name("cards"));
    let (orders, audit, cards) = (orders.as_str(), audit.as_str(), cards.as_str());
    support::fill_topic(&b, orders, 2, 20).await;
    support::seed_commits(&b, orders, audit, &[4, 6]);

    let dir = std::env::temp_dir().join(broker.name("streamsight-act"));
    std::fs::create_dir_all(&dir).unwrap();
    let keys = dir.join("keys.json");
    let _ = std::fs::remove_file(&keys);
    let keys_file = keys.to_str().unwrap();
    let create = |scope: &str| support::create_key(keys_file, scope);
    let (read, admin) = (create("read"), create("admin"));
    let payloads = create("payloads");
    let avsc = dir.join("card.avsc");
    std::fs::write(&avsc, CARD_AVRO).unwrap();
    let proto = dir.join("card.proto");
    std::fs::write(&proto, CARD_PROTO).unwrap();
    let toml = format!(
        "[serve]\nkeys_file = {keys_file:?}\n[serve.records]\nredact = [\"card.number\"]\navro_schemas = {{ \"7\" = {avsc:?} }}\nprotobuf_schemas = {{ \"8\" = {proto:?} }}\n[[serve.clusters]]\nname = {cluster:?}\nbootstrap = [{b:?}]\npoll_interval = \"1s\"\n"
    );
    let (_serve, api) = support::serve_with_config("act", &toml);
    let cli = |key: &str, args: &[&str]| {
        let mut all = vec![
            "groups",
            "reset",
            "--collector",
            &api,
            "--cluster",
            cluster,
            "--group",
            audit,
        ];
        all.extend_from_slice(args);
        support::run_keyed(&all, key)
    };

    // A read key may see the plan, not execute it.
    let (ok, out, err) = cli(&read, &["--to-latest", "--format", "json"]);
    assert!(ok, "{err}");
    assert_eq!(json(&out)["plan"]["skip"], 30);
    let (ok, _, err) = cli(&read, &["--to-latest", "--execute"]);
    assert!(!ok && err.contains("403") && err.contains("admin"), "{err}");

    // An admin executes; the collector records it.
    let (ok, out, err) = cli(&admin, &["--to-latest", "--execute"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("recorded by the collector as the group's own reset"),
        "{out}"
    );
    let (as_read, as_admin) = (keyed_client(&read), keyed_client(&admin));
    let audit_log = get_json(&as_admin, &format!("{api}/api/v1/audit")).await;
    let event = audit_log["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["event"])
        .find(|e| e["action"] == "offsets_reset")
        .unwrap_or_else(|| panic!("no reset in the audit log: {audit_log}"));
    assert_eq!(
        (event["group"].as_str(), event["skipped"].as_i64()),
        (Some(audit), Some(30))
    );
    assert_eq!(event["moved"].as_array().unwrap().len(), 2);

    // The engine holds the group at its new position, caught up, not a rewind.
    let lag = wait_for_json(
        &as_read,
        &format!("{api}/api/v1/lag?group={audit}"),
        60,
        "the group at the log end",
        |v| {
            v["rows"]
                .as_array()
                .is_some_and(|rows| rows.len() == 2 && rows.iter().all(|r| r["lag_messages"] == 0))
        },
    )
    .await;
    let rows = lag["rows"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["status"] != "rewind"), "{rows:?}");
    // Moved back by an administrator straight on the cluster, the group
    // (nobody in it) is behind and nothing reads: a stop, never "consuming".
    let (ok, _, err) = reset(&["--bootstrap-server", &b, "--group", audit, "--to-earliest", "--execute"]);
    assert!(ok, "{err}");
    let stopped = wait_for_json(
        &as_read,
        &format!("{api}/api/v1/lag?group={audit}"),
        60,
        "the empty group behind, stopped",
        |v| {
            v["rows"]
                .as_array()
                .is_some_and(|rows| rows.len() == 2 && rows.iter().all(|r| r["lag_messages"] == 20))
        },
    )
    .await;
    for r in stopped["rows"].as_array().unwrap() {
        assert_eq!(r["status"], "stop", "{r}");
        assert!(r["no_members_since_ms"].is_i64(), "{r}");
    }

    // Only polled clusters; a body of the wrong shape is told so.
    let unknown = as_admin
        .post(format!("{api}/api/v1/groups/elsewhere/{audit}/reset"))
        .json(&serde_json::json!({ "to": "latest" }))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    assert!(unknown.text().await.unwrap().contains("unknown_cluster"));
    let bad = as_admin
        .post(format!("{api}/api/v1/groups/{cluster}/{audit}/reset"))
        .json(&serde_json::json!({ "to": "sideways" }))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);

    // A record: for payloads keys only, masked by the collector's rules.
    produce_card(&b, cards).await;
    let record = |key: &str, offset: i64| {
        let offset = offset.to_string();
        support::run_keyed(
            &[
                "record",
                "--collector",
                &api,
                "--cluster",
                cluster,
                "--topic",
                cards,
                "--partition",
                "0",
                "--offset",
                &offset,
                "--format",
                "json",
            ],
            key,
        )
    };
    let (ok, _, err) = record(&read, 0);
    assert!(!ok && err.contains("403") && err.contains("payloads"), "{err}");
    let (ok, out, err) = record(&payloads, 0);
    assert!(ok, "{err}");
    let r = json(&out);
    assert_eq!(r["value"]["json"]["card"]["number"], "***redacted***", "{r}");
    assert_eq!(r["value"]["json"]["card"]["holder"], "A. Lovelace", "{r}");
    assert_eq!(
        (r["key"]["encoding"].as_str(), r["key"]["text"].as_str()),
        (Some("text"), Some("order-1"))
    );
    assert_eq!(r["headers"][0][0], "trace-id", "{r}");
    assert_eq!(r["timestamp_type"], "create_time");
    let (ok, _, err) = record(&payloads, 99);
    assert!(!ok && err.contains("404") && err.contains("holds 0 to 3"), "{err}");
    // A negative offset, given either way, is refused naming the field.
    let (ok, _, err) = record(&payloads, -1);
    assert!(!ok && err.contains("offset -1: offsets are 0 or more"), "{err}");
    // A topic or partition that is not there is the user's 404, not the broker's failure.
    let elsewhere = |topic: &str, partition: &str| {
        support::run_keyed(
            &[
                "record",
                "--collector",
                &api,
                "--cluster",
                cluster,
                "--topic",
                topic,
                "--partition",
                partition,
                "--offset=0",
            ],
            &payloads,
        )
    };
    let (ok, _, err) = elsewhere("nosuch", "0");
    assert!(
        !ok && err.contains("404") && err.contains("has no topic nosuch"),
        "{err}"
    );
    let (ok, _, err) = elsewhere(cards, "7");
    assert!(!ok && err.contains("404") && err.contains("no partition 7"), "{err}");
    // Avro framed with a schema id the config names: decoded, then masked.
    let (ok, out, err) = record(&payloads, 2);
    assert!(ok, "{err}");
    let v = &json(&out)["value"];
    assert_eq!(
        (v["encoding"].as_str(), v["schema_id"].as_i64(), v["format"].as_str()),
        (Some("confluent"), Some(7), Some("avro")),
        "{v}"
    );
    assert_eq!(
        v["json"],
        serde_json::json!({"card": {"number": "***redacted***", "holder": "A. Lovelace"}, "amount": 12})
    );
    // The binary record: a bounded hex preview.
    let (ok, out, _) = record(&admin, 1);
    assert!(ok);
    assert_eq!(json(&out)["value"]["encoding"], "preview", "{out}");
    // Straight from the cluster, with the caller's own mask, laid out for a person.
    let (ok, out, err) = support::run(&[
        "record",
        "--bootstrap-server",
        &b,
        "--topic",
        cards,
        "--partition",
        "0",
        "--offset",
        "0",
        "--redact",
        "card.holder",
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains("\"holder\": \"***redacted***\"") && out.contains("4111111111111111"),
        "{out}"
    );
    assert!(
        out.contains("key: order-1") && out.contains("header trace-id: 4bf92f3577b34da6"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `cards`: a JSON record with a key and a header, then a binary one.
async fn produce_card(bootstrap: &str, cards: &str) {
    use rdkafka::message::{Header, OwnedHeaders};
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    for r in admin
        .create_topics(&[NewTopic::new(cards, 1, TopicReplication::Fixed(1))], &opts)
        .await
        .unwrap()
    {
        r.unwrap();
    }
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "0")
        .create()
        .unwrap();
    let value = r#"{"card":{"number":"4111111111111111","holder":"A. Lovelace"},"amount":12}"#;
    let headers = OwnedHeaders::new().insert(Header {
        key: "trace-id",
        value: Some("4bf92f3577b34da6"),
    });
    let first = FutureRecord::to(cards)
        .partition(0)
        .key("order-1")
        .payload(value)
        .headers(headers);
    producer.send(first, Duration::from_secs(5)).await.unwrap();
    let binary: &[u8] = &[0xff, 0x00, 0x13, 0x37];
    let second = FutureRecord::<(), _>::to(cards).partition(0).payload(binary);
    producer.send(second, Duration::from_secs(5)).await.unwrap();
    // Avro with the schema registry's framing, schema id 7 (CARD_AVRO).
    let schema = apache_avro::Schema::parse_str(CARD_AVRO).unwrap();
    let card = apache_avro::types::Value::Record(vec![
        ("number".into(), "4111111111111111".into()),
        ("holder".into(), "A. Lovelace".into()),
    ]);
    let datum = apache_avro::types::Value::Record(vec![
        ("card".into(), card),
        ("amount".into(), apache_avro::types::Value::Long(12)),
    ]);
    let mut framed = vec![0, 0, 0, 0, 7];
    framed.extend(
        apache_avro::writer::datum::GenericDatumWriter::builder(&schema)
            .build()
            .unwrap()
            .write_value_to_vec(datum)
            .unwrap(),
    );
    let third = FutureRecord::<(), _>::to(cards).partition(0).payload(&framed);
    producer.send(third, Duration::from_secs(5)).await.unwrap();
    // Protobuf with the registry's framing, schema id 8, message index [1]
    // (CARD_PROTO's Payment), its fields in Protobuf's wire format.
    let mut framed = vec![0, 0, 0, 0, 8, 2, 2];
    framed.extend_from_slice(b"\x0a\x03p-1");
    framed.extend_from_slice(b"\x12\x12\x0a\x104111111111111111");
    framed.extend_from_slice(b"\x18\x0c");
    let fourth = FutureRecord::<(), _>::to(cards).partition(0).payload(&framed);
    producer.send(fourth, Duration::from_secs(5)).await.unwrap();
}

/// The Protobuf schema of the fourth record of `cards`.
const CARD_PROTO: &str = "syntax = \"proto3\";\npackage shop;\nmessage Meta { string origin = 1; }\n\
    message Payment { string id = 1; Card card = 2; int64 amount = 3; message Card { string number = 1; } }\n";

/// The Avro schema of the third record of `cards`.
const CARD_AVRO: &str = r#"{"type":"record","name":"Payment","fields":[
    {"name":"card","type":{"type":"record","name":"Card","fields":[
        {"name":"number","type":"string"},{"name":"holder","type":"string"}]}},
    {"name":"amount","type":"long"}]}"#;

/// tansu's sqlite engine: DescribeGroups fails (the broker drops the
/// connection) and ListGroups says "unknown". A reset of a group with a live
/// confluent-kafka member is refused there, directly and through a collector,
/// with the broker's error in the refusal; the collector shows the membership
/// as unknown with its cause, never as "no members".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undescribed_group_is_never_reset_blind_and_its_membership_reads_unknown() {
    let _watchdog = Watchdog::arm("the blind reset test against tansu sqlite", Duration::from_secs(300));
    let dir = std::env::temp_dir().join(format!("streamsight-act-blind-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let broker = Tansu::start_on(support::free_port(), "sqlite://tansu.db", &dir, &[]);
    let b = broker.bootstrap.clone();
    support::fill_topic(&b, "orders", 2, 20).await;
    let member = Member::join(&b, "orders", "stuck", "stuck-py-1", 5);
    member.until("read 5");

    let (ok, out, err) = reset(&[
        "--bootstrap-server",
        &b,
        "--group",
        "stuck",
        "--topic",
        "orders:0",
        "--to-offset",
        "10",
        "--format",
        "json",
    ]);
    assert!(ok, "{err}");
    let refusal = json(&out)["would_refuse"].as_str().unwrap_or_default().to_owned();
    assert!(
        refusal.contains("unknown") && refusal.contains("nothing is reset blind") && refusal.contains("DescribeGroups"),
        "{out}"
    );
    let (ok, _, err) = reset(&[
        "--bootstrap-server",
        &b,
        "--group",
        "stuck",
        "--topic",
        "orders:0",
        "--to-offset",
        "10",
        "--execute",
    ]);
    assert!(!ok && err.contains("nothing is reset blind"), "{err}");

    // Through a collector polling it: refused the same; the group's
    // membership is unknown, with why.
    let toml = format!(
        "[[serve.clusters]]\nname = \"tansu\"\nbootstrap = [{b:?}]\ngroups = [\"stuck\"]\npoll_interval = \"500ms\"\n"
    );
    let (_serve, api) = support::serve_with_config("act-blind", &toml);
    let client = reqwest::Client::new();
    let clusters = wait_for_json(
        &client,
        &format!("{api}/api/v1/clusters"),
        60,
        "the group polled",
        |v| {
            v["clusters"]["tansu"]["last_poll"]["groups"]
                .as_array()
                .is_some_and(|g| g.iter().any(|g| g["group"] == "stuck"))
        },
    )
    .await;
    let group = clusters["clusters"]["tansu"]["last_poll"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == "stuck")
        .unwrap()
        .clone();
    assert!(group["members"].is_null(), "unknown is not none: {group}");
    assert!(
        group["error"].as_str().is_some_and(|e| e.contains("DescribeGroups")),
        "{group}"
    );
    let (ok, _, err) = support::run(&[
        "groups",
        "reset",
        "--collector",
        &api,
        "--cluster",
        "tansu",
        "--group",
        "stuck",
        "--topic",
        "orders:0",
        "--to-offset",
        "10",
        "--execute",
    ]);
    assert!(!ok && err.contains("nothing is reset blind"), "{err}");
    member.close();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Plans as a user reads them, on tansu's sqlite engine: the records a reset
/// skips are dated by their own times (written with explicit timestamps), not
/// the log's newest; a group that does not exist is said so (an error
/// without --topic, "creates it" with one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plans_date_what_they_skip_and_say_when_a_group_does_not_exist() {
    let _watchdog = Watchdog::arm("the plan test against tansu sqlite", Duration::from_secs(300));
    let dir = std::env::temp_dir().join(format!("streamsight-act-plans-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let broker = Tansu::start_on(support::free_port(), "sqlite://tansu.db", &dir, &[]);
    let b = broker.bootstrap.clone();
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new().set("bootstrap.servers", &b).create().unwrap();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    for r in admin
        .create_topics(&[NewTopic::new("dated", 1, TopicReplication::Fixed(1))], &opts)
        .await
        .unwrap()
    {
        r.unwrap();
    }
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &b)
        .set("linger.ms", "0")
        .create()
        .unwrap();
    let now_ms = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap();
    // 0-89 written 300 s ago, 90-94 200 s ago, 95-199 100 s ago.
    let (early, skipped, late) = (now_ms - 300_000, now_ms - 200_000, now_ms - 100_000);
    for i in 0..200 {
        let at = match i {
            0..90 => early,
            90..95 => skipped,
            _ => late,
        };
        let payload = format!("r{i}");
        producer
            .send(
                FutureRecord::<(), _>::to("dated")
                    .partition(0)
                    .payload(&payload)
                    .timestamp(at),
                Duration::from_secs(10),
            )
            .await
            .unwrap();
    }
    support::seed_commits(&b, "dated", "dates", &[90]);
    let (ok, out, err) = reset(&[
        "--bootstrap-server",
        &b,
        "--group",
        "dates",
        "--topic",
        "dated:0",
        "--to-offset",
        "95",
        "--format",
        "json",
    ]);
    assert!(ok, "{err}");
    let plan = json(&out);
    let p = part(&plan, 0);
    assert_eq!(p["skip"], 5, "{plan}");
    assert_eq!(
        (p["first_time_ms"].as_i64(), p["last_time_ms"].as_i64()),
        (Some(skipped), Some(skipped)),
        "{plan}"
    );
    let (_, table, _) = reset(&[
        "--bootstrap-server",
        &b,
        "--group",
        "dates",
        "--topic",
        "dated:0",
        "--to-offset",
        "95",
    ]);
    assert!(table.contains(" ago"), "times carry their age: {table}");
    assert!(!table.contains(&skipped.to_string()), "no raw milliseconds: {table}");

    // A group nobody made.
    let (ok, _, err) = reset(&["--bootstrap-server", &b, "--group", "nosuch", "--to-latest"]);
    assert!(!ok && err.contains("group nosuch does not exist"), "{err}");
    let (ok, out, err) = reset(&[
        "--bootstrap-server",
        &b,
        "--group",
        "nosuch",
        "--topic",
        "dated",
        "--to-latest",
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("does not exist") && out.contains("creates it"), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Through a collector `--cluster` is needed; left out, the error says it is
/// missing and how to name it, before anything is asked.
#[test]
fn leaving_out_the_cluster_is_said_missing() {
    let (ok, _, err) = reset(&["--group", "g", "--to-latest"]);
    assert!(!ok && err.contains("missing --cluster"), "{err}");
    let (ok, _, err) = support::run(&["record", "--topic", "t", "--partition", "0", "--offset", "0"]);
    assert!(!ok && err.contains("missing --cluster"), "{err}");
    // A negative target is the request's mistake, named, not clap's "unexpected argument".
    let (ok, _, err) = reset(&["--group", "g", "--cluster", "c", "--to-offset", "-5"]);
    assert!(!ok && err.contains("offset -5: offsets are 0 or more"), "{err}");
}
