//! The binary form of a batch of log records: what one writer batch accepted,
//! stored as one row.
//!
//! ```text
//! batch   = version:u8  strings  count:varint  record*
//! strings = count:varint  (len:varint bytes)*        every name once per batch
//! record  = kind:u8  at:zigzag-delta  fields
//! ```
//!
//! Names are indexes into the batch's strings, numbers are (zigzag) LEB128
//! varints, `at` is the difference from the previous record's. Spans are fields
//! in order, their names in the batch's table (a trace's spans repeat them).
//! Pathway points, delivery facts and the rest, rare and nested, are
//! length-prefixed JSON.

use std::collections::HashMap;
use std::sync::Arc;
use streamsight_core::journey::{Messaging, Operation, Source, Span, TraceId};
use streamsight_core::{EndOffsetSource, Millis, ObservationOf, OwnedObservation, Partition, Record, RejectReason};

const VERSION: u8 = 1;

/// The first byte of every record.
mod kind {
    pub(super) const PRODUCED: u8 = 0;
    pub(super) const PRODUCE_FAILED: u8 = 1;
    pub(super) const COMMITTED: u8 = 2;
    pub(super) const END_OFFSET: u8 = 3;
    pub(super) const LOG_START: u8 = 4;
    pub(super) const CONTROL_MARKER: u8 = 5;
    pub(super) const TOPIC_RECREATED: u8 = 6;
    pub(super) const UNREACHABLE: u8 = 7;
    pub(super) const GROUP_DELETED: u8 = 8;
    pub(super) const TOPIC_DELETED: u8 = 9;
    pub(super) const REJECTED: u8 = 10;
    pub(super) const PATHWAY: u8 = 11;
    pub(super) const DELIVERY: u8 = 12;
    pub(super) const AUDIT: u8 = 13;
    pub(super) const ALERT: u8 = 14;
    pub(super) const SPAN: u8 = 15;
    pub(super) const LOG: u8 = 16;
    pub(super) const STABLE_OFFSET: u8 = 17;
    pub(super) const RECORD_WRITTEN: u8 = 18;
    pub(super) const OFFSETS_RESET: u8 = 19;
    pub(super) const REDRIVE: u8 = 20;
    pub(super) const GROUP_MEMBERS: u8 = 21;
    pub(super) const ASSIGNED: u8 = 22;
    pub(super) const TOPIC_RETENTION: u8 = 23;
    pub(super) const TRANSACTION_HOLDER: u8 = 24;
    pub(super) const UNREADABLE: u8 = 25;
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CodecError {
    #[error("batch version {0} is not one this build reads")]
    Version(u8),
    #[error("batch ends in the middle of a value")]
    Truncated,
    #[error("number out of range")]
    Range,
    #[error("name {0} is not in the batch's table")]
    Name(u64),
    #[error("a name is not UTF-8")]
    Utf8,
    #[error("unknown record kind {0}")]
    Kind(u8),
    #[error("unknown {what} {value}")]
    Enum { what: &'static str, value: u8 },
    #[error("nested record: {0}")]
    Json(String),
    #[error("{0} bytes left after the last record")]
    Trailing(usize),
}

/// Encodes `records` as one batch, appended to `out`.
pub fn encode<'a>(records: impl IntoIterator<Item = &'a Record>, out: &mut Vec<u8>) {
    let records = records.into_iter();
    let mut names = Names::default();
    let mut body = Vec::with_capacity(records.size_hint().0 * 12);
    let mut last_at = 0i64;
    let mut count = 0u64;
    for r in records {
        count += 1;
        let at = r.at().0;
        let delta = at.wrapping_sub(last_at);
        last_at = at;
        let head = |kind: u8, body: &mut Vec<u8>| {
            body.push(kind);
            put_i64(body, delta);
        };
        match r {
            Record::Observation { observation, .. } => {
                use ObservationOf as O;
                let part = |p: &'a Partition<Arc<str>>, names: &mut Names<'a>, body: &mut Vec<u8>| {
                    put_u64(body, names.id(&p.cluster));
                    put_u64(body, names.id(&p.topic));
                    put_i64(body, i64::from(p.partition));
                };
                match observation {
                    O::Produced { partition, offset } => {
                        head(kind::PRODUCED, &mut body);
                        part(partition, &mut names, &mut body);
                        put_i64(&mut body, *offset);
                    }
                    O::ProduceFailed { partition, error } => {
                        head(kind::PRODUCE_FAILED, &mut body);
                        part(partition, &mut names, &mut body);
                        put_u64(&mut body, names.id(error));
                    }
                    O::Committed {
                        group,
                        partition,
                        offset,
                    } => {
                        head(kind::COMMITTED, &mut body);
                        put_u64(&mut body, names.id(group));
                        part(partition, &mut names, &mut body);
                        put_i64(&mut body, *offset);
                    }
                    O::OffsetsReset {
                        group,
                        partition,
                        offset,
                    } => {
                        head(kind::OFFSETS_RESET, &mut body);
                        put_u64(&mut body, names.id(group));
                        part(partition, &mut names, &mut body);
                        put_i64(&mut body, *offset);
                    }
                    O::EndOffset {
                        partition,
                        offset,
                        source,
                    } => {
                        head(kind::END_OFFSET, &mut body);
                        part(partition, &mut names, &mut body);
                        put_i64(&mut body, *offset);
                        body.push(match source {
                            EndOffsetSource::Broker => 0,
                            EndOffsetSource::ClientHighWatermark => 1,
                        });
                    }
                    O::LogStart { partition, offset } => {
                        head(kind::LOG_START, &mut body);
                        part(partition, &mut names, &mut body);
                        put_i64(&mut body, *offset);
                    }
                    O::ControlMarker { partition, offset } => {
                        head(kind::CONTROL_MARKER, &mut body);
                        part(partition, &mut names, &mut body);
                        put_i64(&mut body, *offset);
                    }
                    O::StableOffset { partition, offset } => {
                        head(kind::STABLE_OFFSET, &mut body);
                        part(partition, &mut names, &mut body);
                        put_i64(&mut body, *offset);
                    }
                    O::TransactionHolder {
                        partition,
                        producer_id,
                        producer_epoch,
                        transactional_id,
                        timeout_ms,
                    } => {
                        head(kind::TRANSACTION_HOLDER, &mut body);
                        part(partition, &mut names, &mut body);
                        put_i64(&mut body, *producer_id);
                        put_i64(&mut body, i64::from(*producer_epoch));
                        // Each optional part: a flag, then the value when set.
                        match transactional_id {
                            Some(id) => {
                                body.push(1);
                                put_u64(&mut body, names.id(id));
                            }
                            None => body.push(0),
                        }
                        match timeout_ms {
                            Some(ms) => {
                                body.push(1);
                                put_i64(&mut body, i64::from(*ms));
                            }
                            None => body.push(0),
                        }
                    }
                    O::Unreadable { partition, from, to } => {
                        head(kind::UNREADABLE, &mut body);
                        part(partition, &mut names, &mut body);
                        put_i64(&mut body, *from);
                        put_i64(&mut body, *to);
                    }
                    O::RecordWritten { partition, offset } => {
                        head(kind::RECORD_WRITTEN, &mut body);
                        part(partition, &mut names, &mut body);
                        put_i64(&mut body, *offset);
                    }
                    O::TopicRecreated { cluster, topic } | O::TopicDeleted { cluster, topic } => {
                        let k = if matches!(observation, O::TopicRecreated { .. }) {
                            kind::TOPIC_RECREATED
                        } else {
                            kind::TOPIC_DELETED
                        };
                        head(k, &mut body);
                        put_u64(&mut body, names.id(cluster));
                        put_u64(&mut body, names.id(topic));
                    }
                    O::Unreachable { partition } => {
                        head(kind::UNREACHABLE, &mut body);
                        part(partition, &mut names, &mut body);
                    }
                    O::GroupDeleted { cluster, group } => {
                        head(kind::GROUP_DELETED, &mut body);
                        put_u64(&mut body, names.id(cluster));
                        put_u64(&mut body, names.id(group));
                    }
                    O::GroupMembers {
                        cluster,
                        group,
                        members,
                    } => {
                        head(kind::GROUP_MEMBERS, &mut body);
                        put_u64(&mut body, names.id(cluster));
                        put_u64(&mut body, names.id(group));
                        put_u64(&mut body, u64::from(*members));
                    }
                    O::TopicRetention {
                        cluster,
                        topic,
                        retention_ms,
                    } => {
                        head(kind::TOPIC_RETENTION, &mut body);
                        put_u64(&mut body, names.id(cluster));
                        put_u64(&mut body, names.id(topic));
                        put_i64(&mut body, *retention_ms);
                    }
                    O::Assigned { group, partition } => {
                        head(kind::ASSIGNED, &mut body);
                        put_u64(&mut body, names.id(group));
                        part(partition, &mut names, &mut body);
                    }
                }
            }
            Record::Rejected { reason, .. } => {
                head(kind::REJECTED, &mut body);
                body.push(RejectReason::ALL.iter().position(|r| r == reason).unwrap_or(0) as u8);
            }
            Record::Pathway { point, .. } => {
                head(kind::PATHWAY, &mut body);
                put_json(&mut body, point);
            }
            Record::Delivery { fact, .. } => {
                head(kind::DELIVERY, &mut body);
                put_json(&mut body, fact);
            }
            Record::Audit { event, .. } => {
                head(kind::AUDIT, &mut body);
                put_json(&mut body, event);
            }
            Record::Alert { event, .. } => {
                head(kind::ALERT, &mut body);
                put_json(&mut body, event);
            }
            Record::Span { span, .. } => {
                head(kind::SPAN, &mut body);
                put_span(span, &mut names, &mut body);
            }
            Record::Log { line, .. } => {
                head(kind::LOG, &mut body);
                put_json(&mut body, line);
            }
            Record::Redrive { event, .. } => {
                head(kind::REDRIVE, &mut body);
                put_json(&mut body, event);
            }
        }
    }
    out.push(VERSION);
    put_u64(out, names.list.len() as u64);
    for name in &names.list {
        put_u64(out, name.len() as u64);
        out.extend_from_slice(name.as_bytes());
    }
    put_u64(out, count);
    out.extend_from_slice(&body);
}

/// Decodes one batch.
pub fn decode(bytes: &[u8]) -> Result<Vec<Record>, CodecError> {
    let mut r = Reader { bytes, pos: 0 };
    let version = r.u8()?;
    if version != VERSION {
        return Err(CodecError::Version(version));
    }
    let n_names = r.len()?;
    let mut names: Vec<Arc<str>> = Vec::with_capacity(n_names);
    for _ in 0..n_names {
        let len = r.len()?;
        let raw = r.take(len)?;
        names.push(std::str::from_utf8(raw).map_err(|_| CodecError::Utf8)?.into());
    }
    let n = r.len()?;
    let mut out = Vec::with_capacity(n);
    let mut at = 0i64;
    for _ in 0..n {
        let k = r.u8()?;
        at = at.wrapping_add(r.i64()?);
        let at = Millis(at);
        let name = |r: &mut Reader<'_>| -> Result<Arc<str>, CodecError> {
            let i = r.u64()?;
            names
                .get(usize::try_from(i).map_err(|_| CodecError::Name(i))?)
                .cloned()
                .ok_or(CodecError::Name(i))
        };
        let part = |r: &mut Reader<'_>| -> Result<Partition<Arc<str>>, CodecError> {
            Ok(Partition {
                cluster: name(r)?,
                topic: name(r)?,
                partition: i32::try_from(r.i64()?).map_err(|_| CodecError::Range)?,
            })
        };
        let observation = |o: OwnedObservation| Record::Observation { at, observation: o };
        use ObservationOf as O;
        out.push(match k {
            kind::PRODUCED => observation(O::Produced {
                partition: part(&mut r)?,
                offset: r.i64()?,
            }),
            kind::PRODUCE_FAILED => observation(O::ProduceFailed {
                partition: part(&mut r)?,
                error: name(&mut r)?,
            }),
            kind::COMMITTED => observation(O::Committed {
                group: name(&mut r)?,
                partition: part(&mut r)?,
                offset: r.i64()?,
            }),
            kind::OFFSETS_RESET => observation(O::OffsetsReset {
                group: name(&mut r)?,
                partition: part(&mut r)?,
                offset: r.i64()?,
            }),
            kind::END_OFFSET => observation(O::EndOffset {
                partition: part(&mut r)?,
                offset: r.i64()?,
                source: match r.u8()? {
                    0 => EndOffsetSource::Broker,
                    1 => EndOffsetSource::ClientHighWatermark,
                    value => return Err(CodecError::Enum { what: "source", value }),
                },
            }),
            kind::LOG_START => observation(O::LogStart {
                partition: part(&mut r)?,
                offset: r.i64()?,
            }),
            kind::CONTROL_MARKER => observation(O::ControlMarker {
                partition: part(&mut r)?,
                offset: r.i64()?,
            }),
            kind::STABLE_OFFSET => observation(O::StableOffset {
                partition: part(&mut r)?,
                offset: r.i64()?,
            }),
            kind::TRANSACTION_HOLDER => {
                let partition = part(&mut r)?;
                let producer_id = r.i64()?;
                let producer_epoch = i32::try_from(r.i64()?).map_err(|_| CodecError::Range)?;
                let transactional_id = match r.u8()? {
                    0 => None,
                    _ => Some(name(&mut r)?),
                };
                let timeout_ms = match r.u8()? {
                    0 => None,
                    _ => Some(i32::try_from(r.i64()?).map_err(|_| CodecError::Range)?),
                };
                observation(O::TransactionHolder {
                    partition,
                    producer_id,
                    producer_epoch,
                    transactional_id,
                    timeout_ms,
                })
            }
            kind::UNREADABLE => observation(O::Unreadable {
                partition: part(&mut r)?,
                from: r.i64()?,
                to: r.i64()?,
            }),
            kind::RECORD_WRITTEN => observation(O::RecordWritten {
                partition: part(&mut r)?,
                offset: r.i64()?,
            }),
            kind::TOPIC_RECREATED => observation(O::TopicRecreated {
                cluster: name(&mut r)?,
                topic: name(&mut r)?,
            }),
            kind::UNREACHABLE => observation(O::Unreachable {
                partition: part(&mut r)?,
            }),
            kind::GROUP_DELETED => observation(O::GroupDeleted {
                cluster: name(&mut r)?,
                group: name(&mut r)?,
            }),
            kind::GROUP_MEMBERS => observation(O::GroupMembers {
                cluster: name(&mut r)?,
                group: name(&mut r)?,
                members: u32::try_from(r.u64()?).map_err(|_| CodecError::Range)?,
            }),
            kind::TOPIC_RETENTION => observation(O::TopicRetention {
                cluster: name(&mut r)?,
                topic: name(&mut r)?,
                retention_ms: r.i64()?,
            }),
            kind::ASSIGNED => observation(O::Assigned {
                group: name(&mut r)?,
                partition: part(&mut r)?,
            }),
            kind::TOPIC_DELETED => observation(O::TopicDeleted {
                cluster: name(&mut r)?,
                topic: name(&mut r)?,
            }),
            kind::REJECTED => {
                let value = r.u8()?;
                let reason = *RejectReason::ALL
                    .get(usize::from(value))
                    .ok_or(CodecError::Enum { what: "reason", value })?;
                Record::Rejected { at, reason }
            }
            kind::PATHWAY => Record::Pathway {
                at,
                point: Box::new(r.json()?),
            },
            kind::DELIVERY => Record::Delivery {
                at,
                fact: Box::new(r.json()?),
            },
            kind::AUDIT => Record::Audit { at, event: r.json()? },
            kind::ALERT => Record::Alert {
                at,
                event: Box::new(r.json()?),
            },
            kind::SPAN => Record::Span {
                at,
                span: Box::new(read_span(&mut r, &name)?),
            },
            kind::LOG => Record::Log { at, line: r.json()? },
            kind::REDRIVE => Record::Redrive { at, event: r.json()? },
            other => return Err(CodecError::Kind(other)),
        });
    }
    match bytes.len() - r.pos {
        0 => Ok(out),
        left => Err(CodecError::Trailing(left)),
    }
}

/// The batch's name table, built as records are encoded.
#[derive(Default)]
struct Names<'a> {
    ids: HashMap<&'a str, u64, foldhash::fast::RandomState>,
    list: Vec<&'a str>,
}

impl<'a> Names<'a> {
    fn id(&mut self, name: &'a str) -> u64 {
        let next = self.list.len() as u64;
        *self.ids.entry(name).or_insert_with(|| {
            self.list.push(name);
            next
        })
    }
}

fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_i64(out: &mut Vec<u8>, v: i64) {
    put_u64(out, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_json(out: &mut Vec<u8>, value: &impl serde::Serialize) {
    // Our own types: serializing them cannot fail.
    let json = serde_json::to_vec(value).unwrap_or_default();
    put_u64(out, json.len() as u64);
    out.extend_from_slice(&json);
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn u8(&mut self) -> Result<u8, CodecError> {
        let b = *self.bytes.get(self.pos).ok_or(CodecError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    fn u64(&mut self) -> Result<u64, CodecError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(CodecError::Range)
    }

    fn i64(&mut self) -> Result<i64, CodecError> {
        let v = self.u64()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    /// A length, bounded by what is left: a corrupt length cannot allocate.
    fn len(&mut self) -> Result<usize, CodecError> {
        let v = self.u64()?;
        usize::try_from(v)
            .ok()
            .filter(|&n| n <= self.bytes.len() - self.pos)
            .ok_or(CodecError::Truncated)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        let end = self.pos.checked_add(n).ok_or(CodecError::Truncated)?;
        let s = self.bytes.get(self.pos..end).ok_or(CodecError::Truncated)?;
        self.pos = end;
        Ok(s)
    }

    fn json<T: serde::de::DeserializeOwned>(&mut self) -> Result<T, CodecError> {
        let len = self.len()?;
        serde_json::from_slice(self.take(len)?).map_err(|e| CodecError::Json(e.to_string()))
    }
}

/// Which optional fields of a span are present.
mod has {
    pub(super) const ERROR: u8 = 1;
    pub(super) const MESSAGING: u8 = 2;
    pub(super) const PARTITION: u8 = 4;
    pub(super) const OFFSET: u8 = 8;
    pub(super) const GROUP: u8 = 16;
    pub(super) const OPERATION: u8 = 32;
}

fn put_u128(out: &mut Vec<u8>, v: u128) {
    put_u64(out, (v >> 64) as u64);
    put_u64(out, v as u64);
}

fn put_span<'a>(s: &'a Span, names: &mut Names<'a>, out: &mut Vec<u8>) {
    let m = s.messaging.as_ref();
    let mut flags = 0u8;
    let mut set = |on: bool, bit: u8| {
        if on {
            flags |= bit;
        }
    };
    set(s.error.is_some(), has::ERROR);
    set(m.is_some(), has::MESSAGING);
    set(m.is_some_and(|m| m.partition.is_some()), has::PARTITION);
    set(m.is_some_and(|m| m.offset.is_some()), has::OFFSET);
    set(m.is_some_and(|m| m.group.is_some()), has::GROUP);
    set(m.is_some_and(|m| m.operation.is_some()), has::OPERATION);
    out.push(flags);
    put_u128(out, s.trace_id.0);
    put_u64(out, s.span_id);
    put_u64(out, s.parent_id);
    put_u64(out, names.id(&s.name));
    put_u64(out, names.id(&s.service));
    put_i64(out, s.start_ns);
    put_i64(out, s.duration_ns);
    out.push(match s.source {
        Source::Otlp => 0,
        Source::Datadog => 1,
        Source::FluentBit => 2,
    });
    if let Some(e) = &s.error {
        put_u64(out, names.id(e));
    }
    if let Some(m) = m {
        put_u64(out, names.id(&m.cluster));
        put_u64(out, names.id(&m.topic));
        if let Some(p) = m.partition {
            put_i64(out, i64::from(p));
        }
        if let Some(o) = m.offset {
            put_i64(out, o);
        }
        if let Some(g) = &m.group {
            put_u64(out, names.id(g));
        }
        if let Some(op) = m.operation {
            out.push(match op {
                Operation::Send => 0,
                Operation::Receive => 1,
                Operation::Process => 2,
            });
        }
    }
    put_u64(out, s.links.len() as u64);
    for (t, id) in &s.links {
        put_u128(out, t.0);
        put_u64(out, *id);
    }
}

fn read_span(
    r: &mut Reader<'_>,
    name: &dyn Fn(&mut Reader<'_>) -> Result<Arc<str>, CodecError>,
) -> Result<Span, CodecError> {
    let flags = r.u8()?;
    let u128 =
        |r: &mut Reader<'_>| -> Result<u128, CodecError> { Ok((u128::from(r.u64()?) << 64) | u128::from(r.u64()?)) };
    let text = |r: &mut Reader<'_>| -> Result<String, CodecError> { Ok(name(r)?.to_string()) };
    let trace_id = TraceId(u128(r)?);
    let span_id = r.u64()?;
    let parent_id = r.u64()?;
    let span_name = text(r)?;
    let service = text(r)?;
    let start_ns = r.i64()?;
    let duration_ns = r.i64()?;
    let source = match r.u8()? {
        0 => Source::Otlp,
        1 => Source::Datadog,
        2 => Source::FluentBit,
        value => return Err(CodecError::Enum { what: "source", value }),
    };
    let error = if flags & has::ERROR != 0 { Some(text(r)?) } else { None };
    let messaging = if flags & has::MESSAGING != 0 {
        Some(Messaging {
            cluster: text(r)?,
            topic: text(r)?,
            partition: if flags & has::PARTITION != 0 {
                Some(i32::try_from(r.i64()?).map_err(|_| CodecError::Range)?)
            } else {
                None
            },
            offset: if flags & has::OFFSET != 0 { Some(r.i64()?) } else { None },
            group: if flags & has::GROUP != 0 { Some(text(r)?) } else { None },
            operation: if flags & has::OPERATION != 0 {
                Some(match r.u8()? {
                    0 => Operation::Send,
                    1 => Operation::Receive,
                    2 => Operation::Process,
                    value => {
                        return Err(CodecError::Enum {
                            what: "operation",
                            value,
                        });
                    }
                })
            } else {
                None
            },
        })
    } else {
        None
    };
    // Each link takes at least three bytes: a corrupt count cannot allocate.
    let n = r.len()?;
    let mut links = Vec::with_capacity(n.min(64));
    for _ in 0..n {
        links.push((TraceId(u128(r)?), r.u64()?));
    }
    Ok(Span {
        trace_id,
        span_id,
        parent_id,
        name: span_name,
        service,
        start_ns,
        duration_ns,
        error,
        messaging,
        links,
        source,
    })
}
