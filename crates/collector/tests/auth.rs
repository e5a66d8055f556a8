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

/// How the last live key goes while serving.
#[derive(Copy, Clone, Debug)]
enum LastKeyGoes {
    Revoked,
    FileEmptied,
    FileDeleted,
}

/// Keys required (a listener on `0.0.0.0`, or a key once live on loopback):
/// whichever way the last key goes, no request without a key is ever let in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_key_going_locks_everyone_out_and_never_lets_everyone_in() {
    use streamsight_collector::telemetry::Failure;
    let client = reqwest::Client::new();
    for (way, listen) in [
        (LastKeyGoes::Revoked, "0.0.0.0:0"),
        (LastKeyGoes::FileEmptied, "0.0.0.0:0"),
        (LastKeyGoes::FileDeleted, "0.0.0.0:0"),
        (LastKeyGoes::Revoked, "127.0.0.1:0"),
    ] {
        let dir = std::env::temp_dir().join(format!("streamsight-lastkey-{way:?}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("keys.json");
        let read = generate("default", Scope::Read, 1).unwrap();
        let mut file = KeyFile {
            keys: vec![read.stored.clone()],
        };
        file.save(&path).unwrap();
        let running = serve(
            ServeConfig {
                api_listen: listen.parse().unwrap(),
                ..config(path.clone())
            },
            EngineConfig::default(),
        )
        .await
        .unwrap();
        // Asked on 127.0.0.1 whatever the listener is bound to.
        let api = format!("http://127.0.0.1:{}", running.api_addr.port());
        let groups = || client.get(format!("{api}/api/v1/groups"));
        assert_eq!(status(groups(), Some(&read.token)).await, 200, "{way:?}");
        assert_eq!(status(groups(), None).await, 401, "{way:?}");
        // The scheme's name is case-insensitive (RFC 7235).
        let lower = groups()
            .header("Authorization", format!("bearer {}", read.token))
            .send()
            .await
            .unwrap();
        assert_eq!(lower.status().as_u16(), 200, "{way:?}");

        match way {
            LastKeyGoes::Revoked => {
                file.revoke(&read.stored.id, 2).unwrap();
                file.save(&path).unwrap();
            }
            LastKeyGoes::FileEmptied => std::fs::write(&path, b"").unwrap(),
            LastKeyGoes::FileDeleted => std::fs::remove_file(&path).unwrap(),
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        match way {
            LastKeyGoes::Revoked | LastKeyGoes::FileEmptied => {
                // Until the reload the key works; after it nobody does.
                while status(groups(), Some(&read.token)).await != 401 {
                    assert!(Instant::now() < deadline, "{way:?}: the key still works");
                    assert_eq!(status(groups(), None).await, 401, "{way:?}: opened");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                let refused = groups().send().await.unwrap();
                assert_eq!(refused.status().as_u16(), 401, "{way:?}");
                let body = refused.text().await.unwrap();
                assert!(body.contains("no live key") && body.contains("keys create"), "{body}");
                for page in ["/", "/api/v1/lag", "/metrics", "/v3/kafka"] {
                    assert_eq!(
                        status(client.get(format!("{api}{page}")), None).await,
                        401,
                        "{way:?} {page}"
                    );
                }
                assert_eq!(status(client.get(format!("{api}/healthz")), None).await, 200);
                let ready = client.get(format!("{api}/readyz")).send().await.unwrap();
                assert_eq!(ready.status().as_u16(), 503, "{way:?}");
                let body = ready.text().await.unwrap();
                assert!(body.contains("no_live_keys"), "{body}");
                // A key created again opens it again.
                let again = generate("default", Scope::Read, 3).unwrap();
                KeyFile {
                    keys: vec![again.stored.clone()],
                }
                .save(&path)
                .unwrap();
                while status(groups(), Some(&again.token)).await != 200 {
                    assert!(Instant::now() < deadline, "{way:?}: a new key never worked");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                assert_eq!(status(groups(), None).await, 401, "{way:?}");
                assert_eq!(status(client.get(format!("{api}/readyz")), None).await, 200);
            }
            LastKeyGoes::FileDeleted => {
                // A file that went is said, and the keys last read stay.
                while running.shared.telemetry.failures(Failure::KeysReload) == 0 {
                    assert!(Instant::now() < deadline, "the deletion was never noticed");
                    assert_eq!(status(groups(), None).await, 401, "opened");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                assert_eq!(status(groups(), None).await, 401);
                assert_eq!(status(groups(), Some(&read.token)).await, 200);
            }
        }
        running.shutdown().await;
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// `insecure_no_auth` said on purpose: the last key going opens the listener
/// again, as it was before any key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insecure_no_auth_is_open_again_when_the_last_key_goes() {
    let dir = std::env::temp_dir().join(format!("streamsight-insecure-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("keys.json");
    let read = generate("default", Scope::Read, 1).unwrap();
    let mut file = KeyFile {
        keys: vec![read.stored.clone()],
    };
    file.save(&path).unwrap();
    let running = serve(
        ServeConfig {
            api_listen: "0.0.0.0:0".parse().unwrap(),
            insecure_no_auth: true,
            ..config(path.clone())
        },
        EngineConfig::default(),
    )
    .await
    .unwrap();
    let client = reqwest::Client::new();
    let groups = || client.get(format!("http://127.0.0.1:{}/api/v1/groups", running.api_addr.port()));
    assert_eq!(status(groups(), None).await, 401);
    file.revoke(&read.stored.id, 2).unwrap();
    file.save(&path).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while status(groups(), None).await != 200 {
        assert!(Instant::now() < deadline, "never open again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    running.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}
