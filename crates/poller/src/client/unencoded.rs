//! Requests kafka-protocol 0.18 does not encode (DescribeShareGroupOffsets
//! v1, StreamsGroupDescribe), sent over the same connections as every other:
//! `streamsight_wire::kafka_admin`'s bodies wrapped in kafka-protocol's
//! traits, so version negotiation, pipelining and fan-out are the ones the
//! rest of the poller uses.

use bytes::Buf;
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, Request, VersionRange};
use streamsight_wire::kafka_admin;

/// Flexible requests carry header v2, their answers header v1.
const REQUEST_HEADER: i16 = 2;
const RESPONSE_HEADER: i16 = 1;

fn one_way(what: &str) -> anyhow::Error {
    anyhow::anyhow!("{what} is only sent by the poller, never read by it")
}

/// Whole body bytes, read to the end of the frame.
fn body<B: ByteBuf>(buf: &mut B) -> Vec<u8> {
    let mut out = vec![0; buf.remaining()];
    buf.copy_to_slice(&mut out);
    out
}

/// DescribeShareGroupOffsets v1 for these groups, every topic each reads.
#[derive(Debug, Clone, PartialEq, Default)]
pub(super) struct ShareGroupOffsetsV1(pub Vec<String>);

/// Its answer.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ShareGroupOffsetsV1Answer(pub kafka_admin::ShareGroupOffsets);

impl Message for ShareGroupOffsetsV1 {
    const VERSIONS: VersionRange = VersionRange { min: 1, max: 1 };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Encodable for ShareGroupOffsetsV1 {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, _version: i16) -> anyhow::Result<()> {
        buf.put_slice(&kafka_admin::describe_share_group_offsets_v1(&self.0));
        Ok(())
    }
    fn compute_size(&self, _version: i16) -> anyhow::Result<usize> {
        Ok(kafka_admin::describe_share_group_offsets_v1(&self.0).len())
    }
}

impl Decodable for ShareGroupOffsetsV1 {
    fn decode<B: ByteBuf>(_buf: &mut B, _version: i16) -> anyhow::Result<Self> {
        Err(one_way("DescribeShareGroupOffsets v1's request"))
    }
}

impl HeaderVersion for ShareGroupOffsetsV1 {
    fn header_version(_version: i16) -> i16 {
        REQUEST_HEADER
    }
}

impl Request for ShareGroupOffsetsV1 {
    const KEY: i16 = kafka_admin::DESCRIBE_SHARE_GROUP_OFFSETS;
    type Response = ShareGroupOffsetsV1Answer;
}

impl Message for ShareGroupOffsetsV1Answer {
    const VERSIONS: VersionRange = VersionRange { min: 1, max: 1 };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Encodable for ShareGroupOffsetsV1Answer {
    fn encode<B: ByteBufMut>(&self, _buf: &mut B, _version: i16) -> anyhow::Result<()> {
        Err(one_way("DescribeShareGroupOffsets v1's answer"))
    }
    fn compute_size(&self, _version: i16) -> anyhow::Result<usize> {
        Err(one_way("DescribeShareGroupOffsets v1's answer"))
    }
}

impl Decodable for ShareGroupOffsetsV1Answer {
    fn decode<B: ByteBuf>(buf: &mut B, _version: i16) -> anyhow::Result<Self> {
        Ok(Self(kafka_admin::decode_share_group_offsets_v1(&body(buf))?))
    }
}

impl HeaderVersion for ShareGroupOffsetsV1Answer {
    fn header_version(_version: i16) -> i16 {
        RESPONSE_HEADER
    }
}

/// StreamsGroupDescribe v0 for these groups.
#[derive(Debug, Clone, PartialEq, Default)]
pub(super) struct StreamsGroupDescribeV0(pub Vec<String>);

#[derive(Debug, Clone, PartialEq)]
pub(super) struct StreamsGroupDescribeV0Answer(pub kafka_admin::StreamsGroups);

impl Message for StreamsGroupDescribeV0 {
    const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Encodable for StreamsGroupDescribeV0 {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, _version: i16) -> anyhow::Result<()> {
        buf.put_slice(&kafka_admin::streams_group_describe_v0(&self.0));
        Ok(())
    }
    fn compute_size(&self, _version: i16) -> anyhow::Result<usize> {
        Ok(kafka_admin::streams_group_describe_v0(&self.0).len())
    }
}

impl Decodable for StreamsGroupDescribeV0 {
    fn decode<B: ByteBuf>(_buf: &mut B, _version: i16) -> anyhow::Result<Self> {
        Err(one_way("StreamsGroupDescribe's request"))
    }
}

impl HeaderVersion for StreamsGroupDescribeV0 {
    fn header_version(_version: i16) -> i16 {
        REQUEST_HEADER
    }
}

impl Request for StreamsGroupDescribeV0 {
    const KEY: i16 = kafka_admin::STREAMS_GROUP_DESCRIBE;
    type Response = StreamsGroupDescribeV0Answer;
}

impl Message for StreamsGroupDescribeV0Answer {
    const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Encodable for StreamsGroupDescribeV0Answer {
    fn encode<B: ByteBufMut>(&self, _buf: &mut B, _version: i16) -> anyhow::Result<()> {
        Err(one_way("StreamsGroupDescribe's answer"))
    }
    fn compute_size(&self, _version: i16) -> anyhow::Result<usize> {
        Err(one_way("StreamsGroupDescribe's answer"))
    }
}

impl Decodable for StreamsGroupDescribeV0Answer {
    fn decode<B: ByteBuf>(buf: &mut B, _version: i16) -> anyhow::Result<Self> {
        Ok(Self(kafka_admin::decode_streams_group_describe_v0(&body(buf))?))
    }
}

impl HeaderVersion for StreamsGroupDescribeV0Answer {
    fn header_version(_version: i16) -> i16 {
        RESPONSE_HEADER
    }
}
