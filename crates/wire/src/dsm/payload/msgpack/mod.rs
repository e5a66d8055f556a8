//! The payload's msgpack, read straight off the bytes.
//!
//! Serde's derive read a 200-backlog payload in ~40 µs, a fifth of what intake
//! costs the collector: every field went through `deserialize_any` and a visitor,
//! and the limits through a thread-local. Here each field is read as what it is,
//! with the same leniency (reference.md §3): integers signed or unsigned, lists
//! and strings nil or absent, unknown keys skipped whatever they hold, structs as
//! maps (what tracers send) or as arrays in field order.

use super::{Counted, Limits, Payload, PayloadError, Text};
use std::marker::PhantomData;

mod fields;

/// Decodes msgpack, counting list elements against `limits` as they are read.
pub(super) fn decode<'a, S: Text<'a>>(
    bytes: &'a [u8],
    limits: Limits,
) -> std::result::Result<Payload<S>, PayloadError> {
    let mut r = Reader {
        buf: bytes,
        pos: 0,
        left: Counted::ALL.map(|c| limits.of(c)),
        text: PhantomData,
    };
    match r.payload() {
        Ok(p) => Ok(p),
        Err(Error::Over(what)) => Err(PayloadError::OverLimit {
            what,
            limit: limits.of(what),
        }),
        Err(Error::Eof) => Err(PayloadError::Msgpack("unexpected end of input".into())),
        Err(Error::Invalid(why)) => Err(PayloadError::Msgpack(why)),
    }
}

enum Error {
    Eof,
    Invalid(String),
    Over(Counted),
}

type Result<T> = std::result::Result<T, Error>;

/// What a value's first byte says it is.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Kind {
    Nil,
    Bool,
    Int,
    Float,
    Str,
    Bin,
    Array,
    Map,
    Ext,
    Reserved,
}

impl Kind {
    fn of(marker: u8) -> Kind {
        match marker {
            0x00..=0x7f | 0xe0..=0xff | 0xcc..=0xd3 => Kind::Int,
            0x80..=0x8f | 0xde | 0xdf => Kind::Map,
            0x90..=0x9f | 0xdc | 0xdd => Kind::Array,
            0xa0..=0xbf | 0xd9..=0xdb => Kind::Str,
            0xc0 => Kind::Nil,
            0xc2 | 0xc3 => Kind::Bool,
            0xc4..=0xc6 => Kind::Bin,
            0xca | 0xcb => Kind::Float,
            0xc7..=0xc9 | 0xd4..=0xd8 => Kind::Ext,
            0xc1 => Kind::Reserved,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Nil => "nil",
            Kind::Bool => "boolean",
            Kind::Int => "integer",
            Kind::Float => "float",
            Kind::Str => "string",
            Kind::Bin => "bytes",
            Kind::Array => "array",
            Kind::Map => "map",
            Kind::Ext => "extension",
            Kind::Reserved => "reserved byte 0xc1",
        }
    }
}

/// An integer as msgpack carries it: its sign is part of the value.
enum Int {
    U(u64),
    I(i64),
}

/// A struct's header: its entries as a map, or its fields in order as an array.
enum Shape {
    Map(u32),
    Array(u32),
}

struct Reader<'a, S> {
    buf: &'a [u8],
    pos: usize,
    /// What is left of each limit for this payload.
    left: [usize; Counted::ALL.len()],
    text: PhantomData<S>,
}

impl<'a, S: Text<'a>> Reader<'a, S> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or(Error::Eof)?;
        let bytes = self.buf.get(self.pos..end).ok_or(Error::Eof)?;
        self.pos = end;
        Ok(bytes)
    }

    fn byte(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn peek(&self) -> Result<u8> {
        self.buf.get(self.pos).copied().ok_or(Error::Eof)
    }

    fn be<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn len8(&mut self) -> Result<usize> {
        Ok(usize::from(self.byte()?))
    }

    fn len16(&mut self) -> Result<usize> {
        Ok(usize::from(u16::from_be_bytes(self.be()?)))
    }

    fn len32(&mut self) -> Result<usize> {
        usize::try_from(u32::from_be_bytes(self.be()?)).map_err(|_| Error::Eof)
    }

    fn invalid<T>(&self, found: u8, expected: &str, field: &str) -> Result<T> {
        Err(Error::Invalid(format!(
            "invalid type: {} at {field}, expected {expected}",
            Kind::of(found).name()
        )))
    }

    fn int(&mut self, field: &str) -> Result<Int> {
        let m = self.byte()?;
        Ok(match m {
            0x00..=0x7f => Int::U(u64::from(m)),
            0xe0..=0xff => Int::I(i64::from(m as i8)),
            0xcc => Int::U(u64::from(self.byte()?)),
            0xcd => Int::U(u64::from(u16::from_be_bytes(self.be()?))),
            0xce => Int::U(u64::from(u32::from_be_bytes(self.be()?))),
            0xcf => Int::U(u64::from_be_bytes(self.be()?)),
            0xd0 => Int::I(i64::from(i8::from_be_bytes(self.be()?))),
            0xd1 => Int::I(i64::from(i16::from_be_bytes(self.be()?))),
            0xd2 => Int::I(i64::from(i32::from_be_bytes(self.be()?))),
            0xd3 => Int::I(i64::from_be_bytes(self.be()?)),
            _ => return self.invalid(m, "an integer", field),
        })
    }

    /// Any integer as u64, negative ones keeping their bits (Java's signed
    /// hashes); nil is 0.
    fn flexible_u64(&mut self, field: &str) -> Result<u64> {
        if self.nil()? {
            return Ok(0);
        }
        Ok(match self.int(field)? {
            Int::U(v) => v,
            Int::I(v) => v as u64,
        })
    }

    /// Any integer as i64; a uint64 beyond i64 saturates (the engine then
    /// rejects it as out of range rather than it wrapping negative).
    fn flexible_i64(&mut self, field: &str) -> Result<i64> {
        Ok(match self.int(field)? {
            Int::U(v) => i64::try_from(v).unwrap_or(i64::MAX),
            Int::I(v) => v,
        })
    }

    fn i32(&mut self, field: &str) -> Result<i32> {
        let fits = match self.int(field)? {
            Int::U(v) => i32::try_from(v).ok(),
            Int::I(v) => i32::try_from(v).ok(),
        };
        fits.ok_or_else(|| Error::Invalid(format!("invalid value at {field}: out of range for a 32-bit integer")))
    }

    /// A bool; nil is false.
    fn bool(&mut self, field: &str) -> Result<bool> {
        match self.byte()? {
            0xc0 | 0xc2 => Ok(false),
            0xc3 => Ok(true),
            m => self.invalid(m, "a bool", field),
        }
    }

    /// Consumes a nil if that is what comes next.
    fn nil(&mut self) -> Result<bool> {
        let is = self.peek()? == 0xc0;
        if is {
            self.pos += 1;
        }
        Ok(is)
    }

    /// The bytes of a str or bin value, its marker `m` already read.
    fn text_bytes(&mut self, m: u8, expected: &str, field: &str) -> Result<&'a [u8]> {
        let n = match m {
            0xa0..=0xbf => usize::from(m & 0x1f),
            0xd9 | 0xc4 => self.len8()?,
            0xda | 0xc5 => self.len16()?,
            0xdb | 0xc6 => self.len32()?,
            _ => return self.invalid(m, expected, field),
        };
        self.take(n)
    }

    fn str(&mut self, field: &str) -> Result<&'a str> {
        let m = self.byte()?;
        std::str::from_utf8(self.text_bytes(m, "a string", field)?)
            .map_err(|_| Error::Invalid(format!("invalid value at {field}: a string that is not UTF-8")))
    }

    fn nullable_string(&mut self, field: &str) -> Result<S> {
        if self.nil()? {
            return Ok(S::default());
        }
        Ok(S::from_wire(self.str(field)?))
    }

    /// Bytes as bin, str or a list of small integers; nil is none.
    fn nullable_bytes(&mut self, field: &str) -> Result<Vec<u8>> {
        if self.nil()? {
            return Ok(Vec::new());
        }
        let m = self.peek()?;
        match Kind::of(m) {
            Kind::Bin | Kind::Str => {
                self.pos += 1;
                Ok(self.text_bytes(m, "bytes", field)?.to_vec())
            }
            Kind::Array => {
                let n = self.array_len(field)?;
                // Each element takes at least a byte: a lying length stops at the end.
                let mut out = Vec::with_capacity(n.min(self.buf.len() - self.pos));
                for _ in 0..n {
                    let byte = match self.int(field)? {
                        Int::U(v) => u8::try_from(v).ok(),
                        Int::I(v) => u8::try_from(v).ok(),
                    };
                    out.push(byte.ok_or_else(|| Error::Invalid(format!("invalid value at {field}: not a byte")))?);
                }
                Ok(out)
            }
            _ => self.invalid(m, "bytes", field),
        }
    }

    fn array_len(&mut self, field: &str) -> Result<usize> {
        let m = self.byte()?;
        match m {
            0x90..=0x9f => Ok(usize::from(m & 0x0f)),
            0xdc => self.len16(),
            0xdd => self.len32(),
            _ => self.invalid(m, "a list", field),
        }
    }

    fn shape(&mut self, field: &str) -> Result<Shape> {
        let m = self.byte()?;
        let n = match m {
            0x80..=0x8f => return Ok(Shape::Map(u32::from(m & 0x0f))),
            0x90..=0x9f => return Ok(Shape::Array(u32::from(m & 0x0f))),
            0xde | 0xdc => u32::from(u16::from_be_bytes(self.be()?)),
            0xdf | 0xdd => u32::from_be_bytes(self.be()?),
            _ => return self.invalid(m, "a map", field),
        };
        Ok(if m == 0xde || m == 0xdf {
            Shape::Map(n)
        } else {
            Shape::Array(n)
        })
    }

    /// A nullable list whose length is charged to `what`: a declared length over
    /// what is left fails before any element is read.
    fn list<T>(&mut self, what: Counted, field: &str, mut item: impl FnMut(&mut Self) -> Result<T>) -> Result<Vec<T>> {
        if self.nil()? {
            return Ok(Vec::new());
        }
        let n = self.array_len(field)?;
        let left = &mut self.left[what as usize];
        if *left < n {
            return Err(Error::Over(what));
        }
        *left -= n;
        let mut out = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            out.push(item(self)?);
        }
        Ok(out)
    }

    fn strings(&mut self, what: Counted, field: &str) -> Result<Vec<S>> {
        self.list(what, field, |r| Ok(S::from_wire(r.str(field)?)))
    }

    /// Reads a struct: `field(reader, index)` for each of `names` present, by
    /// name in a map or by position in an array; anything else is skipped. A
    /// name given twice is an error, as it was with serde's derive.
    fn fields(
        &mut self,
        what: &str,
        names: &[&str],
        mut field: impl FnMut(&mut Self, usize) -> Result<()>,
    ) -> Result<()> {
        match self.shape(what)? {
            Shape::Map(n) => {
                let mut seen = 0u32;
                for _ in 0..n {
                    let key = self.key(what)?;
                    match key.and_then(|k| names.iter().position(|name| name.as_bytes() == k)) {
                        Some(i) => {
                            if seen & (1 << i) != 0 {
                                return Err(Error::Invalid(format!("duplicate field `{}` in {what}", names[i])));
                            }
                            seen |= 1 << i;
                            field(self, i)?;
                        }
                        None => self.skip()?,
                    }
                }
            }
            Shape::Array(n) => {
                for i in 0..n as usize {
                    if i < names.len() {
                        field(self, i)?;
                    } else {
                        self.skip()?;
                    }
                }
            }
        }
        Ok(())
    }

    /// A map key: a string's bytes, or none for a key of another type (skipped
    /// with its value).
    fn key(&mut self, what: &str) -> Result<Option<&'a [u8]>> {
        let m = self.peek()?;
        match m {
            0xa0..=0xbf | 0xd9..=0xdb | 0xc4..=0xc6 => Ok(Some(self.str(what)?.as_bytes())),
            _ => {
                self.skip()?;
                Ok(None)
            }
        }
    }

    /// Skips one value of any type without recursing: a header adds what it
    /// holds to the count still to skip, and every value takes at least a byte,
    /// so a lying header stops at the end of the input.
    fn skip(&mut self) -> Result<()> {
        let mut pending: u64 = 1;
        while pending > 0 {
            pending -= 1;
            let m = self.byte()?;
            let (skip, holds) = match m {
                0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => (0, 0),
                0x80..=0x8f => (0, 2 * u64::from(m & 0x0f)),
                0x90..=0x9f => (0, u64::from(m & 0x0f)),
                0xa0..=0xbf => (usize::from(m & 0x1f), 0),
                0xcc | 0xd0 => (1, 0),
                0xcd | 0xd1 => (2, 0),
                0xce | 0xd2 | 0xca => (4, 0),
                0xcf | 0xd3 | 0xcb => (8, 0),
                0xd9 | 0xc4 => (self.len8()?, 0),
                0xda | 0xc5 => (self.len16()?, 0),
                0xdb | 0xc6 => (self.len32()?, 0),
                0xdc => (0, self.len16()? as u64),
                0xdd => (0, self.len32()? as u64),
                0xde => (0, 2 * self.len16()? as u64),
                0xdf => (0, 2 * self.len32()? as u64),
                0xd4 => (2, 0),
                0xd5 => (3, 0),
                0xd6 => (5, 0),
                0xd7 => (9, 0),
                0xd8 => (17, 0),
                0xc7 => (self.len8()? + 1, 0),
                0xc8 => (self.len16()? + 1, 0),
                0xc9 => (self.len32()?.saturating_add(1), 0),
                0xc1 => return Err(Error::Invalid("reserved byte 0xc1".into())),
            };
            self.take(skip)?;
            pending += holds;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{
        Backlog, Bucket, ConsumeStart, ConsumedCount, Delivery, FailedSends, ProducedCount, SkippedRange, StatsPoint,
        encode, gunzip,
    };
    use super::*;
    use proptest::prelude::*;

    fn limits() -> Limits {
        Limits::default()
    }

    #[test]
    fn structs_may_come_as_arrays_in_field_order() {
        let mut b = Vec::new();
        rmp::encode::write_map_len(&mut b, 1).unwrap();
        rmp::encode::write_str(&mut b, "Stats").unwrap();
        rmp::encode::write_array_len(&mut b, 1).unwrap();
        // Start, Duration, Stats, Backlogs, and one field too many.
        rmp::encode::write_array_len(&mut b, 5).unwrap();
        rmp::encode::write_uint(&mut b, 5).unwrap();
        rmp::encode::write_nil(&mut b).unwrap();
        rmp::encode::write_nil(&mut b).unwrap();
        rmp::encode::write_array_len(&mut b, 1).unwrap();
        rmp::encode::write_array_len(&mut b, 2).unwrap();
        rmp::encode::write_array_len(&mut b, 1).unwrap();
        rmp::encode::write_str(&mut b, "type:kafka_produce").unwrap();
        rmp::encode::write_sint(&mut b, -3).unwrap();
        rmp::encode::write_str(&mut b, "extra").unwrap();
        let p = decode::<String>(&b, limits()).unwrap_or_else(|_| panic!("decodes"));
        let bucket = &p.stats[0];
        assert_eq!((bucket.start, bucket.duration), (5, 0));
        assert_eq!(bucket.backlogs[0].tags, ["type:kafka_produce"]);
        assert_eq!(bucket.backlogs[0].value, -3);
    }

    #[test]
    fn unknown_keys_are_skipped_whatever_they_hold() {
        let mut b = Vec::new();
        rmp::encode::write_map_len(&mut b, 4).unwrap();
        rmp::encode::write_str(&mut b, "Nested").unwrap();
        rmp::encode::write_map_len(&mut b, 2).unwrap();
        rmp::encode::write_str(&mut b, "a").unwrap();
        rmp::encode::write_array_len(&mut b, 3).unwrap();
        rmp::encode::write_f64(&mut b, 1.5).unwrap();
        rmp::encode::write_ext_meta(&mut b, 3, 7).unwrap();
        b.extend_from_slice(&[1, 2, 3]);
        rmp::encode::write_bin(&mut b, &[0xc1; 40]).unwrap();
        rmp::encode::write_uint(&mut b, 9).unwrap();
        rmp::encode::write_str(&mut b, &"x".repeat(300)).unwrap();
        rmp::encode::write_uint(&mut b, 1).unwrap();
        rmp::encode::write_bool(&mut b, true).unwrap();
        rmp::encode::write_str(&mut b, "Service").unwrap();
        rmp::encode::write_str(&mut b, "billing").unwrap();
        rmp::encode::write_str(&mut b, "Unknown").unwrap();
        rmp::encode::write_nil(&mut b).unwrap();
        let p = decode::<String>(&b, limits()).unwrap_or_else(|_| panic!("decodes"));
        assert_eq!(p.service, "billing");
    }

    #[test]
    fn wrong_shapes_are_errors_that_say_where() {
        let err = |b: &[u8]| match decode::<&str>(b, limits()) {
            Err(e) => e.to_string(),
            Ok(p) => panic!("decoded {p:?}"),
        };
        let mut twice = Vec::new();
        rmp::encode::write_map_len(&mut twice, 2).unwrap();
        for _ in 0..2 {
            rmp::encode::write_str(&mut twice, "Env").unwrap();
            rmp::encode::write_str(&mut twice, "prod").unwrap();
        }
        assert!(err(&twice).contains("duplicate field `Env`"));
        let mut wide = Vec::new();
        rmp::encode::write_map_len(&mut wide, 1).unwrap();
        rmp::encode::write_str(&mut wide, "StreamsightFailedSends").unwrap();
        rmp::encode::write_array_len(&mut wide, 1).unwrap();
        rmp::encode::write_map_len(&mut wide, 1).unwrap();
        rmp::encode::write_str(&mut wide, "Partition").unwrap();
        rmp::encode::write_uint(&mut wide, 1 << 40).unwrap();
        assert!(err(&wide).contains("Partition"), "{}", err(&wide));
        let mut float = Vec::new();
        rmp::encode::write_map_len(&mut float, 1).unwrap();
        rmp::encode::write_str(&mut float, "ProductMask").unwrap();
        rmp::encode::write_f32(&mut float, 1.0).unwrap();
        assert!(err(&float).contains("invalid type: float at ProductMask"));
        assert!(err(&[0x81]).contains("end of input"));
        // A lying header on a skipped value stops at the end of the input.
        let mut lying = Vec::new();
        rmp::encode::write_map_len(&mut lying, 1).unwrap();
        rmp::encode::write_str(&mut lying, "Unknown").unwrap();
        rmp::encode::write_array_len(&mut lying, u32::MAX).unwrap();
        assert!(err(&lying).contains("end of input"));
    }

    fn name() -> impl Strategy<Value = String> {
        "[a-z:_0-9é]{0,12}"
    }

    prop_compose! {
        fn backlog()(tags in prop::collection::vec(name(), 0..5), value: i64) -> Backlog {
            Backlog { tags, value }
        }
    }

    prop_compose! {
        fn point()(
            edge_tags in prop::collection::vec(name(), 0..4),
            hash: u64,
            parent_hash: u64,
            sketches in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..20), 3),
            timestamp_type in name(),
        ) -> StatsPoint {
            StatsPoint {
                edge_tags,
                hash,
                parent_hash,
                pathway_latency: sketches[0].clone(),
                edge_latency: sketches[1].clone(),
                payload_size: sketches[2].clone(),
                timestamp_type,
            }
        }
    }

    prop_compose! {
        fn bucket()(
            start: u64,
            duration: u64,
            stats in prop::collection::vec(point(), 0..3),
            backlogs in prop::collection::vec(backlog(), 0..6),
        ) -> Bucket {
            Bucket { start, duration, stats, backlogs }
        }
    }

    prop_compose! {
        fn failed()(
            topic in name(), partition: i32, error in name(), count: u64, cluster in name(),
            window_ms: i64, trace_ids in prop::collection::vec(name(), 0..3), recovered: bool,
        ) -> FailedSends {
            FailedSends { topic, partition, error, count, cluster, window_ms, trace_ids, recovered }
        }
    }

    prop_compose! {
        fn delivery()(
            cluster in name(),
            produced in prop::collection::vec((name(), any::<i32>(), any::<i64>(), any::<u64>(), any::<i64>(), any::<i64>()), 0..3),
            consumed in prop::collection::vec((name(), name(), any::<i32>(), any::<i64>(), any::<[u64; 3]>(), prop::collection::vec(name(), 0..2)), 0..3),
            skipped in prop::collection::vec((name(), name(), any::<i32>(), any::<[i64; 3]>()), 0..3),
            started in prop::collection::vec((name(), name(), any::<i32>(), any::<[i64; 2]>()), 0..3),
        ) -> Delivery {
            Delivery {
                cluster,
                produced: produced.into_iter().map(|(topic, partition, window_ms, count, first_offset, last_offset)| ProducedCount {
                    topic, partition, window_ms, count, first_offset, last_offset,
                }).collect(),
                consumed: consumed.into_iter().map(|(group, topic, partition, window_ms, [received, failed, dead_lettered], trace_ids)| ConsumedCount {
                    group, topic, partition, window_ms, received, failed, dead_lettered, trace_ids,
                }).collect(),
                skipped: skipped.into_iter().map(|(group, topic, partition, [first_offset, last_offset, at_ms])| SkippedRange {
                    group, topic, partition, first_offset, last_offset, at_ms,
                }).collect(),
                started: started.into_iter().map(|(group, topic, partition, [first_offset, at_ms])| ConsumeStart {
                    group, topic, partition, first_offset, at_ms,
                }).collect(),
            }
        }
    }

    prop_compose! {
        fn payload()(
            strings in prop::collection::vec(name(), 7),
            stats in prop::collection::vec(bucket(), 0..3),
            process_tags in prop::collection::vec(name(), 0..3),
            product_mask: u64,
            failed_sends in prop::collection::vec(failed(), 0..3),
            delivery in delivery(),
        ) -> Payload {
            let mut s = strings.into_iter();
            let mut next = || s.next().unwrap_or_default();
            Payload {
                env: next(), service: next(), lang: next(), tracer_version: next(), version: next(),
                stats, process_tags, product_mask, primary_tag: next(), hostname: next(),
                failed_sends, delivery,
            }
        }
    }

    proptest! {
        /// What the SDK encodes is read back whole. Integers above i64::MAX in
        /// signed fields saturate, so the generator keeps to what round-trips.
        #[test]
        fn encoded_payloads_read_back_whole(p in payload()) {
            let raw = gunzip(&encode(&p), 1 << 24).unwrap_or_default();
            let back = decode::<String>(&raw, Limits::unbounded_counts(1 << 24)).map_err(|e| e.to_string());
            prop_assert_eq!(back, Ok(p));
        }
    }
}
