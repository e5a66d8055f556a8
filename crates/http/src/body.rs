//! Reading a request's body: under a limit, and in an encoding some intake reads.

use crate::error::{ApiError, ErrorKind};
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};
use streamsight_node::telemetry::IntakeError;
use streamsight_wire::budget::Meter;

/// How many bytes the body held, read and thrown away as it arrives (nothing
/// is kept); 413 `body_too_large` once it passes `limit` bytes.
pub async fn drain_limited(body: Body, limit: usize) -> Result<usize, ApiError> {
    use axum::body::HttpBody;
    let mut body = body;
    let mut read = 0usize;
    loop {
        let frame = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await;
        match frame {
            None => return Ok(read),
            Some(Err(e)) => return Err(ApiError::new(ErrorKind::BadBody, format!("reading the body: {e}"))),
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    read += data.len();
                    if read > limit {
                        return Err(too_large(limit));
                    }
                }
            }
        }
    }
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        ErrorKind::Intake(IntakeError::BodyTooLarge),
        format!("body is larger than {limit} bytes"),
    )
}

/// The whole body, its buffer charged to `meter` before each growth (the
/// request's share of the process's decode memory); 413 `body_too_large` once
/// it passes `limit` bytes, 413 or 503 when the meter refuses.
pub async fn read_metered(body: Body, limit: usize, meter: &mut Meter) -> Result<Bytes, ApiError> {
    use axum::body::HttpBody;
    let too_large = || too_large(limit);
    let mut body = body;
    let declared = body.size_hint().exact().and_then(|n| usize::try_from(n).ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let mut out: Vec<u8> = Vec::new();
    if let Some(n) = declared {
        meter.charge(n)?;
        out.reserve_exact(n);
    }
    loop {
        let frame = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await;
        let data = match frame {
            None => break,
            Some(Err(e)) => return Err(ApiError::new(ErrorKind::BadBody, format!("reading the body: {e}"))),
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => continue,
            },
        };
        let needed = out.len() + data.len();
        if needed > limit {
            return Err(too_large());
        }
        if needed > out.capacity() {
            // Doubling, never past the limit: charged before it is taken.
            let capacity = needed.next_power_of_two().min(limit);
            meter.charge(capacity - out.capacity())?;
            out.reserve_exact(capacity - out.len());
        }
        out.extend_from_slice(&data);
    }
    Ok(Bytes::from(out))
}

/// An API request's JSON body as `T`: `application/json`, at most `limit`
/// bytes, read on the process's decode memory and parsed only once its values
/// are counted and charged (a 2 MB `[0,0,…]` is a million values, 64 MB once
/// built). `bad` names what a body that is not a `T` is.
pub async fn json_body<T: serde::de::DeserializeOwned + Send + 'static>(
    shared: &streamsight_node::Shared,
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    bad: ErrorKind,
) -> Result<T, ApiError> {
    if media_type(headers).as_deref() != Some("application/json") {
        return Err(ApiError::new(
            ErrorKind::Intake(IntakeError::UnsupportedContentType),
            wrong_content_type(headers, "application/json"),
        ));
    }
    let mut meter = shared.meter();
    let bytes = read_metered(body, limit, &mut meter).await?;
    // Counted and parsed off the async workers, in a decoder's turn.
    let Some(_turn) = shared.decode_memory.turn().await else {
        return Err(ApiError::new(
            ErrorKind::Intake(IntakeError::Overloaded),
            "shutting down",
        ));
    };
    tokio::task::spawn_blocking(move || {
        use streamsight_wire::budget::{self, JsonCharge};
        match budget::metered(&mut meter, || budget::charge_json(&bytes, budget::JSON_VALUE_BYTES)) {
            Ok(_) => {}
            Err(JsonCharge::Json(e)) => return Err(ApiError::new(bad, e.to_string())),
            Err(JsonCharge::Memory(spent)) => return Err(ApiError::from(spent)),
        }
        serde_json::from_slice(&bytes).map_err(|e| ApiError::new(bad, e.to_string()))
    })
    .await
    .map_err(|_| ApiError::new(bad, "the decoder failed"))?
}

/// A request's media type: its `Content-Type` without parameters, lowercased.
pub fn media_type(headers: &HeaderMap) -> Option<String> {
    let t = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    Some(t.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
}

/// Why a request's content type is refused, in the words of its header.
pub fn wrong_content_type(headers: &HeaderMap, wanted: &str) -> String {
    match headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) {
        Some(t) => format!("content-type {t} is not {wanted}"),
        None => format!("no content-type: send {wanted}"),
    }
}

/// Whether the body is gzipped; why not, for an encoding no intake reads.
pub fn gzipped(headers: &HeaderMap) -> Result<bool, String> {
    match headers.get(header::CONTENT_ENCODING).map(|v| v.to_str().unwrap_or("?")) {
        None | Some("identity") => Ok(false),
        Some("gzip") => Ok(true),
        Some(other) => Err(format!("content-encoding {other:?} is not gzip or identity")),
    }
}
