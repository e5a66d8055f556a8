//! Trace context (W3C `traceparent`) and pathway context carried in Kafka headers.

use rdkafka::message::{Header, Headers, OwnedHeaders};
use std::hash::{BuildHasher, Hasher};
use streamsight_wire::pathway::{self, PathwayContext};

/// The W3C trace context header.
pub const TRACEPARENT: &str = "traceparent";
/// `00-` + 32 + `-` + 16 + `-` + 2.
pub const TRACEPARENT_LEN: usize = 55;

/// A W3C trace context: what `traceparent` carries.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TraceContext {
    /// The W3C trace id (its low 64 bits are Datadog's).
    pub trace_id: u128,
    /// The span this context is of.
    pub span_id: u64,
    /// The trace flags' sampled bit.
    pub sampled: bool,
}

/// A fast per-thread generator (wyrand) for trace and span ids, seeded once per
/// thread from std's randomly keyed hasher: ids need to be unique, not secret.
fn random_u64() -> u64 {
    thread_local! {
        static STATE: std::cell::Cell<u64> = std::cell::Cell::new({
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(crate::telemetry::now_ms() as u64);
            h.finish()
        });
    }
    STATE.with(|s| {
        let x = s.get().wrapping_add(0xa076_1d64_78bd_642f);
        s.set(x);
        let t = u128::from(x) * u128::from(x ^ 0xe703_7ed1_a0b4_28db);
        ((t >> 64) as u64) ^ (t as u64)
    })
}

impl TraceContext {
    /// A new trace: random ids, sampled.
    pub fn new_root() -> Self {
        Self {
            trace_id: (u128::from(random_u64()) << 64) | u128::from(random_u64()).max(1),
            span_id: random_u64().max(1),
            sampled: true,
        }
    }

    /// The same trace, a new span.
    pub fn child(&self) -> Self {
        Self {
            span_id: random_u64().max(1),
            ..*self
        }
    }

    /// The W3C `traceparent` header value.
    pub fn to_traceparent(&self) -> String {
        let mut buf = [0u8; TRACEPARENT_LEN];
        String::from_utf8_lossy(self.write_traceparent(&mut buf)).into_owned()
    }

    /// The header value written into `buf`, without allocating.
    pub fn write_traceparent<'b>(&self, buf: &'b mut [u8; TRACEPARENT_LEN]) -> &'b [u8] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut hex = |at: usize, digits: usize, v: u128| {
            for i in 0..digits {
                buf[at + i] = HEX[((v >> (4 * (digits - 1 - i))) & 0xf) as usize];
            }
        };
        hex(0, 2, 0);
        hex(3, 32, self.trace_id);
        hex(36, 16, u128::from(self.span_id));
        hex(53, 2, u128::from(self.sampled));
        buf[2] = b'-';
        buf[35] = b'-';
        buf[52] = b'-';
        &buf[..]
    }

    /// `None` for anything that is not a valid version-00 traceparent.
    pub fn from_traceparent(value: &[u8]) -> Option<Self> {
        let s = std::str::from_utf8(value).ok()?;
        let mut parts = s.trim().split('-');
        let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if version != "00" || trace.len() != 32 || span.len() != 16 || flags.len() != 2 {
            return None;
        }
        let trace_id = u128::from_str_radix(trace, 16).ok().filter(|&t| t != 0)?;
        let span_id = u64::from_str_radix(span, 16).ok().filter(|&s| s != 0)?;
        let flags = u8::from_str_radix(flags, 16).ok()?;
        Some(Self {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }
}

/// What a consumed message carried, to continue its trace and pathway downstream.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MessageContext {
    /// The trace, continued from the message's `traceparent` (or new).
    pub trace: TraceContext,
    /// The pathway after this service's checkpoint (`dd-pathway-ctx-base64`).
    pub pathway: PathwayContext,
}

/// The trace and pathway contexts in a message's headers, when valid.
/// The trace id carried in `headers`, as 32 hex digits: what is kept to follow
/// a failed or dead-lettered record.
pub(crate) fn trace_id_of(headers: Option<&impl Headers>) -> Option<String> {
    extract(headers).0.map(|t| format!("{:032x}", t.trace_id))
}

/// The trace and pathway contexts a message's headers carry, each where it
/// is present and well formed.
pub fn extract(headers: Option<&impl Headers>) -> (Option<TraceContext>, Option<PathwayContext>) {
    let (mut trace, mut path) = (None, None);
    if let Some(headers) = headers {
        for h in headers.iter() {
            match (h.key, h.value) {
                (TRACEPARENT, Some(v)) => trace = TraceContext::from_traceparent(v),
                (pathway::HEADER, Some(v)) => path = PathwayContext::from_header(v).ok(),
                _ => {}
            }
        }
    }
    (trace, path)
}

/// The caller's headers, less any old contexts, plus ours.
pub fn inject(caller: Option<&OwnedHeaders>, trace: &TraceContext, path: &PathwayContext) -> OwnedHeaders {
    let capacity = caller.map_or(0, |h| h.count()) + 2;
    let mut out = OwnedHeaders::new_with_capacity(capacity);
    if let Some(caller) = caller {
        for h in caller
            .iter()
            .filter(|h| h.key != TRACEPARENT && h.key != pathway::HEADER)
        {
            out = out.insert(Header {
                key: h.key,
                value: h.value,
            });
        }
    }
    let (mut tp, mut pw) = ([0u8; TRACEPARENT_LEN], [0u8; pathway::HEADER_MAX]);
    out.insert(Header {
        key: TRACEPARENT,
        value: Some(trace.write_traceparent(&mut tp)),
    })
    .insert(Header {
        key: pathway::HEADER,
        value: Some(path.write_header(&mut pw)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_rejects_garbage() {
        let t = TraceContext::new_root();
        assert_eq!(TraceContext::from_traceparent(t.to_traceparent().as_bytes()), Some(t));
        for bad in [
            "",
            "00-0-0-01",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-zzzzzzzzzzzzzzzz-01",
        ] {
            assert_eq!(TraceContext::from_traceparent(bad.as_bytes()), None, "{bad}");
        }
        let w3c = TraceContext::from_traceparent(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!(w3c.trace_id, 0x4bf92f3577b34da6a3ce929d0e0e4736);
        assert_eq!(w3c.child().trace_id, w3c.trace_id);
        assert_ne!(w3c.child().span_id, w3c.span_id);
    }

    #[test]
    fn inject_keeps_caller_headers_and_replaces_old_contexts() {
        let caller = OwnedHeaders::new()
            .insert(Header {
                key: "app",
                value: Some("1"),
            })
            .insert(Header {
                key: TRACEPARENT,
                value: Some("stale"),
            });
        let trace = TraceContext::new_root();
        let path = PathwayContext {
            hash: 7,
            pathway_start_ms: 1,
            edge_start_ms: 2,
        };
        let out = inject(Some(&caller), &trace, &path);
        let keys: Vec<&str> = out.iter().map(|h| h.key).collect();
        assert_eq!(keys, ["app", TRACEPARENT, pathway::HEADER]);
        assert_eq!(extract(Some(&out)), (Some(trace), Some(path)));
    }
}
