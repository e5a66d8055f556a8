//! Kafka admin messages that kafka-protocol 0.18 does not encode, written from
//! Apache Kafka 4.4's message schemas (`clients/src/main/resources/common/message`,
//! read back from `kafka-clients` 4.4.0's generated `SCHEMAS`):
//!
//! - DescribeShareGroupOffsets (API 90) **v1**, whose answer carries KIP-1226's
//!   share-group lag per share-partition (v0, all kafka-protocol has, carries
//!   only the start offset);
//! - StreamsGroupDescribe (API 89) **v0** (KIP-1071): a streams group's state,
//!   epochs, topology (source, repartition and changelog topics) and members
//!   with their tasks.
//!
//! Both are flexible versions: compact strings and arrays (unsigned varint
//! length + 1, 0 for null) and a tagged-field section closing every struct.
//! Only message bodies are here; the header and the frame are the poller's.
//! Every length read is checked against the bytes left before anything is
//! allocated for it, so a hostile answer costs at most its own size.

use std::fmt;

/// DescribeShareGroupOffsets' API key.
pub const DESCRIBE_SHARE_GROUP_OFFSETS: i16 = 90;
/// StreamsGroupDescribe's API key.
pub const STREAMS_GROUP_DESCRIBE: i16 = 89;

/// An answer these decoders could not read: which message, where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    pub message: &'static str,
    /// Byte offset in the body where reading failed.
    pub at: usize,
    pub what: String,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} answer unreadable at byte {}: {}",
            self.message, self.at, self.what
        )
    }
}

impl std::error::Error for DecodeError {}

/// A reader over one message body.
struct Reader<'a> {
    message: &'static str,
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(message: &'static str, bytes: &'a [u8]) -> Self {
        Self { message, bytes, at: 0 }
    }

    fn error(&self, what: impl Into<String>) -> DecodeError {
        DecodeError {
            message: self.message,
            at: self.at,
            what: what.into(),
        }
    }

    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.left() < n {
            return Err(self.error(format!("{n} bytes wanted, {} left", self.left())));
        }
        let out = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn i8(&mut self) -> Result<i8, DecodeError> {
        Ok(i8::from_be_bytes(self.array()?))
    }

    fn bool(&mut self) -> Result<bool, DecodeError> {
        Ok(self.i8()? != 0)
    }

    fn i16(&mut self) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// An unsigned varint of at most 32 bits.
    fn uvarint(&mut self) -> Result<u32, DecodeError> {
        let mut value: u32 = 0;
        for i in 0..5 {
            let b = self.take(1)?[0];
            if i == 4 && b > 0x0f {
                return Err(self.error("unsigned varint longer than 32 bits"));
            }
            value |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.error("unsigned varint longer than 5 bytes"))
    }

    /// A compact length: `None` for null; a count whose items (each at least
    /// `min_item` bytes) could not fit in the bytes left is refused.
    fn compact_len(&mut self, min_item: usize) -> Result<Option<usize>, DecodeError> {
        let n = self.uvarint()? as usize;
        let Some(len) = n.checked_sub(1) else {
            return Ok(None);
        };
        if len.saturating_mul(min_item) > self.left() {
            return Err(self.error(format!("{len} items claimed, {} bytes left", self.left())));
        }
        Ok(Some(len))
    }

    fn nullable_string(&mut self) -> Result<Option<String>, DecodeError> {
        let Some(len) = self.compact_len(1)? else {
            return Ok(None);
        };
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec())
            .map(Some)
            .map_err(|_| self.error("a string that is not UTF-8"))
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        self.nullable_string()?
            .ok_or_else(|| self.error("null where a string is required"))
    }

    fn nullable_array<T>(
        &mut self,
        min_item: usize,
        mut item: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Option<Vec<T>>, DecodeError> {
        let Some(len) = self.compact_len(min_item)? else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(len);
        for _ in 0..len {
            out.push(item(self)?);
        }
        Ok(Some(out))
    }

    fn array_of<T>(
        &mut self,
        min_item: usize,
        item: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        self.nullable_array(min_item, item)?
            .ok_or_else(|| self.error("null where an array is required"))
    }

    /// Skips a struct's tagged fields: none of them is read here.
    fn tagged_fields(&mut self) -> Result<(), DecodeError> {
        let count = self.uvarint()?;
        for _ in 0..count {
            let _tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }

    fn end(&self) -> Result<(), DecodeError> {
        if self.left() != 0 {
            return Err(self.error(format!("{} bytes after the message's end", self.left())));
        }
        Ok(())
    }
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_compact_len(out: &mut Vec<u8>, len: usize) {
    put_uvarint(out, u32::try_from(len + 1).unwrap_or(u32::MAX));
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    put_compact_len(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

/// No tagged fields.
fn put_no_tags(out: &mut Vec<u8>) {
    out.push(0);
}

// ---------------------------------------------------------------------------
// DescribeShareGroupOffsets v1

/// The body of a DescribeShareGroupOffsets v1 request asking each group for
/// all the topics it reads (topics null).
pub fn describe_share_group_offsets_v1(groups: &[String]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + groups.iter().map(|g| g.len() + 4).sum::<usize>());
    put_compact_len(&mut out, groups.len());
    for g in groups {
        put_string(&mut out, g);
        out.push(0); // topics: null, every topic the group has
        put_no_tags(&mut out);
    }
    put_no_tags(&mut out);
    out
}

/// A DescribeShareGroupOffsets v1 answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareGroupOffsets {
    pub throttle_time_ms: i32,
    pub groups: Vec<ShareGroupOffsetsGroup>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareGroupOffsetsGroup {
    pub group_id: String,
    pub topics: Vec<ShareGroupOffsetsTopic>,
    pub error_code: i16,
    pub error_message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareGroupOffsetsTopic {
    pub topic_name: String,
    pub topic_id: [u8; 16],
    pub partitions: Vec<ShareGroupOffsetsPartition>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareGroupOffsetsPartition {
    pub partition_index: i32,
    /// The share-partition start offset; -1 before the group read any.
    pub start_offset: i64,
    pub leader_epoch: i32,
    /// KIP-1226's share-group lag: records from the start offset to the
    /// end not yet acknowledged; -1 where the broker cannot say.
    pub lag: i64,
    pub error_code: i16,
    pub error_message: Option<String>,
}

/// Reads a DescribeShareGroupOffsets v1 answer's body.
pub fn decode_share_group_offsets_v1(body: &[u8]) -> Result<ShareGroupOffsets, DecodeError> {
    let mut r = Reader::new("DescribeShareGroupOffsets v1", body);
    let throttle_time_ms = r.i32()?;
    let groups = r.array_of(6, |r| {
        let group_id = r.string()?;
        let topics = r.array_of(19, |r| {
            let topic_name = r.string()?;
            let topic_id = r.array::<16>()?;
            let partitions = r.array_of(28, |r| {
                let p = ShareGroupOffsetsPartition {
                    partition_index: r.i32()?,
                    start_offset: r.i64()?,
                    leader_epoch: r.i32()?,
                    lag: r.i64()?,
                    error_code: r.i16()?,
                    error_message: r.nullable_string()?,
                };
                r.tagged_fields()?;
                Ok(p)
            })?;
            r.tagged_fields()?;
            Ok(ShareGroupOffsetsTopic {
                topic_name,
                topic_id,
                partitions,
            })
        })?;
        let g = ShareGroupOffsetsGroup {
            group_id,
            topics,
            error_code: r.i16()?,
            error_message: r.nullable_string()?,
        };
        r.tagged_fields()?;
        Ok(g)
    })?;
    r.tagged_fields()?;
    r.end()?;
    Ok(ShareGroupOffsets {
        throttle_time_ms,
        groups,
    })
}

// ---------------------------------------------------------------------------
// StreamsGroupDescribe v0

/// The body of a StreamsGroupDescribe v0 request.
pub fn streams_group_describe_v0(group_ids: &[String]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + group_ids.iter().map(|g| g.len() + 2).sum::<usize>());
    put_compact_len(&mut out, group_ids.len());
    for g in group_ids {
        put_string(&mut out, g);
    }
    out.push(0); // include_authorized_operations: false
    put_no_tags(&mut out);
    out
}

/// A StreamsGroupDescribe v0 answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamsGroups {
    pub throttle_time_ms: i32,
    pub groups: Vec<StreamsGroup>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamsGroup {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub group_id: String,
    pub group_state: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    /// Null until the group's topology is initialised.
    pub topology: Option<StreamsTopology>,
    pub members: Vec<StreamsMember>,
    pub authorized_operations: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamsTopology {
    pub epoch: i32,
    pub subtopologies: Option<Vec<Subtopology>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subtopology {
    pub subtopology_id: String,
    /// The topics it reads that the application does not make.
    pub source_topics: Vec<String>,
    /// The repartition topics it writes.
    pub repartition_sink_topics: Vec<String>,
    /// Its state stores' changelogs.
    pub state_changelog_topics: Vec<TopicInfo>,
    /// The repartition topics it reads.
    pub repartition_source_topics: Vec<TopicInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicInfo {
    pub name: String,
    pub partitions: i32,
    pub replication_factor: i16,
    pub topic_configs: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamsMember {
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub topology_epoch: i32,
    pub process_id: String,
    /// Interactive queries' endpoint (`application.server`), host and port.
    pub user_endpoint: Option<(String, u16)>,
    pub client_tags: Vec<(String, String)>,
    pub task_offsets: Vec<TaskOffset>,
    pub task_end_offsets: Vec<TaskOffset>,
    pub assignment: StreamsAssignment,
    pub target_assignment: StreamsAssignment,
    pub is_classic: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskOffset {
    pub subtopology_id: String,
    pub partition: i32,
    pub offset: i64,
}

/// Tasks by kind: (sub-topology id, partitions).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamsAssignment {
    pub active_tasks: Vec<(String, Vec<i32>)>,
    pub standby_tasks: Vec<(String, Vec<i32>)>,
    pub warmup_tasks: Vec<(String, Vec<i32>)>,
}

fn key_value(r: &mut Reader<'_>) -> Result<(String, String), DecodeError> {
    let kv = (r.string()?, r.string()?);
    r.tagged_fields()?;
    Ok(kv)
}

fn topic_info(r: &mut Reader<'_>) -> Result<TopicInfo, DecodeError> {
    let t = TopicInfo {
        name: r.string()?,
        partitions: r.i32()?,
        replication_factor: r.i16()?,
        topic_configs: r.array_of(3, key_value)?,
    };
    r.tagged_fields()?;
    Ok(t)
}

fn task_offset(r: &mut Reader<'_>) -> Result<TaskOffset, DecodeError> {
    let t = TaskOffset {
        subtopology_id: r.string()?,
        partition: r.i32()?,
        offset: r.i64()?,
    };
    r.tagged_fields()?;
    Ok(t)
}

fn task_ids(r: &mut Reader<'_>) -> Result<(String, Vec<i32>), DecodeError> {
    let t = (r.string()?, r.array_of(4, Reader::i32)?);
    r.tagged_fields()?;
    Ok(t)
}

fn assignment(r: &mut Reader<'_>) -> Result<StreamsAssignment, DecodeError> {
    let a = StreamsAssignment {
        active_tasks: r.array_of(3, task_ids)?,
        standby_tasks: r.array_of(3, task_ids)?,
        warmup_tasks: r.array_of(3, task_ids)?,
    };
    r.tagged_fields()?;
    Ok(a)
}

/// A nullable struct: -1 for null, 1 then the struct.
fn nullable_struct<T>(
    r: &mut Reader<'_>,
    read: impl FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
) -> Result<Option<T>, DecodeError> {
    match r.i8()? {
        -1 => Ok(None),
        1 => read(r).map(Some),
        other => Err(r.error(format!("nullable struct marker {other}"))),
    }
}

fn streams_member(r: &mut Reader<'_>) -> Result<StreamsMember, DecodeError> {
    let m = StreamsMember {
        member_id: r.string()?,
        member_epoch: r.i32()?,
        instance_id: r.nullable_string()?,
        rack_id: r.nullable_string()?,
        client_id: r.string()?,
        client_host: r.string()?,
        topology_epoch: r.i32()?,
        process_id: r.string()?,
        user_endpoint: nullable_struct(r, |r| {
            let e = (r.string()?, r.u16()?);
            r.tagged_fields()?;
            Ok(e)
        })?,
        client_tags: r.array_of(3, key_value)?,
        task_offsets: r.array_of(14, task_offset)?,
        task_end_offsets: r.array_of(14, task_offset)?,
        assignment: assignment(r)?,
        target_assignment: assignment(r)?,
        is_classic: r.bool()?,
    };
    r.tagged_fields()?;
    Ok(m)
}

/// Reads a StreamsGroupDescribe v0 answer's body.
pub fn decode_streams_group_describe_v0(body: &[u8]) -> Result<StreamsGroups, DecodeError> {
    let mut r = Reader::new("StreamsGroupDescribe v0", body);
    let throttle_time_ms = r.i32()?;
    let groups = r.array_of(20, |r| {
        let error_code = r.i16()?;
        let error_message = r.nullable_string()?;
        let group_id = r.string()?;
        let group_state = r.string()?;
        let group_epoch = r.i32()?;
        let assignment_epoch = r.i32()?;
        let topology = nullable_struct(r, |r| {
            let epoch = r.i32()?;
            let subtopologies = r.nullable_array(6, |r| {
                let s = Subtopology {
                    subtopology_id: r.string()?,
                    source_topics: r.array_of(1, Reader::string)?,
                    repartition_sink_topics: r.array_of(1, Reader::string)?,
                    state_changelog_topics: r.array_of(9, topic_info)?,
                    repartition_source_topics: r.array_of(9, topic_info)?,
                };
                r.tagged_fields()?;
                Ok(s)
            })?;
            r.tagged_fields()?;
            Ok(StreamsTopology { epoch, subtopologies })
        })?;
        let members = r.array_of(28, streams_member)?;
        let authorized_operations = r.i32()?;
        r.tagged_fields()?;
        Ok(StreamsGroup {
            error_code,
            error_message,
            group_id,
            group_state,
            group_epoch,
            assignment_epoch,
            topology,
            members,
            authorized_operations,
        })
    })?;
    r.tagged_fields()?;
    r.end()?;
    Ok(StreamsGroups {
        throttle_time_ms,
        groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_offsets_request_asks_every_topic_of_each_group() {
        let body = describe_share_group_offsets_v1(&["sg".to_owned()]);
        // groups: 1 (+1), "sg" (2+1), topics null, tags, tags
        assert_eq!(body, vec![2, 3, b's', b'g', 0, 0, 0]);
    }

    #[test]
    fn streams_describe_request_names_its_groups() {
        let body = streams_group_describe_v0(&["app".to_owned()]);
        assert_eq!(body, vec![2, 4, b'a', b'p', b'p', 0, 0]);
    }

    #[test]
    fn a_claimed_length_beyond_the_bytes_is_refused_before_allocation() {
        // throttle, then groups claiming 2^28 items.
        let body = [0, 0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x01];
        let e = decode_share_group_offsets_v1(&body).unwrap_err();
        assert!(e.what.contains("items claimed"), "{e}");
        let e = decode_streams_group_describe_v0(&body).unwrap_err();
        assert!(e.what.contains("items claimed"), "{e}");
    }

    #[test]
    fn truncated_answers_and_trailing_bytes_are_errors() {
        assert!(decode_share_group_offsets_v1(&[0, 0]).is_err());
        // throttle 0, no groups (1), no tags, then a stray byte
        let e = decode_share_group_offsets_v1(&[0, 0, 0, 0, 1, 0, 9]).unwrap_err();
        assert!(e.what.contains("after the message's end"), "{e}");
        assert!(decode_streams_group_describe_v0(&[0, 0, 0, 0, 1, 0]).is_ok());
    }

    #[test]
    fn an_overlong_varint_is_an_error() {
        let e = decode_share_group_offsets_v1(&[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]).unwrap_err();
        assert!(e.what.contains("varint"), "{e}");
    }

    proptest::proptest! {
        /// Whatever bytes arrive, the decoders answer, never panic.
        #[test]
        fn any_bytes_decode_or_fail_cleanly(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let _ = decode_share_group_offsets_v1(&bytes);
            let _ = decode_streams_group_describe_v0(&bytes);
        }
    }
}
