//! Data Streams payloads as tracers and the SDK send them, and their delivery:
//! for every test and bench that feeds a collector.

pub use streamsight_wire::dsm::payload::Payload;
use streamsight_wire::dsm::payload::{Backlog, Bucket, FailedSends, encode};

const NANOS_PER_MS: u64 = 1_000_000;
const BUCKET_MS: u64 = 10_000;

pub fn produce(topic: &str, partition: i32, offset: i64) -> Backlog {
    Backlog {
        tags: vec![
            "type:kafka_produce".into(),
            format!("topic:{topic}"),
            format!("partition:{partition}"),
        ],
        value: offset,
    }
}

pub fn commit(group: &str, topic: &str, partition: i32, offset: i64) -> Backlog {
    Backlog {
        tags: vec![
            "type:kafka_commit".into(),
            format!("consumer_group:{group}"),
            format!("topic:{topic}"),
            format!("partition:{partition}"),
        ],
        value: offset,
    }
}

/// A backlog with these tags, as a tracer reports it.
pub fn backlog(tags: &[&str], value: i64) -> Backlog {
    Backlog {
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        value,
    }
}

/// One bucket of 10 s starting at `start_ns`, with `backlogs` and no stats.
pub fn bucket(start_ns: u64, backlogs: Vec<Backlog>) -> Bucket {
    Bucket {
        start: start_ns,
        duration: BUCKET_MS * NANOS_PER_MS,
        stats: vec![],
        backlogs,
    }
}

/// A payload whose backlogs are each dated `at_ms` (the end of their bucket).
pub fn payload(service: &str, dated: Vec<(i64, Vec<Backlog>)>) -> Payload {
    Payload {
        env: "prod".into(),
        service: service.into(),
        lang: "rust".into(),
        stats: dated
            .into_iter()
            .map(|(at_ms, backlogs)| Bucket {
                start: (at_ms as u64).saturating_sub(BUCKET_MS) * NANOS_PER_MS,
                duration: BUCKET_MS * NANOS_PER_MS,
                stats: vec![],
                backlogs,
            })
            .collect(),
        ..Default::default()
    }
}

/// Failed sends of `topic` partition `partition`, as the SDK reports them.
pub fn failed_sends(topic: &str, partition: i32, error: &str, count: u64, window_ms: i64) -> FailedSends {
    FailedSends {
        topic: topic.into(),
        partition,
        error: error.into(),
        count,
        window_ms,
        ..Default::default()
    }
}

/// POSTs `payload` to the intake at `intake` and asserts it was accepted.
pub async fn post(client: &reqwest::Client, intake: &str, payload: &Payload) {
    let resp = client
        .post(format!("{intake}/v0.1/pipeline_stats"))
        .header("Content-Type", "application/msgpack")
        .header("Content-Encoding", "gzip")
        .body(encode(payload))
        .send()
        .await
        .unwrap();
    let status = resp.status();
    assert!(
        status.is_success(),
        "{status}: {}",
        resp.text().await.unwrap_or_default()
    );
}

/// A Data Streams payload (msgpack, not gzipped) of one bucket holding `n`
/// empty stats points: a few bytes on the wire, `n` points once decoded; the
/// abuse suites' bomb.
pub fn empty_stats_points(n: u32) -> Vec<u8> {
    // {"Stats": [{"Stats": [{} × n]}]}, written by hand.
    let mut raw = vec![0x81, 0xa5];
    raw.extend_from_slice(b"Stats");
    raw.extend_from_slice(&[0x91, 0x81, 0xa5]);
    raw.extend_from_slice(b"Stats");
    raw.push(0xdd);
    raw.extend_from_slice(&n.to_be_bytes());
    raw.extend(std::iter::repeat_n(0x80, n as usize));
    raw
}
