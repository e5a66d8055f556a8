//! A "broker" that answers every request with a frame length meant to make the
//! client allocate: no real broker sends that, so it is a plain TCP socket here.
//! The poll must fail with a clear error, within its timeout, without the memory.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use streamsight_core::Millis;
use streamsight_poller::{ClusterClient, ClusterConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn peak_rss_kib() -> u64 {
    streamsight_testkit::process::rss_kib(std::process::id()).1
}

/// Accepts connections; to every request, answers `length` then `body`.
async fn hostile(length: i32, body: &'static [u8]) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = [0u8; 4096];
                while s.read(&mut request).await.is_ok_and(|n| n > 0) {
                    let _ = s.write_all(&length.to_be_bytes()).await;
                    let _ = s.write_all(body).await;
                }
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lying_frame_lengths_fail_cleanly_without_the_memory() {
    for (length, what) in [
        (i32::MAX, "2 GiB"),
        ((64 << 20) + 1, "over the cap"),
        (-5, "negative"),
        (60 << 20, "under the cap, never sent"),
    ] {
        let addr = hostile(length, b"\x00\x00\x00\x01garbage").await;
        let mut config = ClusterConfig::new("hostile", &addr);
        config.request_timeout = Duration::from_secs(2);
        let before = peak_rss_kib();
        let started = Instant::now();
        let snap = ClusterClient::new(config).poll(Millis(0), &BTreeSet::new()).await;
        assert!(!snap.metadata_ok, "{what}");
        assert!(!snap.errors.is_empty(), "{what}: no error said");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{what}: {:?}",
            started.elapsed()
        );
        let grew = peak_rss_kib().saturating_sub(before);
        assert!(grew < 8 << 10, "{what}: peak RSS grew {grew} KiB");
        println!("{what}: {:?} — {}", started.elapsed(), snap.errors[0]);
    }
}
