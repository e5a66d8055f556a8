//! API keys over real HTTP: scopes, the probes left open, a listener bound to a
//! tenant for tracers that cannot send a key, revocation from the next reload,
//! and the refusal to serve a non-loopback address without keys.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};
use streamsight_collector::auth::{KeyFile, Scope, generate};
use streamsight_collector::{ServeConfig, ServeError, serve};
use streamsight_core::EngineConfig;
use streamsight_wire::dsm::payload::{Payload, encode};

fn config(keys_file: std::path::PathBuf) -> ServeConfig {
    ServeConfig {
        keys_file,
        ..support::loopback("memory://")
    }
}

async fn status(req: reqwest::RequestBuilder, key: Option<&str>) -> u16 {
    let req = match key {
        Some(k) => req.bearer_auth(k),
        None => req,
    };
    req.send().await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_open_what_their_scope_allows_and_revoking_one_closes_it() {
    let dir = std::env::temp_dir().join(format!("streamsight-auth-{}", std::process::id()));
    let path = dir.join("keys.json");
    let read = generate("default", Scope::Read, 1).unwrap();
    let ingest = generate("default", Scope::Ingest, 1).unwrap();
    let admin = generate("default", Scope::Admin, 1).unwrap();
    let mut file = KeyFile {
        keys: vec![read.stored.clone(), ingest.stored.clone(), admin.stored.clone()],
    };
    file.save(&path).unwrap();
    let running = serve(config(path.clone()), EngineConfig::default()).await.unwrap();
    let client = reqwest::Client::new();
    let api = format!("http://{}", running.api_addr);
    let intake = format!("http://{}/v0.1/pipeline_stats", running.intake_addr);
    let lag = || client.get(format!("{api}/api/v1/lag"));
    let post = || {
        client
            .post(&intake)
            .header("Content-Type", "application/msgpack")
            .body(encode(&Payload::default()))
    };

    assert_eq!(status(client.get(format!("{api}/healthz")), None).await, 200);
    assert_eq!(status(client.get(format!("{api}/readyz")), None).await, 200);
    let unauthorized = lag().send().await.unwrap();
    assert_eq!(unauthorized.status().as_u16(), 401);
    assert_eq!(unauthorized.headers()["www-authenticate"], "Bearer");
    assert_eq!(status(lag(), Some(&read.token)).await, 200);
    assert_eq!(
        status(client.get(format!("{api}/metrics")), Some(&read.token)).await,
        200
    );
    assert_eq!(
        status(client.get(format!("{api}/v3/kafka")), Some(&read.token)).await,
        200
    );
    assert_eq!(
        status(lag(), Some(&ingest.token)).await,
        403,
        "an ingest key cannot read"
    );
    assert_eq!(status(lag(), Some(&admin.token)).await, 200);
    assert_eq!(status(lag(), Some("ssk_000000000000_00")).await, 401);
    assert_eq!(status(post(), None).await, 401);
    assert_eq!(status(post(), Some(&read.token)).await, 403, "a read key cannot ingest");
    assert_eq!(status(post(), Some(&ingest.token)).await, 202);
    // Rules and silences are read with read keys and changed with admin keys.
    let rule = || {
        client
            .put(format!("{api}/api/v1/rules/lag_high"))
            .json(&serde_json::json!({"signal": "group_lag_seconds", "above": 60}))
    };
    let silence = || {
        client
            .post(format!("{api}/api/v1/silences"))
            .json(&serde_json::json!({"matchers": {"alertname": "lag_high"}, "duration": "1h"}))
    };
    assert_eq!(status(rule(), Some(&read.token)).await, 403);
    assert_eq!(status(silence(), Some(&read.token)).await, 403);
    assert_eq!(status(rule(), Some(&admin.token)).await, 200);
    assert_eq!(status(silence(), Some(&admin.token)).await, 201);
    assert_eq!(
        status(client.get(format!("{api}/api/v1/rules")), Some(&read.token)).await,
        200
    );
    assert_eq!(
        status(client.delete(format!("{api}/api/v1/rules/lag_high")), Some(&read.token)).await,
        403
    );

    // Revoked in the file: refused from the next reload, without a restart.
    file.revoke(&read.stored.id, 2).unwrap();
    file.save(&path).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while status(lag(), Some(&read.token)).await != 401 {
        assert!(Instant::now() < deadline, "the revoked key still works");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status(lag(), Some(&admin.token)).await, 200);

    // A key added while serving works from the next read, and the audit log
    // (admin keys only) says what changed.
    let added = generate("default", Scope::Read, 3).unwrap();
    file.keys.push(added.stored.clone());
    file.save(&path).unwrap();
    while status(lag(), Some(&added.token)).await != 200 {
        assert!(Instant::now() < deadline, "the added key never worked");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let audit = format!("{api}/api/v1/audit");
    assert_eq!(status(client.get(&audit), Some(&added.token)).await, 403);
    let log: serde_json::Value = client
        .get(&audit)
        .bearer_auth(&admin.token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let events: Vec<(String, String)> = log["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let e = &e["event"];
            (
                e["action"].as_str().unwrap().to_owned(),
                e["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        events.contains(&("key_revoked".into(), read.stored.id.clone())),
        "{log}"
    );
    assert!(
        events.contains(&("key_created".into(), added.stored.id.clone())),
        "{log}"
    );
    assert!(
        !log.to_string().contains(&added.token[17..]),
        "the secret is not in the log"
    );
    running.shutdown().await;

    // An intake bound to a tenant takes tracers' payloads without a key; the
    // API still asks for one.
    let bound = ServeConfig {
        intake_tenant: Some("default".into()),
        ..config(path.clone())
    };
    let running = serve(bound, EngineConfig::default()).await.unwrap();
    let intake = format!("http://{}/v0.1/pipeline_stats", running.intake_addr);
    let resp = client
        .post(&intake)
        .header("Content-Type", "application/msgpack")
        .body(encode(&Payload::default()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 202);
    let api = format!("http://{}/api/v1/lag", running.api_addr);
    assert_eq!(status(client.get(&api), None).await, 401);
    running.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_non_loopback_address_without_keys_is_refused_unless_said_on_purpose() {
    let missing = std::env::temp_dir().join(format!("streamsight-nokeys-{}/keys.json", std::process::id()));
    let open = ServeConfig {
        api_listen: "0.0.0.0:0".parse().unwrap(),
        ..config(missing.clone())
    };
    let err = serve(open.clone(), EngineConfig::default()).await.unwrap_err();
    assert!(matches!(err, ServeError::Unauthenticated { .. }), "{err}");
    assert!(err.to_string().contains("--insecure-no-auth"), "{err}");
    let on_purpose = ServeConfig {
        insecure_no_auth: true,
        ..open
    };
    let running = serve(on_purpose, EngineConfig::default()).await.unwrap();
    running.shutdown().await;
}
