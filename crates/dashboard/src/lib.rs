//! The dashboard: a few pages of HTML and JavaScript embedded in the binary and
//! served on the API listener, reading the same `/api/v1` JSON anyone can. The
//! pages hold no data, so they (and their assets) are served without a key; the
//! script asks for a read key when the API answers 401.

mod queries;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::sync::Arc;
use streamsight_http::{ApiError, ErrorKind};
use streamsight_node::Shared;

/// Pages: every one is the same document; the script reads the URL.
const PAGES: [&str; 10] = [
    "/alerts",
    "/records/{cluster}/{topic}/{partition}/{offset}",
    "/journeys/{trace_id}",
    "/",
    "/groups/{cluster}/{group}",
    "/topics/{cluster}/{topic}",
    "/pathways",
    "/dlq",
    "/probes",
    "/clusters",
];

/// (name, content type, bytes): everything the pages load.
const ASSETS: [(&str, &str, &[u8]); 5] = [
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/app.js"),
    ),
    ("app.css", "text/css; charset=utf-8", include_bytes!("assets/app.css")),
    (
        "uplot-1.6.31.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/vendor/uplot-1.6.31.min.js"),
    ),
    (
        "uplot-1.6.31.min.css",
        "text/css; charset=utf-8",
        include_bytes!("assets/vendor/uplot-1.6.31.min.css"),
    ),
    (
        "LICENSE-uplot.txt",
        "text/plain; charset=utf-8",
        include_bytes!("assets/vendor/LICENSE-uplot"),
    ),
];

const INDEX: &str = include_str!("assets/index.html");

/// The page paths and assets, answered without a key: they carry no data.
pub fn is_public(path: &str) -> bool {
    path == "/"
        || path.starts_with("/assets/")
        || ["/groups/", "/topics/", "/journeys/", "/records/"]
            .iter()
            .any(|p| path.starts_with(p))
        || matches!(path, "/pathways" | "/dlq" | "/probes" | "/clusters" | "/alerts")
}

pub fn routes() -> Router<Arc<Shared>> {
    let mut router = Router::new();
    for page in PAGES {
        router = router.route(page, get(index));
    }
    router
        .route("/assets/{name}", get(asset))
        .route("/api/v1/overview", get(queries::overview))
        .route("/api/v1/topics/{cluster}/{topic}", get(queries::topic))
}

/// What every dashboard response carries: nothing runs but our own script, and
/// no other site may frame the pages.
fn hardened(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
             base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
        ),
    );
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

/// A strong validator for embedded bytes: browsers revalidate (`no-cache`) and
/// get a bodiless 304 while the build is the same.
fn etag(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(bytes);
    format!("\"{}\"", streamsight_node::secrets::hex(&digest[..8]))
}

fn embedded(headers: &HeaderMap, content_type: &'static str, bytes: &'static [u8]) -> Response {
    let tag = etag(bytes);
    let cached = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag));
    let common = [(header::CACHE_CONTROL, "no-cache".to_owned()), (header::ETAG, tag)];
    hardened(if cached {
        (StatusCode::NOT_MODIFIED, common).into_response()
    } else {
        (common, [(header::CONTENT_TYPE, content_type)], bytes).into_response()
    })
}

async fn index(headers: HeaderMap) -> Response {
    embedded(&headers, "text/html; charset=utf-8", INDEX.as_bytes())
}

async fn asset(Path(name): Path<String>, headers: HeaderMap) -> Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, bytes)) => embedded(&headers, content_type, bytes),
        None => ApiError::new(ErrorKind::NotFound, "no such asset").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_page_is_public_and_the_api_is_not() {
        for p in [
            "/",
            "/groups/c/g",
            "/topics/c/t",
            "/pathways",
            "/dlq",
            "/probes",
            "/clusters",
            "/assets/app.js",
        ] {
            assert!(is_public(p), "{p}");
        }
        for p in ["/api/v1/lag", "/metrics", "/api/v1/overview", "/groupsx", "/v1/burrow"] {
            assert!(!is_public(p), "{p}");
        }
    }

    #[tokio::test]
    async fn an_unchanged_asset_is_not_sent_again() {
        let first = asset(Path("app.js".to_owned()), HeaderMap::new()).await;
        assert_eq!(first.status(), StatusCode::OK);
        let tag = first.headers()[header::ETAG].clone();
        let mut headers = HeaderMap::new();
        headers.insert(header::IF_NONE_MATCH, tag);
        let again = asset(Path("app.js".to_owned()), headers).await;
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        assert!(again.headers().contains_key(header::CONTENT_SECURITY_POLICY));
    }

    #[test]
    fn the_scripts_stay_under_the_budget() {
        let js: usize = ASSETS.iter().filter(|a| a.0.ends_with(".js")).map(|a| a.2.len()).sum();
        assert!(js < 300 * 1024, "{js} bytes of JavaScript");
    }
}
