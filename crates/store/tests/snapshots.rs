//! Snapshots on a real Kafka-protocol broker (librdkafka's mock cluster): the
//! newest snapshot of a shard is the one read, whatever order the snapshots
//! were finished in.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

use std::sync::Arc;
use std::time::{Duration, Instant};
use streamsight_core::shard::ShardState;
use streamsight_store::client::KafkaUrl;
use streamsight_store::snapshots::{SnapshotCounts, SnapshotReader, SnapshotWriter, ensure_topics};

/// Offers `shard`'s state as of `offset` until the writer takes it, then
/// waits until it is written.
fn snapshot(writer: &SnapshotWriter, counts: &SnapshotCounts, shard: u32, offset: i64, slot: u8) {
    use std::sync::atomic::Ordering::Relaxed;
    let written = counts.written.load(Relaxed);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !writer.offer(shard, offset, slot, ShardState::default()) {
        assert!(Instant::now() < deadline, "the writer never took the snapshot");
        std::thread::sleep(Duration::from_millis(20));
    }
    while counts.written.load(Relaxed) == written {
        assert_eq!(counts.write_failures.load(Relaxed), 0, "a snapshot failed");
        assert!(Instant::now() < deadline, "the snapshot was never written");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A node that lost shard 1 while paused finishes its snapshot of it (as of
/// log offset 300) after the shard's new holder wrote one as of 500: the
/// next node to gain the shard must start from 500.
#[test]
fn an_older_snapshot_finished_later_does_not_win_over_a_newer_one() {
    let mock = rdkafka::mocking::MockCluster::new(1).unwrap();
    let url = KafkaUrl::parse(&format!(
        "kafka://{}/snap-order?mode=sharded&timeout_ms=5000",
        mock.bootstrap_servers()
    ))
    .unwrap();
    assert!(
        ensure_topics(&url, 4).unwrap(),
        "the snapshot topics have one partition per shard"
    );
    let counts = Arc::new(SnapshotCounts::default());
    let new_holder = SnapshotWriter::start(&url, counts.clone()).unwrap();
    let paused = SnapshotWriter::start(&url, counts.clone()).unwrap();
    snapshot(&new_holder, &counts, 1, 500, 0);
    snapshot(&paused, &counts, 1, 300, 1);
    let reader = SnapshotReader::new(&url, 1 << 20, counts.clone()).unwrap();
    let found = reader.read(&[1]).unwrap();
    let (manifest, _) = &found[&1];
    assert_eq!(manifest.offset, 500, "{manifest:?}");
}
