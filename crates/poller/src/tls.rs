//! TLS to brokers (rustls, ring): the system's trust is Mozilla's roots, or the
//! CA file the config names for a private CA.

use serde::{Deserialize, Serialize};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

/// `[serve.clusters.tls]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM file of the CA(s) that signed the brokers' certificates; Mozilla's
    /// roots when absent.
    #[serde(default)]
    pub ca_file: Option<std::path::PathBuf>,
    /// The name to verify certificates against, when it is not the host the
    /// brokers advertise.
    #[serde(default)]
    pub server_name: Option<String>,
}

/// Builds the client side once per cluster; a CA file that cannot be used is an
/// error at startup, with its path and why.
pub(crate) fn client_config(tls: &TlsConfig) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore::empty();
    match &tls.ca_file {
        Some(path) => {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("ca_file {}: {e}", path.display()))?
                .collect::<Result<_, _>>()
                .map_err(|e| format!("ca_file {}: {e}", path.display()))?;
            if certs.is_empty() {
                return Err(format!("ca_file {}: no certificate in it", path.display()));
            }
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| format!("ca_file {}: {e}", path.display()))?;
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The name a broker's certificate must carry: configured, or its host.
pub(crate) fn server_name(tls: &TlsConfig, addr: &str) -> Result<ServerName<'static>, String> {
    let host = match &tls.server_name {
        Some(name) => name.as_str(),
        None => addr
            .rsplit_once(':')
            .map_or(addr, |(h, _)| h.trim_start_matches('[').trim_end_matches(']')),
    };
    ServerName::try_from(host.to_owned()).map_err(|e| format!("{host:?} is not a server name: {e}"))
}

/// A connection, with or without TLS.
#[derive(Debug)]
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_empty_ca_file_is_an_error_naming_it() {
        let missing = TlsConfig {
            ca_file: Some("/nonexistent/ca.pem".into()),
            server_name: None,
        };
        assert!(client_config(&missing).unwrap_err().contains("/nonexistent/ca.pem"));
        assert!(client_config(&TlsConfig::default()).is_ok(), "Mozilla's roots");
    }

    #[test]
    fn server_names_come_from_the_address_or_the_config() {
        let tls = TlsConfig::default();
        assert!(matches!(
            server_name(&tls, "127.0.0.1:9093"),
            Ok(ServerName::IpAddress(_))
        ));
        assert!(matches!(
            server_name(&tls, "kafka-1.example:9093"),
            Ok(ServerName::DnsName(_))
        ));
        let named = TlsConfig {
            ca_file: None,
            server_name: Some("broker.internal".into()),
        };
        assert!(matches!(
            server_name(&named, "10.0.0.1:9093"),
            Ok(ServerName::DnsName(_))
        ));
    }
}
