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
    let base = reqwest::Url::parse(url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
        .ok_or_else(|| "not a collector URL: give http://HOST:PORT (its API, --api-listen)".to_owned())?;
    let mut req = reqwest::Client::new()
        .request(method, format!("{}{path}", base.as_str().trim_end_matches('/')))
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
    let resp = req.send().await.map_err(|e| unreachable(&e))?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| unreachable(&e))?;
    if !status.is_success() {
        let hint = match status.as_u16() {
            401 => "; set STREAMSIGHT_API_KEY to a key of this collector (`streamsight keys create --scope read`)",
            403 => "; this needs a key of another scope (changes need an admin key)",
            _ => "",
        };
        return Err(format!("answered {status}: {}{hint}", text.trim()));
    }
    Ok(text)
}

/// Why a request got no answer, with what to check.
fn unreachable(e: &reqwest::Error) -> String {
    // reqwest's own words are "error sending request"; the cause says which.
    let mut cause = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        cause = s.to_string();
        source = s.source();
    }
    if e.is_timeout() {
        format!("no answer within 10 s ({cause}): is the collector overloaded, or is this its intake, not its API?")
    } else if e.is_connect() {
        format!(
            "cannot connect ({cause}): is `streamsight serve` running, with its API at this address (--api-listen)?"
        )
    } else {
        cause
    }
}

/// A path segment as a URL carries it (the collector's own encoding).
pub use streamsight_collector::fanout::segment;

/// The same, parsed as JSON.
pub async fn get_json(url: &str, path: &str) -> Result<serde_json::Value, String> {
    let text = get(url, path, &[]).await?;
    serde_json::from_str(&text).map_err(|e| format!("unexpected answer: {e}"))
}
