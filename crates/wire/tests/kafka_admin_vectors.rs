//! streamsight_wire::kafka_admin against answers taken from a real Apache
//! Kafka 4.4.0 broker (`fixtures/kafka/capture.py` says how).

use streamsight_wire::kafka_admin::{decode_share_group_offsets_v1, decode_streams_group_describe_v0};

const SHARE: &[u8] = include_bytes!("fixtures/kafka/share_group_offsets_v1.bin");
const STREAMS: &[u8] = include_bytes!("fixtures/kafka/streams_group_describe_v0.bin");

#[test]
fn share_group_offsets_v1_from_kafka_carries_kip_1226_lag() {
    let answer = decode_share_group_offsets_v1(SHARE).unwrap();
    assert_eq!(answer.groups.len(), 1);
    let g = &answer.groups[0];
    assert_eq!((g.group_id.as_str(), g.error_code), ("workers", 0));
    let t = &g.topics[0];
    assert_eq!(t.topic_name, "jobs");
    let p = &t.partitions[0];
    // 10 records: 0 released, 1 rejected, 2 and 3 held, 4-9 accepted. Kafka's
    // own kafka-share-groups.sh --describe said START-OFFSET 0, LAG 3.
    assert_eq!(
        (p.partition_index, p.start_offset, p.lag, p.error_code),
        (0, 0, 3, 0),
        "{p:?}"
    );
}

#[test]
fn streams_group_describe_v0_from_kafka_reads_topology_and_tasks() {
    let answer = decode_streams_group_describe_v0(STREAMS).unwrap();
    let g = &answer.groups[0];
    assert_eq!(
        (
            g.group_id.as_str(),
            g.error_code,
            g.group_state.as_str(),
            g.group_epoch,
            g.assignment_epoch
        ),
        ("counter", 0, "Stable", 3, 3)
    );
    // words -> re-keyed by value (a repartition topic) -> counted (a changelog).
    let topology = g.topology.as_ref().unwrap();
    let subs = topology.subtopologies.as_ref().unwrap();
    assert_eq!(topology.epoch, 0);
    assert_eq!(
        (
            subs[0].source_topics.as_slice(),
            subs[0].repartition_sink_topics.as_slice()
        ),
        (
            &["words".to_owned()][..],
            &["counter-by-value-repartition".to_owned()][..]
        )
    );
    assert_eq!(
        subs[1].repartition_source_topics[0].name,
        "counter-by-value-repartition"
    );
    assert_eq!(
        subs[1].state_changelog_topics[0].name,
        "counter-KSTREAM-AGGREGATE-STATE-STORE-0000000002-changelog"
    );
    assert_eq!(
        subs[1].state_changelog_topics[0].topic_configs[0],
        ("cleanup.policy".to_owned(), "compact".to_owned())
    );
    // One Kafka Streams thread holding every task, as Kafka's own
    // kafka-streams-groups.sh --describe --members said (ACTIVE: 0:[0,1]; 1:[0,1]).
    assert_eq!(g.members.len(), 1);
    let m = &g.members[0];
    assert_eq!((m.member_epoch, m.topology_epoch, m.is_classic), (3, 0, false));
    assert!(m.client_id.ends_with("-StreamThread-1-consumer"), "{}", m.client_id);
    assert_eq!(m.process_id, "f795691c-316e-4220-b85c-2e4c8afb077e");
    assert_eq!(
        m.assignment.active_tasks,
        vec![("0".to_owned(), vec![0, 1]), ("1".to_owned(), vec![0, 1])]
    );
    assert_eq!(m.assignment, m.target_assignment);
    assert!(m.assignment.standby_tasks.is_empty() && m.user_endpoint.is_none());
}

/// Every prefix of a real answer is refused cleanly (truncation anywhere).
#[test]
fn every_truncation_of_a_real_answer_is_an_error_not_a_panic() {
    for end in 0..SHARE.len() {
        assert!(
            decode_share_group_offsets_v1(&SHARE[..end]).is_err(),
            "cut at {end} decoded"
        );
    }
    for end in 0..STREAMS.len() {
        assert!(
            decode_streams_group_describe_v0(&STREAMS[..end]).is_err(),
            "cut at {end} decoded"
        );
    }
}
