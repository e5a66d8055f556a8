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

/// A request over group ids whose body `encode` writes, and its answer, which
/// `decode` reads, at `version` only: kafka-protocol's traits for both.
macro_rules! unencoded_request {
    (
        $(#[$doc:meta])* $request:ident, $(#[$answer_doc:meta])* $answer:ident($decoded:ty),
        key: $key:expr, version: $version:expr, name: $name:literal,
        encode: $encode:path, decode: $decode:path $(,)?
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Default)]
        pub(super) struct $request(pub Vec<String>);

        $(#[$answer_doc])*
        #[derive(Debug, Clone, PartialEq)]
        pub(super) struct $answer(pub $decoded);

        impl Message for $request {
            const VERSIONS: VersionRange = VersionRange { min: $version, max: $version };
            const DEPRECATED_VERSIONS: Option<VersionRange> = None;
        }

        impl Encodable for $request {
            fn encode<B: ByteBufMut>(&self, buf: &mut B, _version: i16) -> anyhow::Result<()> {
                buf.put_slice(&$encode(&self.0));
                Ok(())
            }
            fn compute_size(&self, _version: i16) -> anyhow::Result<usize> {
                Ok($encode(&self.0).len())
            }
        }

        impl Decodable for $request {
            fn decode<B: ByteBuf>(_buf: &mut B, _version: i16) -> anyhow::Result<Self> {
                Err(one_way(concat!($name, "'s request")))
            }
        }

        impl HeaderVersion for $request {
            fn header_version(_version: i16) -> i16 {
                REQUEST_HEADER
            }
        }

        impl Request for $request {
            const KEY: i16 = $key;
            type Response = $answer;
        }

        impl Message for $answer {
            const VERSIONS: VersionRange = VersionRange { min: $version, max: $version };
            const DEPRECATED_VERSIONS: Option<VersionRange> = None;
        }

        impl Encodable for $answer {
            fn encode<B: ByteBufMut>(&self, _buf: &mut B, _version: i16) -> anyhow::Result<()> {
                Err(one_way(concat!($name, "'s answer")))
            }
            fn compute_size(&self, _version: i16) -> anyhow::Result<usize> {
                Err(one_way(concat!($name, "'s answer")))
            }
        }

        impl Decodable for $answer {
            fn decode<B: ByteBuf>(buf: &mut B, _version: i16) -> anyhow::Result<Self> {
                Ok(Self($decode(&body(buf))?))
            }
        }

        impl HeaderVersion for $answer {
            fn header_version(_version: i16) -> i16 {
                RESPONSE_HEADER
            }
        }
    };
}

unencoded_request!(
    /// DescribeShareGroupOffsets v1 for these groups, every topic each reads.
    ShareGroupOffsetsV1,
    /// Its answer.
    ShareGroupOffsetsV1Answer(kafka_admin::ShareGroupOffsets),
    key: kafka_admin::DESCRIBE_SHARE_GROUP_OFFSETS,
    version: 1,
    name: "DescribeShareGroupOffsets v1",
    encode: kafka_admin::describe_share_group_offsets_v1,
    decode: kafka_admin::decode_share_group_offsets_v1,
);

unencoded_request!(
    /// StreamsGroupDescribe v0 for these groups.
    StreamsGroupDescribeV0,
    /// Its answer.
    StreamsGroupDescribeV0Answer(kafka_admin::StreamsGroups),
    key: kafka_admin::STREAMS_GROUP_DESCRIBE,
    version: 0,
    name: "StreamsGroupDescribe",
    encode: kafka_admin::streams_group_describe_v0,
    decode: kafka_admin::decode_streams_group_describe_v0,
);
