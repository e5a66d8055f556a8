//! A running collector's API: the one place the CLI's commands that ask a
//! collector (`lag`, `dlq list`, `alerts`) send their request.

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};

/// The one client of every request to a collector, made by [`trust`].
static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();

/// Where the system keeps its CA bundle (Debian's `ca-certificates`);
/// `SSL_CERT_FILE` names another, as for OpenSSL.
const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Makes the client every collector request goes through: trusting the
/// public CAs (built in), the system's bundle, and `ca_file`'s certificates
/// (`--ca-file`, `STREAMSIGHT_CA_FILE`): a private CA, or a collector's own
/// self-signed certificate, trusted as that exact certificate.
pub fn trust(ca_file: Option<&Path>) -> Result<(), String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let system = std::env::var_os("SSL_CERT_FILE").map_or_else(|| SYSTEM_BUNDLE.into(), std::path::PathBuf::from);
    if let Ok(pem) = std::fs::read(&system) {
        // A system bundle's odd entry is skipped, as OpenSSL does.
        roots.add_parsable_certificates(CertificateDer::pem_slice_iter(&pem).filter_map(Result::ok));
    }
    let mut pinned = Vec::new();
    if let Some(path) = ca_file {
        let bad = |why: String| format!("--ca-file {}: {why}", path.display());
        let pem = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| bad(format!("not PEM certificates: {e}")))?;
            roots
                .add(cert.clone())
                .map_err(|e| bad(format!("a certificate that cannot be trusted: {e}")))?;
            pinned.push(cert);
        }
        if pinned.is_empty() {
            return Err(bad("no PEM certificate in it".into()));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| format!("no TLS verifier: {e}"))?;
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("no TLS configuration: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PinnedOrWebPki { webpki, pinned }))
        .with_no_client_auth();
    let client = reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .build()
        .map_err(|e| format!("no HTTP client: {e}"))?;
    let _ = CLIENT.set(client);
    Ok(())
}

fn client() -> reqwest::Client {
    if CLIENT.get().is_none() {
        // Made here when no command called `trust` first (a library use).
        let _ = trust(None);
    }
    CLIENT.get().cloned().unwrap_or_default()
}

/// The Web PKI's verdict, except that a certificate given with `--ca-file`
/// is trusted as that exact certificate even where the Web PKI refuses it as
/// a server's: a self-signed certificate made with `openssl req -x509` says
/// it is a CA (`CaUsedAsEndEntity`). Its dates and name are still checked.
#[derive(Debug)]
struct PinnedOrWebPki {
    webpki: Arc<rustls::client::WebPkiServerVerifier>,
    pinned: Vec<CertificateDer<'static>>,
}

impl rustls::client::danger::ServerCertVerifier for PinnedOrWebPki {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        match self
            .webpki
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            // rustls carries webpki's reason as an `Other` error: read by its name.
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::Other(why)))
                if format!("{why:?}").contains("CaUsedAsEndEntity")
                    && self.pinned.iter().any(|p| p.as_ref() == end_entity.as_ref()) =>
            {
                Ok(rustls::client::danger::ServerCertVerified::assertion())
            }
            verdict => verdict,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

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
    let mut req = client()
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
    } else if cause.contains("certificate") || cause.contains("CaUsedAsEndEntity") || cause.contains("UnknownIssuer") {
        format!(
            "the collector's TLS certificate is not trusted ({cause}): give its CA, or its own self-signed certificate, with --ca-file PATH (or STREAMSIGHT_CA_FILE)"
        )
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
