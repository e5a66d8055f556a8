//! TLS to brokers. Neither test broker speaks TLS here (librdkafka's mock has
//! no TLS listener; tansu 0.6's closes the handshake), so the mock cluster is
//! put behind a TLS-terminating proxy made for the test, signed by a CA made for
//! the test. Like any TLS listener in front of Kafka it advertises itself: the
//! proxy rewrites the broker addresses in Metadata answers to its own.
#![allow(clippy::unwrap_used)]

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{MetadataResponse, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rdkafka::mocking::MockCluster;
use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use streamsight_core::Millis;
use streamsight_poller::client::tls::TlsConfig;
use streamsight_poller::{ClusterClient, ClusterConfig, SecurityProtocol};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A CA, and a certificate it signed for 127.0.0.1.
fn certificates() -> (String, CertificateDer<'static>, PrivateKeyDer<'static>) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    (ca.pem(), cert.der().clone(), key)
}

async fn read_frame(s: &mut (impl AsyncReadExt + Unpin)) -> Option<Bytes> {
    let len = s.read_i32().await.ok()?;
    let mut buf = vec![0; usize::try_from(len).ok()?];
    s.read_exact(&mut buf).await.ok()?;
    Some(buf.into())
}

/// Rewrites the brokers of a Metadata answer to the proxy's own address.
fn rewrite_metadata(frame: Bytes, version: i16, port: u16) -> Bytes {
    let mut buf = frame;
    let header = ResponseHeader::decode(&mut buf, MetadataResponse::header_version(version)).unwrap();
    let mut answer = MetadataResponse::decode(&mut buf, version).unwrap();
    for b in &mut answer.brokers {
        b.host = StrBytes::from_static_str("127.0.0.1");
        b.port = i32::from(port);
    }
    let mut out = BytesMut::new();
    header
        .encode(&mut out, MetadataResponse::header_version(version))
        .unwrap();
    answer.encode(&mut out, version).unwrap();
    out.freeze()
}

async fn proxy(listener: TcpListener, acceptor: TlsAcceptor, upstream: String, handshakes: Arc<Mutex<u32>>) {
    let port = listener.local_addr().unwrap().port();
    loop {
        let Ok((tcp, _)) = listener.accept().await else { return };
        let acceptor = acceptor.clone();
        let upstream = upstream.clone();
        let handshakes = handshakes.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else { return };
            *handshakes.lock().unwrap() += 1;
            let broker = TcpStream::connect(&upstream).await.unwrap();
            let (mut client_r, mut client_w) = tokio::io::split(tls);
            let (mut broker_r, mut broker_w) = broker.into_split();
            let pending: Arc<Mutex<VecDeque<(i16, i16)>>> = Arc::default();
            let requests = pending.clone();
            tokio::spawn(async move {
                while let Some(frame) = read_frame(&mut client_r).await {
                    let (key, version) = (frame.clone().get_i16(), frame.slice(2..).get_i16());
                    requests.lock().unwrap().push_back((key, version));
                    let mut out = BytesMut::new();
                    out.put_i32(frame.len() as i32);
                    out.put_slice(&frame);
                    if broker_w.write_all(&out).await.is_err() {
                        return;
                    }
                }
            });
            while let Some(mut frame) = read_frame(&mut broker_r).await {
                let Some((key, version)) = pending.lock().unwrap().pop_front() else {
                    return;
                };
                if key == 3 {
                    frame = rewrite_metadata(frame, version, port);
                }
                let mut out = BytesMut::new();
                out.put_i32(frame.len() as i32);
                out.put_slice(&frame);
                if client_w.write_all(&out).await.is_err() {
                    return;
                }
            }
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polls_over_tls_and_refuses_a_certificate_it_does_not_trust() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("orders", 2, 1).unwrap();
    let (ca_pem, cert, key) = certificates();
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let server = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let bootstrap = listener.local_addr().unwrap().to_string();
    let handshakes = Arc::new(Mutex::new(0));
    tokio::spawn(proxy(
        listener,
        TlsAcceptor::from(Arc::new(server)),
        cluster.bootstrap_servers(),
        handshakes.clone(),
    ));
    let ca_file = std::env::temp_dir().join(format!("streamsight-tls-ca-{}.pem", std::process::id()));
    std::fs::write(&ca_file, ca_pem).unwrap();

    let config = |ca: Option<std::path::PathBuf>| {
        let mut c = ClusterConfig::new("tls", &bootstrap);
        c.security_protocol = SecurityProtocol::Ssl;
        c.request_timeout = Duration::from_secs(3);
        c.tls = Some(TlsConfig {
            ca_file: ca,
            server_name: None,
        });
        c.validate().unwrap();
        c
    };
    let snap = ClusterClient::new(config(Some(ca_file.clone())))
        .poll(Millis(1), &BTreeSet::new())
        .await;
    assert!(snap.metadata_ok, "{:?}", snap.errors);
    let orders = snap.topics.iter().find(|t| t.name == "orders").unwrap();
    assert!(orders.partitions.iter().all(|p| p.end == Some(0)), "{orders:?}");
    assert!(*handshakes.lock().unwrap() >= 1);

    // Mozilla's roots do not include the test's CA: refused, and said why.
    let untrusted = ClusterClient::new(config(None)).poll(Millis(2), &BTreeSet::new()).await;
    assert!(!untrusted.metadata_ok);
    assert!(
        untrusted.errors.iter().any(|e| e.contains("tls")),
        "{:?}",
        untrusted.errors
    );
    let _ = std::fs::remove_file(ca_file);
}
