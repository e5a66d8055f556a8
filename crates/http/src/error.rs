//! The one error type of every HTTP answer that refuses: a kind, said in the
//! body as `{"error": kind, "message": …}`, and the one place each kind maps
//! to its status. A handler names what went wrong; it never picks a status.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use streamsight_node::AppendError;
use streamsight_node::telemetry::IntakeError;

/// What went wrong, as a client reads it in `error`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A query string that does not parse, or names what cannot be combined.
    BadQuery,
    /// A body that does not decode (the decoder itself failed).
    BadBody,
    BadRule,
    BadSilence,
    BadJourney,
    BadTraceId,
    /// A peer node answered what cannot be read.
    BadAnswer,
    /// A decoded OTLP or trace body that cannot be read.
    BadGzip,
    BadProtobuf,
    BadJson,
    BadMsgpack,
    DecompressedTooLarge,
    TooManyItems,
    NotFound,
    UnknownGroup,
    UnknownTopic,
    /// A cluster this tenant does not poll: nothing is done to it.
    UnknownCluster,
    TooManyRules,
    /// An action the state forbids (a reset of a group with live members).
    Refused,
    /// The Kafka cluster an action went to failed or refused it.
    BrokerFailed,
    /// No key, or a key that is not one.
    Unauthorized,
    /// A key whose scope or tenant does not allow this.
    Forbidden,
    /// A tenant that is not configured, or not the key's.
    UnknownTenant,
    /// A `Host` other than the listener's (DNS rebinding).
    HostNotAllowed,
    /// Every place for a request is taken.
    Overloaded,
    RequestTimeout,
    /// Stored data are still being replayed.
    NotReady,
    /// A sharded node cannot see its own announcements on the log.
    LogUnreachable,
    /// The last append to storage failed.
    StorageUnavailable,
    /// Keys are required and none is live: everyone is refused.
    NoLiveKeys,
    /// The node holding a shard cannot be asked.
    ShardUnavailable,
    /// A refusal of the intake, counted by its own kind.
    Intake(IntakeError),
    /// A task of ours failed: a bug, said as such.
    Internal,
}

impl ErrorKind {
    /// The status of each kind: the one place a kind becomes a status.
    pub fn status(self) -> StatusCode {
        use ErrorKind as K;
        match self {
            K::BadQuery
            | K::BadBody
            | K::BadRule
            | K::BadSilence
            | K::BadJourney
            | K::BadTraceId
            | K::BadGzip
            | K::BadProtobuf
            | K::BadJson
            | K::BadMsgpack => StatusCode::BAD_REQUEST,
            K::BadAnswer => StatusCode::BAD_GATEWAY,
            K::DecompressedTooLarge | K::TooManyItems => StatusCode::PAYLOAD_TOO_LARGE,
            K::NotFound | K::UnknownGroup | K::UnknownTopic | K::UnknownCluster => StatusCode::NOT_FOUND,
            K::TooManyRules | K::Refused => StatusCode::CONFLICT,
            K::BrokerFailed => StatusCode::BAD_GATEWAY,
            K::Unauthorized | K::UnknownTenant => StatusCode::UNAUTHORIZED,
            K::Forbidden => StatusCode::FORBIDDEN,
            K::HostNotAllowed => StatusCode::MISDIRECTED_REQUEST,
            K::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            K::Overloaded
            | K::NotReady
            | K::LogUnreachable
            | K::StorageUnavailable
            | K::ShardUnavailable
            | K::NoLiveKeys => StatusCode::SERVICE_UNAVAILABLE,
            K::Intake(e) => intake_status(e),
            K::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn as_str(self) -> &'static str {
        use ErrorKind as K;
        match self {
            K::BadQuery => "bad_query",
            K::BadBody => "bad_body",
            K::BadRule => "bad_rule",
            K::BadSilence => "bad_silence",
            K::BadJourney => "bad_journey",
            K::BadTraceId => "bad_trace_id",
            K::BadAnswer => "bad_answer",
            K::BadGzip => "bad_gzip",
            K::BadProtobuf => "bad_protobuf",
            K::BadJson => "bad_json",
            K::BadMsgpack => "bad_msgpack",
            K::DecompressedTooLarge => "decompressed_too_large",
            K::TooManyItems => "too_many_items",
            K::NotFound => "not_found",
            K::UnknownGroup => "unknown_group",
            K::UnknownTopic => "unknown_topic",
            K::UnknownCluster => "unknown_cluster",
            K::TooManyRules => "too_many_rules",
            K::Refused => "refused",
            K::BrokerFailed => "broker_failed",
            K::Unauthorized => "unauthorized",
            K::Forbidden => "forbidden",
            K::UnknownTenant => "unknown_tenant",
            K::HostNotAllowed => "host_not_allowed",
            K::Overloaded => "overloaded",
            K::RequestTimeout => "request_timeout",
            K::NotReady => "not_ready",
            K::LogUnreachable => "log_unreachable",
            K::StorageUnavailable => "storage_unavailable",
            K::NoLiveKeys => "no_live_keys",
            K::ShardUnavailable => "shard_unavailable",
            K::Intake(e) => e.as_str(),
            K::Internal => "internal",
        }
    }
}

fn intake_status(e: IntakeError) -> StatusCode {
    match e {
        IntakeError::BodyTooLarge
        | IntakeError::DecompressedTooLarge
        | IntakeError::TooMany(_)
        | IntakeError::RequestMemory => StatusCode::PAYLOAD_TOO_LARGE,
        IntakeError::BadGzip | IntakeError::BadMsgpack | IntakeError::BadSketch | IntakeError::TimeOutOfRange => {
            StatusCode::BAD_REQUEST
        }
        IntakeError::UnsupportedEncoding | IntakeError::UnsupportedContentType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        IntakeError::StorageFailed | IntakeError::Overloaded | IntakeError::DecodeMemoryBusy => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        IntakeError::RateLimited => StatusCode::TOO_MANY_REQUESTS,
    }
}

/// A refusal: its kind, what to tell the client, and when to come back.
#[derive(Clone, Debug)]
pub struct ApiError {
    pub kind: ErrorKind,
    pub message: String,
    /// Seconds for `Retry-After`; a 503 or 429 without one says 1.
    pub retry_after: Option<u64>,
    /// `WWW-Authenticate` for a 401.
    pub challenge: Option<&'static str>,
}

impl ApiError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            retry_after: None,
            challenge: None,
        }
    }

    /// Come back in `seconds`.
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// Says how to authenticate (`WWW-Authenticate`).
    pub fn challenge(mut self, scheme: &'static str) -> Self {
        self.challenge = Some(scheme);
        self
    }

    pub fn status(&self) -> StatusCode {
        self.kind.status()
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind.as_str(), self.message)
    }
}

impl std::error::Error for ApiError {}

/// A write the writer refused passes by itself: the store recovers, the
/// queue drains.
impl From<AppendError> for ApiError {
    fn from(e: AppendError) -> Self {
        ApiError::new(ErrorKind::Intake(e.kind()), e.to_string())
    }
}

/// A decode refused memory: the request alone is too big for one (413, send
/// less at a time), or requests in flight hold the pool (503, come back).
impl From<streamsight_wire::budget::Spent> for ApiError {
    fn from(spent: streamsight_wire::budget::Spent) -> Self {
        match spent {
            streamsight_wire::budget::Spent::Request { .. } => {
                ApiError::new(ErrorKind::Intake(IntakeError::RequestMemory), spent.to_string())
            }
            streamsight_wire::budget::Spent::Shared => {
                ApiError::new(ErrorKind::Intake(IntakeError::DecodeMemoryBusy), spent.to_string()).retry_after(1)
            }
        }
    }
}

impl IntoResponse for ApiError {
    /// A 503 or a 429 says when to come back: the condition (a full queue, a
    /// failed disk, a busy server, a rate) passes by itself.
    fn into_response(self) -> Response {
        let status = self.status();
        let body = serde_json::json!({ "error": self.kind.as_str(), "message": self.message });
        let mut response = (status, axum::Json(body)).into_response();
        // The listener's guard counts the refusal by this kind (one place).
        response.extensions_mut().insert(self.kind);
        let retry = match self.retry_after {
            Some(s) => Some(s),
            None if status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::TOO_MANY_REQUESTS => Some(1),
            None => None,
        };
        if let Some(v) = retry.and_then(|s| HeaderValue::from_str(&s.to_string()).ok()) {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
        if let Some(scheme) = self.challenge {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(scheme));
        }
        response
    }
}

/// A handler's answer: its JSON, or a refusal.
pub type ApiResult<T = Response> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_says_its_kind_and_a_passing_one_when_to_come_back() {
        let r = ApiError::new(ErrorKind::NotReady, "replaying").into_response();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        let r = ApiError::new(ErrorKind::Intake(IntakeError::RateLimited), "slow down")
            .retry_after(7)
            .into_response();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "7");
        let r = ApiError::new(ErrorKind::BadQuery, "x").into_response();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        assert!(r.headers().get(header::RETRY_AFTER).is_none());
    }

    #[test]
    fn an_append_refused_by_a_full_queue_or_a_failed_disk_is_a_503() {
        for e in [
            AppendError::Busy(3),
            AppendError::Stopped,
            AppendError::Storage("disk".into()),
        ] {
            assert_eq!(ApiError::from(e).status(), StatusCode::SERVICE_UNAVAILABLE);
        }
    }
}
