//! Asking a collector over HTTP, as its users do, in tests.

use serde_json::Value;
use std::time::{Duration, Instant};

/// How long a test client keeps an idle connection: less than the
/// collector's `limits.header_timeout` (10 s), after which the collector
/// closes it. A client that kept it longer could send on it as it is closed,
/// and read a reset instead of an answer.
const POOL_IDLE: Duration = Duration::from_secs(5);

/// A client that lets idle connections go before the collector does.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_idle_timeout(POOL_IDLE)
        .build()
        .expect("a client")
}

/// A client that sends `key` as its bearer key on every request.
pub fn keyed_client(key: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    let value = reqwest::header::HeaderValue::from_str(&format!("Bearer {key}")).expect("a key is header text");
    headers.insert(reqwest::header::AUTHORIZATION, value);
    reqwest::Client::builder()
        .default_headers(headers)
        .pool_idle_timeout(POOL_IDLE)
        .build()
        .expect("a client")
}

/// GET `url`: the status and the JSON body (`Null` when it is not JSON; status
/// 0 when nothing answered).
pub async fn get(client: &reqwest::Client, url: &str) -> (u16, Value) {
    match client.get(url).send().await {
        Ok(r) => (r.status().as_u16(), r.json().await.unwrap_or(Value::Null)),
        Err(_) => (0, Value::Null),
    }
}

/// GET `url`'s JSON body (`Null` when it is not JSON or nothing answered).
pub async fn get_json(client: &reqwest::Client, url: &str) -> Value {
    get(client, url).await.1
}

/// GETs `url` until its JSON body is `ready`, or fails after `secs` seconds
/// naming `what` and the last answer.
pub async fn wait_for_json(
    client: &reqwest::Client,
    url: &str,
    secs: u64,
    what: &str,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let v = get_json(client, url).await;
        if ready(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}: {v:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// GET `url`'s body as text (`/metrics`), asserting it answered.
pub async fn get_text(client: &reqwest::Client, url: &str) -> String {
    client.get(url).send().await.unwrap().text().await.unwrap()
}

/// The value of one series in Prometheus text (`name{labels}` exactly as
/// written), if it is there.
pub fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}
