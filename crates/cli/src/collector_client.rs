//! A running collector's API: the one place the CLI's commands that ask a
//! collector (`lag`, `dlq list`, `alerts`) send their request.

use std::time::Duration;

/// GETs `path` with `query` from the collector at `url`, with
/// `STREAMSIGHT_API_KEY` as a bearer key when it is set; the body, or why not.
pub async fn get(url: &str, path: &str, query: &[(&str, &str)]) -> Result<String, String> {
    send(reqwest::Method::GET, url, path, query, None).await
}

/// Sends `method` to `path` (with a JSON body when given), keyed the same way.
pub async fn send(
    method: reqwest::Method,
    url: &str,
    path: &str,
    query: &[(&str, &str)],
    body: Option<&serde_json::Value>,
) -> Result<String, String> {
    let mut req = reqwest::Client::new()
        .request(method, format!("{}{path}", url.trim_end_matches('/')))
        .query(query)
        .timeout(Duration::from_secs(10));
    if let Some(body) = body {
        req = req.json(body);
    }
    if let Ok(key) = std::env::var("STREAMSIGHT_API_KEY")
        && !key.is_empty()
    {
        req = req.bearer_auth(key);
    }
    let resp = req.send().await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("answered {status}: {text}"));
    }
    Ok(text)
}

/// A path segment as a URL carries it (the collector's own encoding).
pub use streamsight_collector::fanout::segment;

/// The same, parsed as JSON.
pub async fn get_json(url: &str, path: &str) -> Result<serde_json::Value, String> {
    let text = get(url, path, &[]).await?;
    serde_json::from_str(&text).map_err(|e| format!("unexpected answer: {e}"))
}
