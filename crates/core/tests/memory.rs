//! Bytes the engine really allocates per partition and per group-partition,
//! counted by the global allocator (index tables and list slack included).

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use std::alloc::System;
use streamsight_core::{Engine, EngineConfig, Millis, PartitionRef};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn net_bytes(region: &Region<'_, System>) -> usize {
    // stats_alloc adds a reallocation's growth to `bytes_allocated` too.
    let s = region.change();
    s.bytes_allocated.saturating_sub(s.bytes_deallocated)
}

#[test]
fn bytes_per_partition_and_per_group_partition() {
    const PARTITIONS: usize = 2_000;
    const GROUPS: usize = 50;
    let mut engine = Engine::new(EngineConfig::default()).unwrap();
    let topics: Vec<String> = (0..PARTITIONS / 10).map(|t| format!("topic-{t}")).collect();
    let group_names: Vec<String> = (0..GROUPS).map(|g| format!("group-{g}")).collect();

    let region = Region::new(GLOBAL);
    let mut pids = Vec::with_capacity(PARTITIONS);
    for (i, _) in (0..PARTITIONS).enumerate() {
        let p = PartitionRef {
            cluster: "c",
            topic: &topics[i / 10],
            partition: (i % 10) as i32,
        };
        let pid = engine.partition_id(p).unwrap();
        // Enough points, far enough apart and off any line, to fill the history to
        // its capacity.
        for k in 0..2_000i64 {
            engine.produced(pid, k * 10 + (k * k) % 7, Millis(k * 5_000)).unwrap();
        }
        pids.push(pid);
    }
    let per_partition = (net_bytes(&region) - pids.capacity() * 4) / PARTITIONS;
    let points = engine.evaluate_partition(pids[0], Millis(10_000_000)).history_points;

    let gids: Vec<_> = group_names.iter().map(|g| engine.group_id("c", g).unwrap()).collect();
    let region = Region::new(GLOBAL);
    for &gid in &gids {
        for &pid in &pids {
            for k in 0..10 {
                engine
                    .committed(gid, pid, 100 + k, Millis(10_000_000 + k * 10_000))
                    .unwrap();
            }
        }
    }
    let per_group_partition = net_bytes(&region) / (PARTITIONS * GROUPS);

    let capacity = (4096 - streamsight_core::engine::PARTITION_FIXED_BYTES)
        / streamsight_core::history::OffsetHistory::point_bytes(Default::default());
    println!("history capacity: {capacity} points");
    println!(
        "measured: {per_partition} bytes per partition (history of {points} points), \
         {per_group_partition} bytes per group-partition"
    );
    assert!(points > 150, "the history is full: {points} points");
    let estimate = engine.memory();
    println!(
        "estimated by Engine::memory: {} and {}",
        estimate.partition_bytes / estimate.partitions,
        estimate.group_partition_bytes / estimate.group_partitions
    );
    assert!(per_partition <= 4096, "{per_partition} bytes per partition");
    assert!(
        per_group_partition <= 256,
        "{per_group_partition} bytes per group-partition"
    );
}
