//! `[serve.intake_tls]`, `[serve.api_tls]`: where a listener's certificate and key are.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[serve.intake_tls]`, `[serve.api_tls]`: the same settings wherever a
/// listener takes TLS.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerTls {
    /// PEM certificate chain, leaf first.
    pub cert_file: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    /// When set, clients must present a certificate signed by a CA in this PEM
    /// file (mutual TLS); connections without one are refused in the handshake.
    #[serde(default)]
    pub client_ca_file: Option<PathBuf>,
}
