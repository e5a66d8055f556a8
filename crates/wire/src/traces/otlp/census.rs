//! An OTLP protobuf body counted before prost builds it: prost allocates each
//! element of a repeated field as it reads it, and an empty span is two bytes
//! on the wire but a few hundred once built, so a 10 KB gzip of five million
//! empty spans becomes gigabytes before any count of them could be checked.
//! The census walks the wire format alone (tags and lengths, nothing
//! allocated), charges every message the decoder will build at its built size,
//! and counts the spans or log records, so a body over a limit is refused
//! before the first allocation. Fields the decoder skips (attribute arrays and
//! maps, however deep) are skipped here too, without being walked.

use super::protobuf::*;
use crate::budget;
use crate::traces::DecodeError;

/// A message the decoder builds: its size once built, whether it is an item
/// (a span, a log record), and which of its fields are messages it builds.
pub(super) struct Shape {
    size: usize,
    item: bool,
    fields: &'static [(u32, &'static Shape)],
}

const fn shape<T>(item: bool, fields: &'static [(u32, &'static Shape)]) -> Shape {
    Shape {
        size: budget::element::<T>(),
        item,
        fields,
    }
}

static ANY_VALUE: Shape = shape::<AnyValue>(false, &[]);
static KEY_VALUE: Shape = shape::<KeyValue>(false, &[(2, &ANY_VALUE)]);
static RESOURCE: Shape = shape::<Resource>(false, &[(1, &KEY_VALUE)]);
static EVENT: Shape = shape::<PbEvent>(false, &[(3, &KEY_VALUE)]);
static LINK: Shape = shape::<PbLink>(false, &[]);
static STATUS: Shape = shape::<PbStatus>(false, &[]);
static SPAN: Shape = shape::<PbSpan>(true, &[(9, &KEY_VALUE), (11, &EVENT), (13, &LINK), (15, &STATUS)]);
static SCOPE_SPANS: Shape = shape::<ScopeSpans>(false, &[(2, &SPAN)]);
static RESOURCE_SPANS: Shape = shape::<ResourceSpans>(false, &[(1, &RESOURCE), (2, &SCOPE_SPANS)]);
/// `ExportTraceServiceRequest`.
pub(super) static TRACES: Shape = shape::<ExportTraceServiceRequest>(false, &[(1, &RESOURCE_SPANS)]);

static LOG_RECORD: Shape = shape::<PbLogRecord>(true, &[(5, &ANY_VALUE), (6, &KEY_VALUE)]);
static SCOPE_LOGS: Shape = shape::<ScopeLogs>(false, &[(2, &LOG_RECORD)]);
static RESOURCE_LOGS: Shape = shape::<ResourceLogs>(false, &[(1, &RESOURCE), (2, &SCOPE_LOGS)]);
/// `ExportLogsServiceRequest`.
pub(super) static LOGS: Shape = shape::<ExportLogsServiceRequest>(false, &[(1, &RESOURCE_LOGS)]);

fn bad(why: &str) -> DecodeError {
    DecodeError::Protobuf(format!("{why} (counted before decoding)"))
}

fn varint(buf: &mut &[u8]) -> Result<u64, DecodeError> {
    let mut value = 0u64;
    for i in 0..10 {
        let (&b, rest) = buf.split_first().ok_or_else(|| bad("a varint runs past the end"))?;
        *buf = rest;
        value |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Ok(value);
        }
    }
    Err(bad("a varint longer than 10 bytes"))
}

fn skip<'a>(buf: &mut &'a [u8], n: u64) -> Result<&'a [u8], DecodeError> {
    let n = usize::try_from(n).ok().filter(|&n| n <= buf.len());
    let n = n.ok_or_else(|| bad("a field runs past the end of its message"))?;
    let (field, rest) = buf.split_at(n);
    *buf = rest;
    Ok(field)
}

/// Charges the body's strings (the decoder copies each once) and every message
/// of `root`'s shape in it; the number of items, or why not.
pub(super) fn count(body: &[u8], root: &'static Shape, max_items: usize) -> Result<usize, DecodeError> {
    budget::charge(body.len()).map_err(DecodeError::Memory)?;
    let mut items = 0;
    walk(body, root, &mut items, max_items)?;
    Ok(items)
}

fn walk(mut buf: &[u8], shape: &'static Shape, items: &mut usize, max_items: usize) -> Result<(), DecodeError> {
    while !buf.is_empty() {
        let key = varint(&mut buf)?;
        let field = u32::try_from(key >> 3).map_err(|_| bad("a field number past 2^32"))?;
        match key & 7 {
            0 => {
                varint(&mut buf)?;
            }
            1 => {
                skip(&mut buf, 8)?;
            }
            5 => {
                skip(&mut buf, 4)?;
            }
            2 => {
                let len = varint(&mut buf)?;
                let inner = skip(&mut buf, len)?;
                let child = shape.fields.iter().find(|(number, _)| *number == field);
                if child.is_none() && !inner.is_empty() {
                    // A string or bytes the decoder may keep: its bytes are the
                    // body's (charged), its heap block's header and rounding not.
                    budget::charge(budget::block(1)).map_err(DecodeError::Memory)?;
                }
                if let Some((_, child)) = child {
                    budget::charge(child.size).map_err(DecodeError::Memory)?;
                    if child.item {
                        *items += 1;
                        if *items > max_items {
                            return Err(DecodeError::TooMany(max_items));
                        }
                    }
                    walk(inner, child, items, max_items)?;
                }
            }
            _ => return Err(bad("a wire type OTLP does not use (a group or an invalid one)")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::{Meter, Spent, metered};
    use prost::Message;

    fn spans(n: usize) -> Vec<u8> {
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: None,
                scope_spans: vec![ScopeSpans {
                    spans: vec![PbSpan::default(); n],
                }],
            }],
        };
        request.encode_to_vec()
    }

    #[test]
    fn empty_spans_count_as_items_and_at_their_built_size() {
        let body = spans(1_000);
        let mut meter = Meter::unbounded();
        assert_eq!(metered(&mut meter, || count(&body, &TRACES, 10_000)).unwrap(), 1_000);
        let built = body.len() + 1_000 * SPAN.size + SCOPE_SPANS.size + RESOURCE_SPANS.size;
        assert_eq!(meter.charged(), built);
        assert!(matches!(
            metered(&mut Meter::unbounded(), || count(&body, &TRACES, 999)),
            Err(DecodeError::TooMany(999))
        ));
        let mut small = Meter::new(50_000, None);
        assert!(matches!(
            metered(&mut small, || count(&body, &TRACES, 10_000)),
            Err(DecodeError::Memory(Spent::Request { limit: 50_000 }))
        ));
        assert!(small.charged() <= 50_000);
    }

    #[test]
    fn what_the_decoder_skips_is_skipped_and_broken_bodies_are_errors() {
        // An attribute whose value is an array (field 5 of AnyValue) nested
        // 20,000 deep: the decoder skips it, so does the census, without recursion.
        let mut value = Vec::new();
        for _ in 0..20_000 {
            let mut outer = vec![0x2a];
            prost::encoding::encode_varint(value.len() as u64, &mut outer);
            outer.extend_from_slice(&value);
            value = outer;
        }
        let kv = KeyValue {
            key: "deep".into(),
            value: None,
        };
        let mut kv_bytes = kv.encode_to_vec();
        kv_bytes.push(0x12);
        prost::encoding::encode_varint(value.len() as u64, &mut kv_bytes);
        kv_bytes.extend_from_slice(&value);
        let mut span = vec![0x4a];
        prost::encoding::encode_varint(kv_bytes.len() as u64, &mut span);
        span.extend_from_slice(&kv_bytes);
        let mut scope = vec![0x12];
        prost::encoding::encode_varint(span.len() as u64, &mut scope);
        scope.extend_from_slice(&span);
        let mut rs = vec![0x12];
        prost::encoding::encode_varint(scope.len() as u64, &mut rs);
        rs.extend_from_slice(&scope);
        let mut body = vec![0x0a];
        prost::encoding::encode_varint(rs.len() as u64, &mut body);
        body.extend_from_slice(&rs);
        assert_eq!(
            metered(&mut Meter::unbounded(), || count(&body, &TRACES, 10)).unwrap(),
            1
        );
        for broken in [&[0x0a, 0x05, 0x12][..], &[0x0b], &[0xff; 11], &[0x0a]] {
            assert!(matches!(
                metered(&mut Meter::unbounded(), || count(broken, &TRACES, 10)),
                Err(DecodeError::Protobuf(_))
            ));
        }
    }
}
