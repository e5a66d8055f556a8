//! Backlogs: `(tags, value)` pairs a tracer reports per stats bucket.
//!
//! - `type:kafka_produce, topic:T, partition:P[, kafka_cluster_id:C]`: value is the
//!   acknowledged record's offset;
//! - `type:kafka_commit, consumer_group:G, topic:T, partition:P[, kafka_cluster_id:C]`:
//!   value is the next offset the group will read;
//! - `type:kafka_high_watermark, topic:T, partition:P`: value is the high watermark
//!   the client saw (Go tracers only).
//!
//! Tags this module does not know are ignored. Validity of the numbers (partition -1,
//! offset -1) is the engine's call, not the parser's: such backlogs parse and are
//! rejected, and counted, there.

use streamsight_core::{EndOffsetSource, Observation, PartitionRef, RejectReason};

/// Why a backlog could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BacklogError {
    #[error("backlog type {0:?} is not one of kafka_produce, kafka_commit, kafka_high_watermark")]
    UnknownType(String),
    #[error("backlog has no {0} tag")]
    MissingTag(&'static str),
    #[error("tag {tag:?} is malformed: {why}")]
    MalformedTag { tag: String, why: &'static str },
}

impl BacklogError {
    /// The engine's counter this error is counted under.
    pub fn reason(&self) -> RejectReason {
        match self {
            BacklogError::UnknownType(_) => RejectReason::UnknownBacklogType,
            BacklogError::MissingTag(_) => RejectReason::MissingTag,
            BacklogError::MalformedTag { .. } => RejectReason::MalformedTag,
        }
    }
}

#[derive(Default)]
struct Tags<'a> {
    kind: Option<&'a str>,
    topic: Option<&'a str>,
    partition: Option<&'a str>,
    group: Option<&'a str>,
    cluster: Option<&'a str>,
}

/// The value of a backlog's `key:` tag, if it has one.
pub fn tag<'a, S: AsRef<str>>(tags: &'a [S], key: &str) -> Option<&'a str> {
    tags.iter()
        .find_map(|t| t.as_ref().strip_prefix(key)?.strip_prefix(':'))
}

/// Reads one backlog. `default_cluster` names the cluster when the tracer did not.
pub fn parse<'a, S: AsRef<str>>(
    tags: &'a [S],
    value: i64,
    default_cluster: &'a str,
) -> Result<Observation<'a>, BacklogError> {
    read(tags, value, &|named| named.unwrap_or(default_cluster))
}

/// Reads one backlog into `cluster`, whatever its `kafka_cluster_id` says: a
/// caller that knows clusters by other names (a polled cluster's id) or by
/// their topics has resolved it.
pub fn parse_in<'a, S: AsRef<str>>(
    tags: &'a [S],
    value: i64,
    cluster: &'a str,
) -> Result<Observation<'a>, BacklogError> {
    read(tags, value, &|_| cluster)
}

fn read<'a, S: AsRef<str>>(
    tags: &'a [S],
    value: i64,
    cluster: &dyn Fn(Option<&'a str>) -> &'a str,
) -> Result<Observation<'a>, BacklogError> {
    let mut t = Tags::default();
    for tag in tags {
        let tag = tag.as_ref();
        let Some((key, val)) = tag.split_once(':') else {
            return Err(BacklogError::MalformedTag {
                tag: tag.to_owned(),
                why: "expected key:value",
            });
        };
        let slot = match key {
            "type" => &mut t.kind,
            "topic" => &mut t.topic,
            "partition" => &mut t.partition,
            "consumer_group" => &mut t.group,
            "kafka_cluster_id" => &mut t.cluster,
            _ => continue,
        };
        if slot.is_some() {
            return Err(BacklogError::MalformedTag {
                tag: tag.to_owned(),
                why: "the key appears twice",
            });
        }
        *slot = Some(val);
    }
    let kind = t.kind.ok_or(BacklogError::MissingTag("type"))?;
    let topic = t
        .topic
        .filter(|s| !s.is_empty())
        .ok_or(BacklogError::MissingTag("topic"))?;
    let raw_partition = t.partition.ok_or(BacklogError::MissingTag("partition"))?;
    let partition = raw_partition.parse::<i32>().map_err(|_| BacklogError::MalformedTag {
        tag: format!("partition:{raw_partition}"),
        why: "not a 32-bit integer",
    })?;
    let partition = PartitionRef {
        cluster: cluster(t.cluster.filter(|c| !c.is_empty())),
        topic,
        partition,
    };
    match kind {
        "kafka_produce" => Ok(Observation::Produced {
            partition,
            offset: value,
        }),
        "kafka_commit" => {
            let group = t
                .group
                .filter(|g| !g.is_empty())
                .ok_or(BacklogError::MissingTag("consumer_group"))?;
            Ok(Observation::Committed {
                group,
                partition,
                offset: value,
            })
        }
        "kafka_high_watermark" => Ok(Observation::EndOffset {
            partition,
            offset: value,
            source: EndOffsetSource::ClientHighWatermark,
        }),
        other => Err(BacklogError::UnknownType(other.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part<'a>(cluster: &'a str, topic: &'a str, partition: i32) -> PartitionRef<'a> {
        PartitionRef {
            cluster,
            topic,
            partition,
        }
    }

    #[test]
    fn produce_with_cluster_id() {
        let tags = [
            "type:kafka_produce",
            "topic:orders",
            "partition:3",
            "kafka_cluster_id:abc",
        ];
        assert_eq!(
            parse(&tags, 41, "default"),
            Ok(Observation::Produced {
                partition: part("abc", "orders", 3),
                offset: 41
            })
        );
    }

    #[test]
    fn commit_in_the_default_cluster() {
        let tags = [
            "partition:0",
            "consumer_group:billing",
            "topic:orders",
            "type:kafka_commit",
        ];
        assert_eq!(
            parse(&tags, 500, "default"),
            Ok(Observation::Committed {
                group: "billing",
                partition: part("default", "orders", 0),
                offset: 500
            })
        );
    }

    #[test]
    fn high_watermark_is_a_client_report() {
        let tags = ["type:kafka_high_watermark", "topic:orders", "partition:1"];
        assert!(matches!(
            parse(&tags, 9, "d"),
            Ok(Observation::EndOffset {
                source: EndOffsetSource::ClientHighWatermark,
                offset: 9,
                ..
            })
        ));
    }

    #[test]
    fn the_failed_send_placeholder_parses_for_the_engine_to_reject() {
        let tags = ["type:kafka_produce", "topic:orders", "partition:-1"];
        assert_eq!(
            parse(&tags, -1, "d"),
            Ok(Observation::Produced {
                partition: part("d", "orders", -1),
                offset: -1
            })
        );
    }

    #[test]
    fn unknown_tags_are_ignored() {
        let tags = ["type:kafka_produce", "topic:t", "partition:0", "env:prod", "novalue:"];
        assert!(parse(&tags, 1, "d").is_ok());
    }

    #[test]
    fn bad_backlogs_say_why() {
        let cases: [(&[&str], RejectReason); 6] = [
            (&["topic:t", "partition:0"], RejectReason::MissingTag),
            (&["type:kafka_produce", "partition:0"], RejectReason::MissingTag),
            (
                &["type:kafka_commit", "topic:t", "partition:0"],
                RejectReason::MissingTag,
            ),
            (
                &["type:kafka_produce", "topic:t", "partition:x"],
                RejectReason::MalformedTag,
            ),
            (
                &["type:kafka_produce", "topic:t", "partition:0", "topic:u"],
                RejectReason::MalformedTag,
            ),
            (
                &["type:rabbitmq", "topic:t", "partition:0"],
                RejectReason::UnknownBacklogType,
            ),
        ];
        for (tags, reason) in cases {
            let err = parse(tags, 1, "d").unwrap_err();
            assert_eq!(err.reason(), reason, "{tags:?}: {err}");
        }
    }
}
