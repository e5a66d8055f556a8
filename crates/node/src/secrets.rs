//! Random secrets and their digests: a node's peer key, and what an API key
//! file keeps of a key.

use sha2::{Digest, Sha256};

/// Bytes of randomness in a secret.
pub const SECRET_BYTES: usize = 32;

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A random secret, hex: a node's peer key.
pub fn new_secret() -> String {
    let mut bytes = [0u8; SECRET_BYTES];
    // Without randomness the key is one nobody announces: peers refuse it.
    if getrandom::fill(&mut bytes).is_err() {
        return String::new();
    }
    hex(&bytes)
}

/// SHA-256 of a secret, hex.
pub fn digest(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

/// Equal bytes, in time that depends only on their length.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
