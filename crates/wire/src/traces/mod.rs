//! Spans and log lines as clients send them, decoded into the core's journey
//! types: OTLP/HTTP (protobuf and JSON), Datadog tracers' `/v0.4` and `/v0.5`
//! traces (msgpack), and Fluent Bit's `json_lines`. Every decoder is bounded:
//! the body after decompression, the spans or lines it may hold, and every
//! string kept ([`streamsight_core::journey::MAX_TEXT`]).

pub mod datadog;
pub mod fluentbit;
pub mod otlp;

use streamsight_core::journey::{LogLine, Span};

/// What may be decoded from one request.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Limits {
    pub max_decompressed_bytes: usize,
    /// Spans or log lines in one request.
    pub max_items: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_decompressed_bytes: 64 << 20,
            max_items: 100_000,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("gzip: {0}")]
    Gzip(std::io::Error),
    #[error("more than {0} bytes once decompressed")]
    TooLarge(usize),
    #[error("more than {0} spans or lines in one request")]
    TooMany(usize),
    #[error("protobuf: {0}")]
    Protobuf(String),
    #[error("json: {0}")]
    Json(String),
    #[error("msgpack: {0}")]
    Msgpack(String),
    #[error("{0}")]
    Memory(crate::budget::Spent),
}

impl DecodeError {
    /// A decoder's error, or the meter's refusal when that is what stopped it
    /// (serde's error is only a string).
    fn or_refused(self) -> Self {
        crate::budget::refused().map_or(self, DecodeError::Memory)
    }
}

/// What a request became, and what of it could not be used.
#[derive(Debug, Default)]
pub struct Decoded {
    pub spans: Vec<Span>,
    pub logs: Vec<LogLine>,
    /// Spans and lines taken (set by whoever took them out of `spans` and `logs`).
    pub accepted: usize,
    /// Items left out (no trace id, a bad id), with why, the first few.
    pub skipped: usize,
    pub reasons: Vec<String>,
}

impl Decoded {
    fn skip(&mut self, why: impl FnOnce() -> String) {
        self.skipped += 1;
        if self.reasons.len() < 10 {
            self.reasons.push(why());
        }
    }

    /// Room for one more span or line: under the count, and its memory
    /// charged (the item, and the record it becomes in the collector).
    fn admit(&mut self, limits: Limits) -> Result<(), DecodeError> {
        if self.spans.len() + self.logs.len() >= limits.max_items {
            return Err(DecodeError::TooMany(limits.max_items));
        }
        crate::budget::charge(ITEM_BYTES).map_err(DecodeError::Memory)
    }
}

/// What one span or line costs once decoded: itself in its list, then boxed in
/// a record of the collector's, in a list of those.
const ITEM_BYTES: usize = crate::budget::element::<Span>()
    + std::mem::size_of::<Span>()
    + crate::budget::element::<streamsight_core::Record>();

/// The body, gunzipped when it says so (or looks so), within the limit.
pub fn body(bytes: &[u8], gzipped: bool, limits: Limits) -> Result<std::borrow::Cow<'_, [u8]>, DecodeError> {
    if gzipped || bytes.starts_with(&[0x1f, 0x8b]) {
        let out = crate::dsm::payload::gunzip(bytes, limits.max_decompressed_bytes).map_err(|e| match e {
            crate::dsm::payload::PayloadError::Gzip(e) => DecodeError::Gzip(e),
            crate::dsm::payload::PayloadError::Memory(spent) => DecodeError::Memory(spent),
            other => DecodeError::Gzip(std::io::Error::other(other.to_string())),
        })?;
        if out.len() > limits.max_decompressed_bytes {
            return Err(DecodeError::TooLarge(limits.max_decompressed_bytes));
        }
        Ok(std::borrow::Cow::Owned(out))
    } else if bytes.len() > limits.max_decompressed_bytes {
        Err(DecodeError::TooLarge(limits.max_decompressed_bytes))
    } else {
        Ok(std::borrow::Cow::Borrowed(bytes))
    }
}
