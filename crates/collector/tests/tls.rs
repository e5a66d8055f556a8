//! TLS on both listeners: a client that trusts the CA gets answers, plain HTTP
//! does not; a renewed certificate is served without a restart; with a client
//! CA, the intake refuses clients without a certificate it signed.
#![allow(clippy::unwrap_used)]

mod support;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use streamsight_collector::tls::ListenerTls;
use streamsight_collector::{ServeConfig, serve};
use streamsight_core::EngineConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

struct Ca(CertifiedIssuer<'static, KeyPair>);

impl Ca {
    fn new() -> Self {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        Self(CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap())
    }

    /// A certificate for `names`, and its key, as PEM.
    fn issue(&self, names: &[&str]) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let names = names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        let cert = CertificateParams::new(names).unwrap().signed_by(&key, &self.0).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn pem(&self) -> String {
        self.0.pem()
    }
}

fn client(trusted: &Ca, identity: Option<(String, String)>) -> TlsConnector {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(trusted.pem().as_bytes()).unwrap())
        .unwrap();
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
    };
    TlsConnector::from(Arc::new(config))
}

/// GET `path` over TLS; the status line, or the error.
async fn get(addr: std::net::SocketAddr, connector: &TlsConnector, path: &str) -> Result<String, String> {
    let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let name = ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await.map_err(|e| e.to_string())?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    tls.write_all(request.as_bytes()).await.map_err(|e| e.to_string())?;
    let mut answer = String::new();
    tls.read_to_string(&mut answer).await.map_err(|e| e.to_string())?;
    Ok(answer.lines().next().unwrap_or("").to_owned())
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_listeners_speak_tls_reload_certificates_and_can_require_client_certificates() {
    let dir = std::env::temp_dir().join(format!("streamsight-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = Ca::new();
    let (cert, key) = ca.issue(&["localhost"]);
    let clients = Ca::new();
    let api_tls = ListenerTls {
        cert_file: write(&dir, "api.pem", &cert),
        key_file: write(&dir, "api.key", &key),
        client_ca_file: None,
    };
    let intake_tls = ListenerTls {
        cert_file: write(&dir, "intake.pem", &cert),
        key_file: write(&dir, "intake.key", &key),
        client_ca_file: Some(write(&dir, "clients.pem", &clients.pem())),
    };
    let config = ServeConfig {
        api_tls: Some(api_tls.clone()),
        intake_tls: Some(intake_tls),
        ..support::loopback("memory://")
    };
    let running = serve(config, EngineConfig::default()).await.unwrap();

    // The API over TLS; plain HTTP to it gets no answer.
    assert_eq!(
        get(running.api_addr, &client(&ca, None), "/healthz").await.unwrap(),
        "HTTP/1.1 200 OK"
    );
    let plain = reqwest::get(format!("http://{}/healthz", running.api_addr)).await;
    assert!(plain.is_err() || !plain.unwrap().status().is_success());
    // A client that does not trust the CA fails the handshake.
    assert!(
        get(running.api_addr, &client(&Ca::new(), None), "/healthz")
            .await
            .is_err()
    );

    // The intake wants a client certificate signed by the client CA.
    let identity = clients.issue(&["tracer"]);
    assert_eq!(
        get(running.intake_addr, &client(&ca, Some(identity)), "/info")
            .await
            .unwrap(),
        "HTTP/1.1 200 OK"
    );
    assert!(get(running.intake_addr, &client(&ca, None), "/info").await.is_err());
    let stranger = Ca::new().issue(&["tracer"]);
    assert!(
        get(running.intake_addr, &client(&ca, Some(stranger)), "/info")
            .await
            .is_err()
    );

    // A renewed certificate from another CA is served without a restart (a
    // broken renewal keeping the working one is tested beside the code).
    let renewed_ca = Ca::new();
    let (renewed, renewed_key) = renewed_ca.issue(&["localhost"]);
    std::fs::write(&api_tls.cert_file, renewed).unwrap();
    std::fs::write(&api_tls.key_file, renewed_key).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while get(running.api_addr, &client(&renewed_ca, None), "/healthz")
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "the renewed certificate was never served");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(get(running.api_addr, &client(&ca, None), "/healthz").await.is_err());
    running.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn unusable_tls_files_stop_the_start_with_their_path_and_never_their_content() {
    let dir = std::env::temp_dir().join(format!("streamsight-tls-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, _) = Ca::new().issue(&["localhost"]);
    let tls = ListenerTls {
        cert_file: write(&dir, "c.pem", &cert),
        key_file: write(&dir, "k.pem", "SECRET-KEY-MATERIAL"),
        client_ca_file: None,
    };
    let config = ServeConfig {
        api_tls: Some(tls),
        ..support::loopback("memory://")
    };
    let err = serve(config, EngineConfig::default()).await.unwrap_err().to_string();
    assert!(err.contains("k.pem"), "{err}");
    assert!(!err.contains("SECRET"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Each TLS listener's certificate's end is on `/metrics`, the OTLP listener's
/// being the intake's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tls_listener_exports_when_its_certificate_ends() {
    let dir = std::env::temp_dir().join(format!("streamsight-tls-expiry-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = Ca::new();
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    let end = rcgen::date_time_ymd(2099, 6, 1);
    params.not_after = end;
    let cert = params.signed_by(&key, &ca.0).unwrap();
    let (api_cert, api_key) = ca.issue(&["localhost"]);
    let tls = |name: &str, cert: &str, key: &str| ListenerTls {
        cert_file: write(&dir, &format!("{name}.pem"), cert),
        key_file: write(&dir, &format!("{name}.key"), key),
        client_ca_file: None,
    };
    let config = ServeConfig {
        api_tls: Some(tls("api", &api_cert, &api_key)),
        intake_tls: Some(tls("intake", &cert.pem(), &key.serialize_pem())),
        ..support::loopback("memory://")
    };
    let running = serve(config, EngineConfig::default()).await.unwrap();
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap())
        .resolve("localhost", running.api_addr)
        .build()
        .unwrap();
    let metrics = client
        .get(format!("https://localhost:{}/metrics", running.api_addr.port()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let intake_end = end.unix_timestamp();
    for listener in ["intake", "otlp"] {
        let line = format!("streamsight_tls_certificate_expiry_seconds{{listener=\"{listener}\"}} {intake_end}");
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }
    assert!(
        metrics.contains("streamsight_tls_certificate_expiry_seconds{listener=\"api\"} "),
        "{metrics}"
    );
    running.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}
