use super::*;

const T: &str = "orders";

fn engine() -> Engine {
    Engine::new(EngineConfig::default()).unwrap()
}

fn part(partition: i32) -> PartitionRef<'static> {
    PartitionRef {
        cluster: "c",
        topic: T,
        partition,
    }
}

fn secs(s: i64) -> Millis {
    Millis(s * 1000)
}

fn produce(e: &mut Engine, at: i64, offset: i64) -> Result<(), RejectReason> {
    e.observe(
        secs(at),
        &Observation::Produced {
            partition: part(0),
            offset,
        },
    )
}

fn commit(e: &mut Engine, at: i64, offset: i64) -> Result<(), RejectReason> {
    e.observe(
        secs(at),
        &Observation::Committed {
            group: "g",
            partition: part(0),
            offset,
        },
    )
}

fn broker_end(e: &mut Engine, at: i64, offset: i64) {
    e.observe(
        secs(at),
        &Observation::EndOffset {
            partition: part(0),
            offset,
            source: EndOffsetSource::Broker,
        },
    )
    .unwrap();
}

fn log_start(e: &mut Engine, at: i64, offset: i64) {
    e.observe(
        secs(at),
        &Observation::LogStart {
            partition: part(0),
            offset,
        },
    )
    .unwrap();
}

fn report(e: &Engine, at: i64) -> LagReport {
    let id = e.find("c", "g", T, 0).expect("group-partition exists");
    e.evaluate(id, secs(at))
}

#[test]
fn lag_in_messages_and_seconds() {
    let mut e = engine();
    for o in 0..100 {
        produce(&mut e, o, o).unwrap();
    }
    commit(&mut e, 100, 40).unwrap();
    let r = report(&e, 130);
    assert_eq!(r.lag_messages, Some(60));
    assert_eq!(r.lag_seconds, Some(90.0));
    assert!(!r.lag_seconds_lower_bound);
}

#[test]
fn lag_is_unknown_without_an_end_offset() {
    let mut e = engine();
    commit(&mut e, 0, 40).unwrap();
    let r = report(&e, 1);
    assert_eq!((r.lag_messages, r.lag_seconds, r.status), (None, None, Status::Stale));
}

#[test]
fn records_older_than_the_history_give_a_lower_bound() {
    let mut e = engine();
    broker_end(&mut e, 100, 1_000);
    commit(&mut e, 100, 10).unwrap();
    let r = report(&e, 160);
    assert_eq!(r.lag_seconds, Some(60.0));
    assert!(r.lag_seconds_lower_bound);
}

#[test]
fn failed_send_placeholders_are_rejected_and_mark_the_producer_failing() {
    let mut e = engine();
    produce(&mut e, 0, 99).unwrap();
    commit(&mut e, 1, 50).unwrap();
    assert_eq!(produce(&mut e, 70, -1), Err(RejectReason::InvalidOffsetSentinel));
    let unassigned = Observation::Produced {
        partition: part(-1),
        offset: -1,
    };
    assert_eq!(e.observe(secs(71), &unassigned), Err(RejectReason::NegativePartition));
    let r = report(&e, 72);
    assert_eq!(r.lag_messages, Some(50));
    assert_eq!(r.end_offset, Some(100));
    assert!(r.producer_failing);
    assert_eq!(e.stats().rejected.total(), 2);
    assert!(e.drain_events().is_empty(), "no reset");
    // One success ends it; a minute without failures ends it too.
    produce(&mut e, 73, 100).unwrap();
    assert!(!report(&e, 74).producer_failing);
}

#[test]
fn producer_failing_expires_without_new_failures() {
    let mut e = engine();
    produce(&mut e, 0, 1).unwrap();
    commit(&mut e, 0, 0).unwrap();
    e.observe(
        secs(10),
        &Observation::ProduceFailed {
            partition: part(-1),
            error: "TIMED_OUT",
        },
    )
    .unwrap_err();
    assert!(report(&e, 70).producer_failing);
    assert!(!report(&e, 71).producer_failing);
}

#[test]
fn a_lower_produce_offset_is_never_a_reset() {
    let mut e = engine();
    produce(&mut e, 0, 1_000).unwrap();
    for t in 1..200 {
        produce(&mut e, t, 3).unwrap();
    }
    commit(&mut e, 200, 500).unwrap();
    let r = report(&e, 200);
    assert_eq!(r.end_offset, Some(1_001));
    assert_eq!(r.lag_messages, Some(501));
    assert_eq!(e.stats().resets, 0);
}

#[test]
fn a_reset_needs_the_broker_to_stay_lower() {
    let mut e = engine();
    broker_end(&mut e, 0, 1_000);
    commit(&mut e, 0, 900).unwrap();
    broker_end(&mut e, 10, 20);
    broker_end(&mut e, 20, 1_000); // a blip, not a reset
    assert_eq!(e.stats().resets, 0);
    broker_end(&mut e, 30, 20);
    broker_end(&mut e, 40, 25);
    assert_eq!(e.stats().resets, 1);
    let events = e.drain_events();
    assert!(
        matches!(
            events.as_slice(),
            [EngineEvent::TopicReset {
                previous_end: Some(1_000),
                new_end: Some(25),
                evidence: ResetEvidence::EndOffsetDecreased,
                ..
            }]
        ),
        "{events:?}"
    );
    // The old commit belonged to the old log.
    assert_eq!(report(&e, 41).status, Status::Stale);
    commit(&mut e, 42, 20).unwrap();
    assert_eq!(report(&e, 42).lag_messages, Some(5));
}

#[test]
fn a_client_high_watermark_never_proves_a_reset() {
    let mut e = engine();
    broker_end(&mut e, 0, 1_000);
    for t in 1..10 {
        let low = Observation::EndOffset {
            partition: part(0),
            offset: 5,
            source: EndOffsetSource::ClientHighWatermark,
        };
        e.observe(secs(t), &low).unwrap();
    }
    assert_eq!(e.stats().resets, 0);
}

#[test]
fn topic_recreated_resets_every_partition() {
    let mut e = engine();
    produce(&mut e, 0, 10).unwrap();
    commit(&mut e, 0, 5).unwrap();
    e.observe(secs(5), &Observation::TopicRecreated { cluster: "c", topic: T })
        .unwrap();
    assert!(matches!(
        e.drain_events().as_slice(),
        [EngineEvent::TopicReset {
            evidence: ResetEvidence::TopicRecreated,
            new_end: None,
            ..
        }]
    ));
    assert_eq!(report(&e, 6).lag_messages, None);
}

#[test]
fn retention_below_the_commit_is_data_loss_not_lag() {
    let mut e = engine();
    broker_end(&mut e, 0, 1_000);
    commit(&mut e, 0, 100).unwrap();
    log_start(&mut e, 10, 300);
    let r = report(&e, 10);
    assert_eq!(r.status, Status::DataLoss);
    assert_eq!(r.data_loss_messages, 200);
    assert_eq!(r.lag_messages, Some(700));
    assert!(matches!(
        e.drain_events().as_slice(),
        [EngineEvent::DataLoss {
            messages: 200,
            committed_offset: 100,
            log_start_offset: 300,
            ..
        }]
    ));
    // Retention moves on: only the newly deleted records are new loss.
    log_start(&mut e, 20, 350);
    assert_eq!(report(&e, 20).data_loss_messages, 250);
    // The group jumps to the log start: no longer losing, the loss stays counted.
    commit(&mut e, 30, 350).unwrap();
    let r = report(&e, 30);
    assert_ne!(r.status, Status::DataLoss);
    assert_eq!(r.data_loss_messages, 250);
}

#[test]
fn a_lag_of_one_on_a_control_marker_is_not_lag() {
    let mut e = engine();
    produce(&mut e, 0, 9).unwrap(); // data records 0..=9
    broker_end(&mut e, 1, 11); // offset 10 is the commit marker
    commit(&mut e, 2, 10).unwrap();
    let r = report(&e, 3);
    assert_eq!(
        (r.lag_messages, r.lag_seconds, r.status),
        (Some(0), Some(0.0), Status::Ok)
    );
    assert!(r.at_control_marker);

    let mut e = engine();
    broker_end(&mut e, 0, 11);
    commit(&mut e, 1, 10).unwrap();
    assert_eq!(report(&e, 2).lag_messages, Some(1), "without evidence it is lag");
    e.observe(
        secs(2),
        &Observation::ControlMarker {
            partition: part(0),
            offset: 10,
        },
    )
    .unwrap();
    assert_eq!(report(&e, 3).lag_messages, Some(0));
}

#[test]
fn markers_and_aborted_records_after_a_commit_are_not_lag() {
    // 15: a commit marker, 16: an aborted record, 17: its abort marker. A
    // read_committed reader handed everything before commits 15 and waits.
    let mut e = engine();
    broker_end(&mut e, 0, 18);
    for t in 0..=100 {
        broker_end(&mut e, t, 18);
        if t < 5 {
            commit(&mut e, t, 15).unwrap();
        }
    }
    assert_eq!(report(&e, 100).lag_messages, Some(3), "without evidence it is lag");
    let unreadable = |e: &mut Engine, at: i64, from: i64, to: i64| {
        e.observe(
            secs(at),
            &Observation::Unreadable {
                partition: part(0),
                from,
                to,
            },
        )
    };
    unreadable(&mut e, 100, 15, 18).unwrap();
    let r = report(&e, 101);
    assert_eq!(
        (r.lag_messages, r.lag_seconds, r.status),
        (Some(0), Some(0.0), Status::Ok),
        "{r:?}"
    );
    assert!(r.at_control_marker);
    // Records after the run are lag, the run is not.
    broker_end(&mut e, 102, 20);
    assert_eq!(report(&e, 103).lag_messages, Some(2));
    // A backwards or empty run is refused.
    assert!(unreadable(&mut e, 104, 18, 18).is_err());
    assert!(unreadable(&mut e, 104, -1, 3).is_err());
    // Handed over with a shard.
    let mut other = engine();
    other.import(e.export(&|_| true));
    let id = other.find("c", "g", T, 0).unwrap();
    assert_eq!(other.evaluate(id, secs(105)).lag_messages, Some(2));
}

#[test]
fn an_idle_caught_up_group_stays_ok_while_the_broker_confirms() {
    let mut e = engine();
    broker_end(&mut e, 0, 100);
    commit(&mut e, 0, 100).unwrap();
    for t in (10..3_600).step_by(10) {
        broker_end(&mut e, t, 100);
    }
    assert_eq!(report(&e, 3_600).status, Status::Ok);
    // Nobody confirms the end offset any more: zero lag is no longer known.
    assert_eq!(report(&e, 3_600 + 301).status, Status::Stale);
}

#[test]
fn a_topic_knows_its_clusters() {
    let mut e = engine();
    assert_eq!(e.clusters_of(T).count(), 0);
    produce(&mut e, 0, 1).unwrap();
    assert_eq!(e.clusters_of(T).collect::<Vec<_>>(), ["c"]);
    let other = Observation::Produced {
        partition: PartitionRef {
            cluster: "d",
            topic: T,
            partition: 0,
        },
        offset: 1,
    };
    e.observe(secs(0), &other).unwrap();
    assert_eq!(e.clusters_of(T).collect::<Vec<_>>(), ["c", "d"]);
}

#[test]
fn invalid_commits_are_rejected() {
    let mut e = engine();
    assert_eq!(commit(&mut e, 0, -1001), Err(RejectReason::InvalidOffsetSentinel));
    assert_eq!(commit(&mut e, 0, -7), Err(RejectReason::NegativeOffset));
    assert_eq!(commit(&mut e, 0, i64::MAX), Err(RejectReason::OffsetOutOfRange));
    assert_eq!(e.group_partitions().count(), 0);
}

#[test]
fn group_status_is_the_worst_partition() {
    let mut e = engine();
    for p in 0..2 {
        let end = Observation::EndOffset {
            partition: part(p),
            offset: 100,
            source: EndOffsetSource::Broker,
        };
        e.observe(secs(0), &end).unwrap();
    }
    let c0 = Observation::Committed {
        group: "g",
        partition: part(0),
        offset: 100,
    };
    e.observe(secs(0), &c0).unwrap();
    for t in 0..5 {
        let c1 = Observation::Committed {
            group: "g",
            partition: part(1),
            offset: 40,
        };
        e.observe(secs(t * 5), &c1).unwrap();
    }
    let gid = e.groups().next().unwrap();
    let g = e.evaluate_group(gid, secs(21));
    assert_eq!(g.status, Status::Stall);
    assert_eq!((g.partitions, g.total_lag, g.complete), (2, 60, true));
}

#[test]
fn memory_stays_within_budget() {
    let mut e = engine();
    for o in 0..100_000 {
        produce(&mut e, o, o).unwrap();
    }
    commit(&mut e, 100_000, 5).unwrap();
    let m = e.memory();
    assert_eq!((m.partitions, m.group_partitions), (1, 1));
    assert!(m.partition_bytes <= 4096, "{} bytes per partition", m.partition_bytes);
    // Bytes per group-partition are measured at scale in tests/memory.rs.
}

#[test]
fn an_unreachable_leader_is_never_ok_until_the_broker_answers() {
    let mut e = engine();
    broker_end(&mut e, 0, 100);
    commit(&mut e, 0, 100).unwrap();
    assert_eq!(report(&e, 1).status, Status::Ok);
    e.observe(secs(2), &Observation::Unreachable { partition: part(0) })
        .unwrap();
    let r = report(&e, 3);
    assert_eq!((r.status, r.broker_unreachable), (Status::Stale, true));
    broker_end(&mut e, 4, 100);
    assert_eq!(report(&e, 5).status, Status::Ok);
}

#[test]
fn a_deleted_group_disappears_and_comes_back_fresh() {
    let mut e = engine();
    broker_end(&mut e, 0, 100);
    commit(&mut e, 0, 10).unwrap();
    let deleted = Observation::GroupDeleted {
        cluster: "c",
        group: "g",
    };
    e.observe(secs(1), &deleted).unwrap();
    assert!(e.find("c", "g", T, 0).is_none());
    assert_eq!((e.groups().count(), e.group_partitions().count()), (0, 0));
    commit(&mut e, 2, 90).unwrap();
    assert_eq!(report(&e, 2).lag_messages, Some(10));
    assert_eq!(e.commits(e.find("c", "g", T, 0).unwrap()).count(), 1, "no old commits");
}

#[test]
fn a_deleted_topic_takes_its_partitions_and_group_rows_along() {
    let mut e = engine();
    broker_end(&mut e, 0, 100);
    commit(&mut e, 0, 10).unwrap();
    let deleted = Observation::TopicDeleted { cluster: "c", topic: T };
    e.observe(secs(1), &deleted).unwrap();
    assert_eq!(e.partitions().count(), 0);
    assert_eq!(e.group_partitions().count(), 0);
    let gid = e.find_group("c", "g").unwrap();
    assert_eq!(
        e.evaluate_group(gid, secs(1)).status,
        Status::Stale,
        "a group with nothing known"
    );
    assert_eq!(e.clusters_of(T).count(), 0);
    // Created again: a new partition with no history of the old one.
    broker_end(&mut e, 2, 5);
    assert_eq!(e.partitions().count(), 1);
    assert_eq!(
        e.evaluate_partition(e.partitions().next().unwrap(), secs(2)).end_offset,
        Some(5)
    );
}

#[test]
fn idle_lists_groups_and_topics_nothing_was_heard_of() {
    let mut e = engine();
    broker_end(&mut e, 0, 100);
    commit(&mut e, 0, 10).unwrap();
    let other = PartitionRef {
        cluster: "c",
        topic: "quiet",
        partition: 0,
    };
    e.observe(
        secs(0),
        &Observation::Produced {
            partition: other,
            offset: 3,
        },
    )
    .unwrap();
    let hour = std::time::Duration::from_secs(3600);
    assert_eq!(e.idle(secs(3000), hour), Idle::default());
    let idle = e.idle(secs(3601), hour);
    assert_eq!(idle.groups, vec![("c", "g")]);
    // `orders` still has a group on it: it goes when the group does.
    assert_eq!(idle.topics, vec![("c", "quiet")]);
}

#[test]
fn the_id_path_is_validated_and_counted_as_observe_is() {
    let mut e = engine();
    let pid = e.partition_id(part(0)).unwrap();
    e.produced(pid, 5, secs(1)).unwrap();
    assert_eq!(e.produced(pid, -1, secs(2)), Err(RejectReason::InvalidOffsetSentinel));
    let gid = e.group_id("c", "g").unwrap();
    e.committed(gid, pid, 3, secs(2)).unwrap();
    assert_eq!(
        e.committed(gid, pid, i64::MAX, secs(2)),
        Err(RejectReason::OffsetOutOfRange)
    );
    assert_eq!(e.stats().accepted, 2);
    assert_eq!(e.stats().rejected.get(RejectReason::InvalidOffsetSentinel), 1);
    assert_eq!(e.stats().rejected.get(RejectReason::OffsetOutOfRange), 1);
    let gp = e.find("c", "g", T, 0).unwrap();
    assert!(e.evaluate(gp, secs(3)).producer_failing, "a -1 ack is a failure report");
}

fn limited(max: impl FnOnce(&mut crate::config::Cardinality)) -> Engine {
    let mut config = EngineConfig::default();
    max(&mut config.cardinality);
    Engine::new(config).unwrap()
}

fn produce_to(e: &mut Engine, cluster: &str, topic: &str, partition: i32) -> Result<(), RejectReason> {
    let partition = PartitionRef {
        cluster,
        topic,
        partition,
    };
    e.observe(secs(1), &Observation::Produced { partition, offset: 1 })
}

#[test]
fn new_names_over_a_limit_are_refused_and_counted_and_known_ones_keep_working() {
    let mut e = limited(|c| {
        c.max_clusters = 2;
        c.max_topics_per_cluster = 3;
        c.max_partitions_per_topic = 4;
        c.max_groups_per_cluster = 2;
        c.max_name_bytes = 16;
    });
    for t in ["a", "b", "c"] {
        produce_to(&mut e, "c1", t, 0).unwrap();
    }
    assert_eq!(produce_to(&mut e, "c1", "d", 0), Err(RejectReason::Limited));
    produce_to(&mut e, "c1", "a", 3).unwrap();
    assert_eq!(produce_to(&mut e, "c1", "a", 4), Err(RejectReason::Limited));
    assert_eq!(produce_to(&mut e, "c1", "a", i32::MAX), Err(RejectReason::Limited));
    produce_to(&mut e, "c2", "a", 0).unwrap();
    assert_eq!(produce_to(&mut e, "c3", "a", 0), Err(RejectReason::Limited));
    assert_eq!(produce_to(&mut e, "c2", &"x".repeat(17), 0), Err(RejectReason::Limited));
    for g in ["g1", "g2", "g3"] {
        let _ = e.observe(
            secs(2),
            &Observation::Committed {
                group: g,
                partition: PartitionRef {
                    cluster: "c1",
                    topic: "a",
                    partition: 0,
                },
                offset: 1,
            },
        );
    }
    assert!(e.find_group("c1", "g2").is_some());
    assert!(e.find_group("c1", "g3").is_none());
    let limited = &e.stats().limited;
    assert_eq!(limited.get(Limit::Topics), 1);
    assert_eq!(limited.get(Limit::PartitionId), 2);
    assert_eq!(limited.get(Limit::Clusters), 1);
    assert_eq!(limited.get(Limit::NameBytes), 1);
    assert_eq!(limited.get(Limit::Groups), 1);
    assert_eq!(e.stats().rejected.get(RejectReason::Limited), 6);
    // A refused name leaves nothing behind, and forgetting frees a place.
    assert!(e.names.get("d").is_none() && e.names.get("c3").is_none());
    e.observe(
        secs(3),
        &Observation::TopicDeleted {
            cluster: "c1",
            topic: "b",
        },
    )
    .unwrap();
    produce_to(&mut e, "c1", "d", 0).unwrap();
    e.observe(
        secs(3),
        &Observation::GroupDeleted {
            cluster: "c1",
            group: "g1",
        },
    )
    .unwrap();
    assert!(e.group_id("c1", "g3").is_ok());
}

#[test]
fn total_partitions_and_group_partitions_are_bounded() {
    let mut e = limited(|c| {
        c.max_partitions = 3;
        c.max_group_partitions = 2;
    });
    for p in 0..3 {
        produce_to(&mut e, "c", "t", p).unwrap();
    }
    assert_eq!(produce_to(&mut e, "c", "u", 0), Err(RejectReason::Limited));
    let gid = e.group_id("c", "g").unwrap();
    let pids: Vec<_> = e.partitions().collect();
    e.committed(gid, pids[0], 1, secs(2)).unwrap();
    e.committed(gid, pids[1], 1, secs(2)).unwrap();
    assert_eq!(e.committed(gid, pids[2], 1, secs(2)), Err(RejectReason::Limited));
    assert_eq!(e.stats().limited.get(Limit::GroupPartitions), 1);
    assert_eq!(e.stats().limited.get(Limit::Partitions), 1);
}

#[test]
fn a_tracer_cannot_raise_lag_above_what_the_broker_answered() {
    let mut e = engine();
    // Before any broker answer, a wild ack is believed (nothing says otherwise)...
    produce(&mut e, 1, 1 << 62).unwrap();
    commit(&mut e, 2, 100).unwrap();
    let gp = e.find("c", "g", T, 0).unwrap();
    assert_eq!(e.evaluate(gp, secs(3)).lag_messages, Some((1 << 62) + 1 - 100));
    // ...until the broker answers: the history that ran ahead is corrected.
    broker_end(&mut e, 4, 150);
    assert_eq!(e.evaluate(gp, secs(5)).lag_messages, Some(50));
    // Acks beyond the broker's answer wait for it, and never raise lag.
    produce(&mut e, 6, 1 << 62).unwrap();
    produce(&mut e, 7, 159).unwrap();
    assert_eq!(e.evaluate(gp, secs(8)).lag_messages, Some(50));
    let pid = e.partitions().next().unwrap();
    assert_eq!(e.evaluate_partition(pid, secs(8)).produce_offset, Some(149));
    // The next answer confirms the held ack, with the time it was made.
    broker_end(&mut e, 10, 400);
    assert_eq!(e.evaluate(gp, secs(11)).lag_messages, Some(300));
    let p = &e.partitions[pid.0 as usize];
    assert!(p.history.points().iter().any(|pt| pt.end == 160 && pt.at == secs(7)));
    assert!(p.history.end() == Some(400) && p.unconfirmed.is_none());
}

fn stable(e: &mut Engine, at: i64, offset: i64) {
    e.observe(
        secs(at),
        &Observation::StableOffset {
            partition: part(0),
            offset,
        },
    )
    .unwrap();
}

#[test]
fn a_group_held_at_an_open_transaction_is_blocked_and_the_reason_names_it() {
    let mut e = engine();
    // A transaction opened at offset 100 and never ended; the high watermark moves
    // on, the last stable offset stays; a read_committed group waits there.
    for t in 0..=10 {
        broker_end(&mut e, t * 10, 100 + t * 10);
        stable(&mut e, t * 10, 100);
        commit(&mut e, t * 10, 100).unwrap();
    }
    let id = e.find("c", "g", T, 0).unwrap();
    // 59 s held: not yet an open transaction, so the rules see a stall.
    let early = e.evaluate(id, secs(59));
    assert_eq!(early.open_transaction_since, None);
    assert_eq!(early.last_stable_offset, Some(100));
    let r = e.evaluate(id, secs(100));
    assert_eq!(r.status, Status::Blocked);
    // Held since the first poll that saw it below the end.
    assert_eq!(r.open_transaction_since, Some(secs(10)));
    assert_eq!(r.lag_messages, Some(100));
    let why = e.reason(id, &r, secs(100));
    assert!(
        why.starts_with("blocked by an open transaction: it has held offset 100 for 1 m 30 s; read_committed consumers cannot pass it while 100 messages wait"),
        "{why}"
    );
    let p = e.evaluate_partition(e.partition_of(id), secs(100));
    assert_eq!(p.open_transaction_since, Some(secs(10)));
    // The transaction ends: the LSO reaches the end and nothing is held.
    broker_end(&mut e, 110, 200);
    stable(&mut e, 110, 200);
    let r = e.evaluate(id, secs(111));
    assert_eq!((r.open_transaction_since, r.last_stable_offset), (None, Some(200)));
    assert_ne!(r.status, Status::Blocked);
}

fn holder(e: &mut Engine, at: i64, id: Option<&str>) {
    e.observe(
        secs(at),
        &Observation::TransactionHolder {
            partition: part(0),
            producer_id: 4000,
            producer_epoch: 2,
            transactional_id: id,
            timeout_ms: Some(60_000),
        },
    )
    .unwrap();
}

#[test]
fn the_producer_holding_an_open_transaction_is_named_while_it_holds_it() {
    let mut e = engine();
    for t in 0..=10 {
        broker_end(&mut e, t * 10, 100 + t * 10);
        stable(&mut e, t * 10, 100);
        holder(&mut e, t * 10, Some("payments-tx"));
        commit(&mut e, t * 10, 100).unwrap();
    }
    let id = e.find("c", "g", T, 0).unwrap();
    // Not an open transaction yet: nobody is named.
    assert_eq!(e.evaluate(id, secs(59)).open_transaction, None);
    let r = e.evaluate(id, secs(100));
    let t = r.open_transaction.clone().expect("named");
    assert_eq!(
        (
            t.producer_id,
            t.producer_epoch,
            t.first_offset,
            t.transactional_id.as_deref()
        ),
        (4000, 2, 100, Some("payments-tx"))
    );
    let why = e.reason(id, &r, secs(100));
    assert!(
        why.starts_with(
            "blocked by an open transaction: transactional id \"payments-tx\" (producer 4000, epoch 2) has held offset 100 for 1 m 30 s (open 1 m 30 s, past its 1 m timeout); read_committed consumers cannot pass it"
        ),
        "{why}"
    );
    let p = e.evaluate_partition(e.partition_of(id), secs(100));
    assert_eq!(p.open_transaction.as_deref(), Some(&*t));
    // The stable offset moves to another transaction's start: the holder
    // named for 100 is no longer said to hold it, until the broker names one.
    broker_end(&mut e, 110, 300);
    stable(&mut e, 110, 250);
    assert_eq!(
        e.evaluate_partition(e.partition_of(id), secs(200)).open_transaction,
        None
    );
    holder(&mut e, 111, None);
    let p = e.evaluate_partition(e.partition_of(id), secs(200));
    assert_eq!(
        p.open_transaction.map(|t| t.holder()),
        Some("producer 4000 (epoch 2)".to_owned())
    );
    // It ends: nothing is held, nobody named.
    broker_end(&mut e, 210, 300);
    stable(&mut e, 210, 300);
    assert_eq!(
        e.evaluate_partition(e.partition_of(id), secs(300)).open_transaction,
        None
    );
    // A holder kept across a shard's hand-over.
    stable(&mut e, 220, 290);
    broker_end(&mut e, 220, 310);
    stable(&mut e, 220, 290);
    holder(&mut e, 220, Some("t2"));
    let mut other = engine();
    other.import(e.export(&|_| true));
    let pid = other.find("c", "g", T, 0).map(|id| other.partition_of(id)).unwrap();
    assert_eq!(
        other
            .evaluate_partition(pid, secs(400))
            .open_transaction
            .and_then(|t| t.transactional_id.clone())
            .as_deref(),
        Some("t2")
    );
}

#[test]
fn a_read_uncommitted_group_past_the_open_transaction_is_judged_by_its_own_commits_and_told() {
    let mut e = engine();
    for t in 0..=10 {
        broker_end(&mut e, t * 10, 100 + t * 10);
        stable(&mut e, t * 10, 100);
        commit(&mut e, t * 10, 95 + t * 10).unwrap();
    }
    let id = e.find("c", "g", T, 0).unwrap();
    let r = e.evaluate(id, secs(100));
    assert_eq!(r.status, Status::Ok);
    let why = e.reason(id, &r, secs(100));
    assert!(
        why.contains("; an open transaction has held offset 100 for 1 m 30 s"),
        "{why}"
    );
}

#[test]
fn the_time_of_the_record_at_the_commit_makes_lag_seconds_exact_where_polls_only_bound_them() {
    let mut e = engine();
    // The first poll sees the end at 100 and the group at 40: the history
    // starts there, so the records before are only known older than it.
    broker_end(&mut e, 100, 100);
    commit(&mut e, 100, 40).unwrap();
    let r = report(&e, 110);
    assert_eq!((r.lag_seconds, r.lag_seconds_lower_bound), (Some(10.0), true));
    // The record at offset 40 carries the time it was written: 30 s.
    e.observe(
        secs(30),
        &Observation::RecordWritten {
            partition: part(0),
            offset: 40,
        },
    )
    .unwrap();
    let r = report(&e, 110);
    assert_eq!((r.lag_seconds, r.lag_seconds_lower_bound), (Some(80.0), false));
    assert_eq!(r.lag_messages, Some(60));
    // It is no confirmation of the end offset now, and no successful send.
    let p = e.evaluate_partition(e.partition_of(e.find("c", "g", T, 0).unwrap()), secs(110));
    assert_eq!((p.end_offset_at, p.produce_offset), (Some(secs(100)), None));
}

#[test]
fn an_operators_reset_back_is_the_groups_own_and_not_a_rewind() {
    let reset = |e: &mut Engine, at: i64, offset: i64| {
        e.observe(
            secs(at),
            &Observation::OffsetsReset {
                group: "g",
                partition: part(0),
                offset,
            },
        )
    };
    let mut plain = engine();
    let mut told = engine();
    for e in [&mut plain, &mut told] {
        for i in 0..5 {
            broker_end(e, i * 10, 1_000 + i * 10);
            commit(e, i * 10, 900 + i * 20).unwrap();
        }
    }
    // The same move back to 200: a commit seen on its own is a rewind ...
    commit(&mut plain, 50, 200).unwrap();
    assert_eq!(report(&plain, 51).status, Status::Rewind);
    // ... the reset streamsight executed is where the group now starts.
    reset(&mut told, 50, 200).unwrap();
    let r = report(&told, 51);
    assert_ne!(r.status, Status::Rewind, "{r:?}");
    assert_eq!(r.lag_messages, Some(840));
    assert_eq!(reset(&mut told, 52, -1), Err(RejectReason::InvalidOffsetSentinel));
}

fn rate(e: &Engine, at: i64) -> Option<f64> {
    let pid = e.partition_of(e.find("c", "g", T, 0).unwrap());
    e.produce_rate(pid, secs(at), Engine::RATE_WINDOW_MS)
}

#[test]
fn a_steady_producers_rate_is_its_rate_however_few_points_its_history_keeps() {
    // 100 messages a second, seen by a poll every 10 s for ten minutes: the
    // history keeps the line's two ends, and the rate is over the last minute.
    let mut e = engine();
    commit(&mut e, 0, 0).unwrap();
    for s in (0..=600).step_by(10) {
        broker_end(&mut e, s, s * 100);
    }
    let r = rate(&e, 600).unwrap();
    assert!((r - 100.0).abs() < 1.0, "{r}");
}

#[test]
fn a_sighting_that_has_not_come_yet_is_not_a_drop() {
    // Data Streams dates offsets by their 10 s bucket: a flush that lands in the
    // same bucket as the one before leaves the next bucket without a sighting.
    // 100 messages a second throughout.
    let mut e = engine();
    commit(&mut e, 0, 0).unwrap();
    for s in (0..=570).step_by(10).filter(|s| *s != 560) {
        produce(&mut e, s, s * 100).unwrap();
    }
    // At 589 s the newest sighting is 19 s old and the one before 29 s.
    for now in [571, 580, 589] {
        let r = rate(&e, now).unwrap();
        assert!((r - 100.0).abs() < 1.0, "at {now} s: {r}");
    }
}

#[test]
fn a_producer_that_stops_reads_zero_once_its_sightings_are_overdue() {
    let mut e = engine();
    commit(&mut e, 0, 0).unwrap();
    for s in (0..=300).step_by(10) {
        produce(&mut e, s, s * 100).unwrap();
    }
    // No sighting after 300 s: within the grace the rate is still the last one
    // seen; past it the time without one counts as time the end stood still.
    assert!((rate(&e, 320).unwrap() - 100.0).abs() < 1.0);
    let half = rate(&e, 360).unwrap();
    assert!((half - 50.0).abs() < 1.0, "{half}");
    assert_eq!(rate(&e, 400), Some(0.0));
    // A poller that keeps seeing the same end says so at once.
    let mut polled = engine();
    commit(&mut polled, 0, 0).unwrap();
    for s in (0..=400).step_by(10) {
        broker_end(&mut polled, s, s.min(300) * 100);
    }
    assert_eq!(rate(&polled, 400), Some(0.0));
}

fn members(e: &mut Engine, at: i64, group: &str, n: u32) {
    e.observe(
        secs(at),
        &Observation::GroupMembers {
            cluster: "c",
            group,
            members: n,
        },
    )
    .unwrap();
}

/// An administrator's commit moves a group nobody is in: the group is not
/// "consuming" (the walkthrough's "OK dead — consuming: 204 messages
/// behind"); its coordinator's word that it has no member makes it a stop,
/// said as such, until a member is described again.
#[test]
fn a_group_with_no_live_member_is_a_stop_not_consuming() {
    let mut e = engine();
    for t in 0..=10 {
        produce(&mut e, t, t * 100).unwrap();
    }
    broker_end(&mut e, 10, 1_001);
    // An unknown group: the description makes none.
    members(&mut e, 10, "nobody", 0);
    assert!(e.find_group("c", "nobody").is_none());
    commit(&mut e, 10, 797).unwrap();
    members(&mut e, 10, "g", 0);
    broker_end(&mut e, 11, 1_001);
    let r = report(&e, 11);
    assert_eq!((r.status, r.lag_messages), (Status::Stop, Some(204)), "{r:?}");
    assert_eq!(r.no_members_since, Some(secs(10)));
    let gp = e.find("c", "g", T, 0).unwrap();
    let why = e.reason(gp, &r, secs(11));
    assert!(
        why.starts_with("no live members") && why.contains("204 messages"),
        "{why}"
    );
    // A member again: judged by its commits as before.
    members(&mut e, 12, "g", 1);
    commit(&mut e, 12, 900).unwrap();
    broker_end(&mut e, 12, 1_001);
    let r = report(&e, 12);
    assert_ne!(r.status, Status::Stop, "{r:?}");
    assert_eq!(r.no_members_since, None);
    // Caught up with nobody in it: nothing waits, nothing to stop.
    commit(&mut e, 13, 1_001).unwrap();
    members(&mut e, 13, "g", 0);
    broker_end(&mut e, 13, 1_001);
    assert_eq!(report(&e, 13).status, Status::Ok);
}

/// A live member assigned a partition the group never committed on: a row
/// whose lag is unknown (stale, "no committed offset"), never left out, and
/// an ordinary lag once the group commits.
#[test]
fn an_assigned_partition_without_a_commit_is_a_row_of_unknown_lag() {
    let mut e = engine();
    produce(&mut e, 0, 200).unwrap();
    broker_end(&mut e, 1, 200);
    e.observe(
        secs(1),
        &Observation::Assigned {
            group: "g",
            partition: part(0),
        },
    )
    .unwrap();
    let r = report(&e, 2);
    assert_eq!(
        (r.status, r.committed_offset, r.lag_messages),
        (Status::Stale, None, None),
        "{r:?}"
    );
    let id = e.find("c", "g", T, 0).unwrap();
    assert!(e.reason(id, &r, secs(2)).contains("no committed offset"));
    commit(&mut e, 3, 150).unwrap();
    assert_eq!(report(&e, 3).lag_messages, Some(50));
}
