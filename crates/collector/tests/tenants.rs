//! Two tenants that use the same names: each one's keys see its own data on
//! every endpoint, and nothing of the other's in any answer, error or metric.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::{SystemTime, UNIX_EPOCH};
use streamsight_collector::auth::{KeyFile, Scope, generate};
use streamsight_collector::config::TenantConfig;
use streamsight_collector::{ServeConfig, serve};
use streamsight_core::EngineConfig;
use streamsight_wire::dsm::payload::{Backlog, Bucket, Payload, StatsPoint, encode};
use streamsight_wire::dsm::sketch::Mapping;

/// Every route the API's routers declare, read from their source so that a
/// route added later is walked without editing this test; path parameters
/// filled with names both tenants use.
fn endpoints() -> Vec<String> {
    let sources = [
        include_str!("../../api/src/lib.rs"),
        include_str!("../../api/src/burrow.rs"),
        include_str!("../../alerts/src/api.rs"),
        include_str!("../../dashboard/src/lib.rs"),
        include_str!("../../journeys/src/api.rs"),
    ];
    let mut routes: Vec<String> = sources
        .iter()
        .flat_map(|src| src.split(".route(\"").skip(1))
        .filter_map(|rest| rest.split('"').next())
        .map(|route| {
            route
                .replace("{cluster}", "prod")
                .replace("{group}", "billing")
                .replace("{topic}", "orders")
                .replace("{name}", "billing")
                .replace("{id}", "billing")
                .replace("{trace_id}", "0af7651916cd43dd8448eb211c80319c")
        })
        .collect();
    routes.sort();
    routes.dedup();
    assert!(routes.len() >= 20, "{routes:?}");
    routes
}

/// A fresh directory for one test.
fn test_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("streamsight-tenants-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A key for each (tenant, scope), saved to `dir/keys.json`, in order.
fn keys(dir: &std::path::Path, wanted: &[(&str, Scope)]) -> Vec<streamsight_collector::auth::NewKey> {
    let keys: Vec<_> = wanted.iter().map(|(t, s)| generate(t, *s, 0).unwrap()).collect();
    KeyFile {
        keys: keys.iter().map(|k| k.stored.clone()).collect(),
    }
    .save(&dir.join("keys.json"))
    .unwrap();
    keys
}

/// Tenants `team-a` and `team-b` with the keys in `dir`, on free loopback ports.
fn two_tenants(dir: &std::path::Path, storage: &str) -> ServeConfig {
    ServeConfig {
        keys_file: dir.join("keys.json"),
        tenants: ["team-a", "team-b"]
            .map(|n| TenantConfig {
                name: n.into(),
                ..TenantConfig::default()
            })
            .to_vec(),
        ..support::loopback(storage)
    }
}

/// The same topic, group and cluster with different offsets, plus a service and
/// a topic whose names (`NAME-svc`, `NAME-only-topic`) appear nowhere else.
fn payload(name: &str, produced: i64, committed: i64) -> Payload {
    let service = format!("{name}-svc");
    let only = format!("topic:{name}-only-topic");
    let ns = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64 - 30_000_000_000;
    let tags = |t: &[&str]| t.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    Payload {
        service,
        stats: vec![Bucket {
            start: ns,
            duration: 10_000_000_000,
            stats: vec![StatsPoint {
                hash: 7,
                edge_tags: tags(&["direction:out", "topic:orders", "type:kafka"]),
                pathway_latency: Mapping::default().encode(&[0.1]),
                edge_latency: Mapping::default().encode(&[0.1]),
                ..StatsPoint::default()
            }],
            backlogs: vec![
                Backlog {
                    tags: tags(&[
                        "type:kafka_produce",
                        "topic:orders",
                        "partition:0",
                        "kafka_cluster_id:prod",
                    ]),
                    value: produced,
                },
                Backlog {
                    tags: tags(&[
                        "type:kafka_commit",
                        "consumer_group:billing",
                        "topic:orders",
                        "partition:0",
                        "kafka_cluster_id:prod",
                    ]),
                    value: committed,
                },
                Backlog {
                    tags: vec![
                        "type:kafka_produce".into(),
                        only,
                        "partition:0".into(),
                        "kafka_cluster_id:prod".into(),
                    ],
                    value: 5,
                },
            ],
        }],
        ..Payload::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_sees_its_own_data_and_nothing_of_another_with_the_same_names() {
    let dir = test_dir("isolation");
    let [a_read, a_ingest, b_read, b_ingest]: [_; 4] = keys(
        &dir,
        &[
            ("team-a", Scope::Read),
            ("team-a", Scope::Ingest),
            ("team-b", Scope::Read),
            ("team-b", Scope::Ingest),
        ],
    )
    .try_into()
    .unwrap();
    let storage = format!("sqlite://{}/s.db", dir.display());
    let config = two_tenants(&dir, &storage);
    let running = serve(config, EngineConfig::default()).await.unwrap();
    let client = reqwest::Client::new();
    let intake = format!("http://{}/v0.1/pipeline_stats", running.intake_addr);
    for (key, p) in [
        (&a_ingest.token, payload("alpha", 1_111, 1_000)),
        (&b_ingest.token, payload("bravo", 777_777, 555_555)),
    ] {
        let resp = client
            .post(&intake)
            .bearer_auth(key)
            .header("Content-Type", "application/msgpack")
            .body(encode(&p))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 202);
    }
    // Each tenant has its own store file.
    assert!(dir.join("tenants/team-a.db").exists() && dir.join("tenants/team-b.db").exists());

    let api = format!("http://{}", running.api_addr);
    for (reader, own, other, row) in [
        (
            &a_read.token,
            ["alpha-svc", "alpha-only-topic"],
            ["bravo"],
            (1_112, 1_000),
        ),
        (
            &b_read.token,
            ["bravo-svc", "bravo-only-topic"],
            ["alpha"],
            (777_778, 555_555),
        ),
    ] {
        let lag: serde_json::Value = client
            .get(format!("{api}/api/v1/lag?topic=orders"))
            .bearer_auth(reader)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let rows = lag["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{lag}");
        assert_eq!(
            (rows[0]["end_offset"].as_i64(), rows[0]["committed_offset"].as_i64()),
            (Some(row.0), Some(row.1))
        );
        let mut seen_own = [false; 2];
        for path in endpoints() {
            let resp = client
                .get(format!("{api}{path}"))
                .bearer_auth(reader)
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let body = resp.text().await.unwrap();
            // 404: a name this tenant does not have; 403: admin-only (the audit
            // log); 405: a route for changes only (ending a silence); 400: a
            // route that needs a query (journeys by offset).
            assert!(matches!(status, 200 | 400 | 403 | 404 | 405), "{path}: {status} {body}");
            for secret in other {
                assert!(!body.contains(secret), "{path} shows another tenant's {secret}: {body}");
            }
            for (i, mine) in own.iter().enumerate() {
                seen_own[i] |= body.contains(mine);
            }
        }
        assert_eq!(seen_own, [true, true], "a tenant's own data is visible to it");
    }
    // The default tenant (no key needed only for probes) holds none of it.
    let lag = client.get(format!("{api}/api/v1/lag")).send().await.unwrap();
    assert_eq!(lag.status().as_u16(), 401);
    // A restart keeps each tenant's data in its own store.
    running.shutdown().await;
    let config = two_tenants(&dir, &storage);
    let running = serve(config, EngineConfig::default()).await.unwrap();
    let body = client
        .get(format!("http://{}/api/v1/lag", running.api_addr))
        .bearer_auth(&b_read.token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        body.contains("\"end_offset\":777778") && !body.contains("alpha"),
        "{body}"
    );
    running.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_over_its_rate_is_told_to_wait_and_the_other_is_not_and_a_trusted_gateway_names_tenants() {
    let dir = test_dir("rate");
    let [a, b]: [_; 2] = keys(&dir, &[("team-a", Scope::Ingest), ("team-b", Scope::Ingest)])
        .try_into()
        .unwrap();
    let start = |trusted: Vec<std::net::IpAddr>| {
        let mut config = ServeConfig {
            trusted_proxies: trusted,
            ..two_tenants(&dir, "memory://")
        };
        config.limits.ingest_records_per_second = 10;
        serve(config, EngineConfig::default())
    };
    let running = start(vec!["127.0.0.1".parse().unwrap()]).await.unwrap();
    let client = reqwest::Client::new();
    let intake = format!("http://{}/v0.1/pipeline_stats", running.intake_addr);
    let sixty = || {
        let mut p = payload("alpha", 10, 5);
        let b = p.stats[0].backlogs[0].clone();
        p.stats[0].backlogs = vec![b; 60];
        encode(&p)
    };
    let post = |key: String| {
        client
            .post(&intake)
            .bearer_auth(key)
            .header("Content-Type", "application/msgpack")
            .body(sixty())
            .send()
    };
    assert_eq!(
        post(a.token.clone()).await.unwrap().status().as_u16(),
        202,
        "a burst of 100"
    );
    let limited = post(a.token.clone()).await.unwrap();
    assert_eq!(limited.status().as_u16(), 429);
    let retry: u64 = limited.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=6).contains(&retry), "{retry}");
    assert_eq!(
        post(b.token.clone()).await.unwrap().status().as_u16(),
        202,
        "B has its own rate"
    );

    // From a trusted gateway, X-Scope-OrgID names the tenant of a keyless request.
    let api = format!("http://{}/api/v1/lag?topic=orders", running.api_addr);
    let as_b = client.get(&api).header("X-Scope-OrgID", "team-b").send().await.unwrap();
    assert_eq!(as_b.status().as_u16(), 200);
    let unknown = client.get(&api).header("X-Scope-OrgID", "team-z").send().await.unwrap();
    assert_eq!(unknown.status().as_u16(), 401);
    running.shutdown().await;
    // From anyone else, the header is ignored.
    let running = start(Vec::new()).await.unwrap();
    let api = format!("http://{}/api/v1/lag", running.api_addr);
    let ignored = client.get(&api).header("X-Scope-OrgID", "team-b").send().await.unwrap();
    assert_eq!(ignored.status().as_u16(), 401);
    running.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

mod random_names {
    use super::*;
    use proptest::prelude::*;

    /// Names as clients send them: any printable text, quotes and unicode
    /// included, up to Kafka's 249 bytes.
    fn name() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9._\\-\"'<>&é☃ ]{1,40}".prop_filter("not blank", |s| !s.trim().is_empty())
    }

    fn payload_named(topic: &str, group: &str, marker: &str, produced: i64) -> Payload {
        let tags = |t: &[String]| t.to_vec();
        Payload {
            service: marker.into(),
            stats: vec![Bucket {
                start: SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64 - 30_000_000_000,
                duration: 10_000_000_000,
                stats: vec![],
                backlogs: vec![
                    Backlog {
                        tags: tags(&[
                            "type:kafka_produce".into(),
                            format!("topic:{topic}"),
                            "partition:0".into(),
                            "kafka_cluster_id:prod".into(),
                        ]),
                        value: produced,
                    },
                    Backlog {
                        tags: tags(&[
                            "type:kafka_commit".into(),
                            format!("consumer_group:{group}"),
                            format!("topic:{topic}"),
                            "partition:0".into(),
                            "kafka_cluster_id:prod".into(),
                        ]),
                        value: produced / 2,
                    },
                ],
            }],
            ..Payload::default()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(12))]

        #[test]
        fn tenants_sharing_any_names_see_only_their_own(topic in name(), group in name()) {
            let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
            runtime.block_on(async {
                let dir = test_dir("prop");
                let keys = keys(&dir, &[("team-a", Scope::Admin), ("team-b", Scope::Admin)]);
                let config = two_tenants(&dir, "memory://");
                let running = serve(config, EngineConfig::default()).await.unwrap();
                let client = reqwest::Client::new();
                let intake = format!("http://{}/v0.1/pipeline_stats", running.intake_addr);
                for (key, marker, offset) in [(&keys[0].token, "svc-a", 1_001), (&keys[1].token, "svc-b", 2_002)] {
                    let resp = client
                        .post(&intake)
                        .bearer_auth(key)
                        .header("Content-Type", "application/msgpack")
                        .body(encode(&payload_named(&topic, &group, marker, offset)))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(resp.status().as_u16(), 202);
                }
                let api = format!("http://{}", running.api_addr);
                // The names are the same: only the offsets tell the tenants apart.
                for (key, mine, theirs) in [(&keys[0].token, 1_002, 2_003), (&keys[1].token, 2_003, 1_002)] {
                    let lag: serde_json::Value = client.get(format!("{api}/api/v1/lag")).bearer_auth(key).send().await.unwrap().json().await.unwrap();
                    let rows = lag["rows"].as_array().unwrap();
                    assert_eq!(rows.len(), 1, "{lag}");
                    assert_eq!(rows[0]["end_offset"].as_i64(), Some(mine));
                    let metrics = client.get(format!("{api}/metrics")).bearer_auth(key).send().await.unwrap().text().await.unwrap();
                    let end_offsets: Vec<&str> = metrics.lines().filter(|l| l.starts_with("kafka_partition_latest_offset{")).collect();
                    assert_eq!(end_offsets.len(), 1, "{metrics}");
                    assert!(end_offsets[0].ends_with(&format!(" {mine}")) && !end_offsets[0].ends_with(&format!(" {theirs}")));
                }
                running.shutdown().await;
                let _ = std::fs::remove_dir_all(&dir);
            });
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tenant_holding_every_place_in_flight_does_not_block_another() {
    use tokio::io::AsyncWriteExt;
    let dir = test_dir("flight");
    let [a, b]: [_; 2] = keys(&dir, &[("team-a", Scope::Ingest), ("team-b", Scope::Ingest)])
        .try_into()
        .unwrap();
    let mut config = two_tenants(&dir, "memory://");
    config.limits.max_in_flight = 2;
    config.limits.request_timeout = std::time::Duration::from_secs(20);
    let running = serve(config, EngineConfig::default()).await.unwrap();
    let addr = running.intake_addr.to_string();
    // Tenant A's two places, held by bodies that never finish.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let head = format!(
            "POST /v0.1/pipeline_stats HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/msgpack\r\nContent-Length: 100\r\n\r\nab",
            a.token
        );
        s.write_all(head.as_bytes()).await.unwrap();
        held.push(s);
    }
    let client = reqwest::Client::new();
    let url = format!("http://{addr}/v0.1/pipeline_stats");
    let post = |key: &str| {
        client
            .post(&url)
            .bearer_auth(key)
            .header("Content-Type", "application/msgpack")
            .body(encode(&payload("x", 10, 5)))
            .send()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while post(&a.token).await.unwrap().status().as_u16() != 503 {
        assert!(std::time::Instant::now() < deadline, "A was never refused");
    }
    assert_eq!(
        post(&b.token).await.unwrap().status().as_u16(),
        202,
        "B has its own places"
    );
    drop(held);
    running.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_listeners_bound_to_tenants_take_keyless_tracers_over_tcp_and_unix_sockets() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = test_dir("bound");
    let [a, b]: [_; 2] = keys(&dir, &[("team-a", Scope::Read), ("team-b", Scope::Read)])
        .try_into()
        .unwrap();
    let socket = dir.join("team-a.sock");
    let config = ServeConfig {
        intake_listeners: vec![
            streamsight_collector::config::BoundIntake {
                listen: format!("unix:{}", socket.display()),
                tenant: "team-a".into(),
            },
            streamsight_collector::config::BoundIntake {
                listen: "127.0.0.1:0".into(),
                tenant: "team-b".into(),
            },
        ],
        ..two_tenants(&dir, "memory://")
    };
    let running = serve(config, EngineConfig::default()).await.unwrap();
    // Team A's tracer over the Unix socket, no key.
    let body = encode(&payload("alpha", 1_111, 1_000));
    let mut unix = tokio::net::UnixStream::connect(&socket).await.unwrap();
    let head = format!(
        "POST /v0.1/pipeline_stats HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/msgpack\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    unix.write_all(head.as_bytes()).await.unwrap();
    unix.write_all(&body).await.unwrap();
    let mut answer = String::new();
    unix.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
    // Team B's over its TCP listener, no key.
    let client = reqwest::Client::new();
    let resp = client
        .post(format!("http://{}/v0.1/pipeline_stats", running.bound_intakes[1]))
        .header("Content-Type", "application/msgpack")
        .body(encode(&payload("bravo", 777_777, 555_555)))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 202);
    // The main intake still asks for a key.
    let resp = client
        .post(format!("http://{}/v0.1/pipeline_stats", running.intake_addr))
        .header("Content-Type", "application/msgpack")
        .body(encode(&payload("x", 1, 1)))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    for (key, end) in [(&a.token, 1_112), (&b.token, 777_778)] {
        let lag: serde_json::Value = client
            .get(format!("http://{}/api/v1/lag?topic=orders", running.api_addr))
            .bearer_auth(key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(lag["rows"][0]["end_offset"].as_i64(), Some(end), "{lag}");
    }
    running.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A refused key is counted for its own team: `team-b`'s read keys see the
/// refusals of `team-b`'s keys by key id on their `/metrics`, and `team-a`
/// and `default` see none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_counted_for_the_tenant_of_the_key_named_by_its_id() {
    let dir = test_dir("refusals");
    let [a_read, b_read, b_ingest, b_gone]: [_; 4] = keys(
        &dir,
        &[
            ("team-a", Scope::Read),
            ("team-b", Scope::Read),
            ("team-b", Scope::Ingest),
            ("team-b", Scope::Read),
        ],
    )
    .try_into()
    .unwrap();
    let mut file = KeyFile::load(&dir.join("keys.json")).unwrap();
    file.revoke(&b_gone.stored.id, 1).unwrap();
    file.save(&dir.join("keys.json")).unwrap();
    let running = serve(two_tenants(&dir, "memory://"), EngineConfig::default())
        .await
        .unwrap();
    let client = reqwest::Client::new();
    let api = format!("http://{}", running.api_addr);
    let get = |path: &str, key: &str| client.get(format!("{api}{path}")).bearer_auth(key.to_owned()).send();
    // A revoked key of team-b's, twice; an ingest key of team-b's reading; a
    // key id nobody ever made (never a label).
    for _ in 0..2 {
        assert_eq!(get("/api/v1/lag", &b_gone.token).await.unwrap().status(), 401);
    }
    assert_eq!(get("/api/v1/lag", &b_ingest.token).await.unwrap().status(), 403);
    assert_eq!(get("/api/v1/lag", "ssk_0123456789ab_00").await.unwrap().status(), 401);
    let metrics = |key: &str| {
        let key = key.to_owned();
        let url = format!("{api}/metrics");
        let client = client.clone();
        async move {
            client
                .get(url)
                .bearer_auth(key)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
    let b = metrics(&b_read.token).await;
    let gone = format!(
        "streamsight_refusals_total{{listener=\"api\",kind=\"unauthorized\",key_id=\"{}\"}} 2",
        b_gone.stored.id
    );
    let ingest = format!(
        "streamsight_refusals_total{{listener=\"api\",kind=\"forbidden\",key_id=\"{}\"}} 1",
        b_ingest.stored.id
    );
    assert!(b.contains(&gone) && b.contains(&ingest), "{b}");
    let a = metrics(&a_read.token).await;
    assert!(
        !a.contains(&b_gone.stored.id) && !a.contains(&b_ingest.stored.id),
        "{a}"
    );
    assert!(!a.contains("0123456789ab") && !b.contains("0123456789ab"));
    // The made-up id is counted where unnamed refusals go: `default`, unlabelled.
    let default = running.shared.telemetry.refusals("api", "unauthorized");
    assert_eq!(default, 1);
    running.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}
