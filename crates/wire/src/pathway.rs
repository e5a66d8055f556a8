//! Data Streams pathway context: the hashes and the `dd-pathway-ctx-base64` Kafka
//! header, byte-compatible with Datadog tracers (dd-trace-go `datastreams/pathway.go`)
//! so that a fleet mixing them builds one pathway.
//!
//! - node hash: FNV-1 64 (not 1a) over service, env, primary tag (Java) and the
//!   sorted edge tags, concatenated;
//! - pathway hash: FNV-1 64 over `LE64(node) ‖ LE64(parent)`;
//! - header: base64(`LE64(hash) ‖ zigzag-varint(pathway start ms) ‖
//!   zigzag-varint(edge start ms)`).

/// The Kafka header tracers read and write.
pub const HEADER: &str = "dd-pathway-ctx-base64";

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1 64 over several byte strings, as if concatenated.
fn fnv1_64<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> u64 {
    let mut h = FNV_OFFSET;
    for part in parts {
        for &b in part {
            h = h.wrapping_mul(FNV_PRIME);
            h ^= u64::from(b);
        }
    }
    h
}

/// The hash of one checkpoint's node. `edge_tags` are sorted here.
pub fn node_hash(service: &str, env: &str, primary_tag: &str, edge_tags: &[&str]) -> u64 {
    let mut tags = edge_tags.to_vec();
    tags.sort_unstable();
    let head = [service.as_bytes(), env.as_bytes(), primary_tag.as_bytes()];
    fnv1_64(head.into_iter().chain(tags.iter().map(|t| t.as_bytes())))
}

/// [`node_hash`] for edge tags already in sorted order, each given as pieces to
/// concatenate (`["topic:", topic]`): no allocation, for hot paths.
pub fn node_hash_sorted(service: &str, env: &str, primary_tag: &str, sorted_tags: &[&[&str]]) -> u64 {
    let head = [service.as_bytes(), env.as_bytes(), primary_tag.as_bytes()];
    fnv1_64(
        head.into_iter()
            .chain(sorted_tags.iter().flat_map(|t| t.iter().map(|p| p.as_bytes()))),
    )
}

pub fn pathway_hash(node: u64, parent: u64) -> u64 {
    fnv1_64([&node.to_le_bytes()[..], &parent.to_le_bytes()[..]])
}

/// Where a message is on its pathway.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PathwayContext {
    pub hash: u64,
    /// When the pathway's first checkpoint happened, unix ms.
    pub pathway_start_ms: i64,
    /// When the previous checkpoint happened, unix ms.
    pub edge_start_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathwayError {
    #[error("pathway header is not base64")]
    Base64,
    #[error("pathway context is shorter than its 8-byte hash")]
    Short,
    #[error("pathway context has a malformed varint")]
    Varint,
}

impl PathwayContext {
    /// The binary form, before base64.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + 2 * 10);
        out.extend_from_slice(&self.hash.to_le_bytes());
        put_varint(&mut out, zigzag(self.pathway_start_ms));
        put_varint(&mut out, zigzag(self.edge_start_ms));
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, PathwayError> {
        let hash = u64::from_le_bytes(
            bytes
                .get(..8)
                .ok_or(PathwayError::Short)?
                .try_into()
                .map_err(|_| PathwayError::Short)?,
        );
        let mut rest = &bytes[8..];
        let pathway_start_ms = unzigzag(get_varint(&mut rest)?);
        let edge_start_ms = unzigzag(get_varint(&mut rest)?);
        Ok(Self {
            hash,
            pathway_start_ms,
            edge_start_ms,
        })
    }

    /// The header value.
    pub fn to_header(&self) -> String {
        base64_encode(&self.encode())
    }

    /// The header value written into `buf`, without allocating.
    pub fn write_header<'b>(&self, buf: &'b mut [u8; HEADER_MAX]) -> &'b [u8] {
        let mut raw = [0u8; RAW_MAX];
        raw[..8].copy_from_slice(&self.hash.to_le_bytes());
        let mut n = 8;
        for v in [zigzag(self.pathway_start_ms), zigzag(self.edge_start_ms)] {
            n += write_varint(&mut raw[n..], v);
        }
        let len = base64_into(&raw[..n], buf);
        &buf[..len]
    }

    pub fn from_header(value: &[u8]) -> Result<Self, PathwayError> {
        Self::decode(&base64_decode(value).ok_or(PathwayError::Base64)?)
    }
}

/// Longest binary context: the hash and two 10-byte varints.
const RAW_MAX: usize = 8 + 10 + 10;
/// Longest header value: base64 of [`RAW_MAX`] bytes.
pub const HEADER_MAX: usize = RAW_MAX.div_ceil(3) * 4;

fn write_varint(out: &mut [u8], mut v: u64) -> usize {
    let mut n = 0;
    while v >= 0x80 {
        out[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    out[n] = v as u8;
    n + 1
}

fn base64_into(bytes: &[u8], out: &mut [u8]) -> usize {
    let mut n = 0;
    for chunk in bytes.chunks(3) {
        let v = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            out[n] = if i <= chunk.len() {
                B64[(v >> (18 - 6 * i)) as usize & 63]
            } else {
                b'='
            };
            n += 1;
        }
    }
    n
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(input: &mut &[u8]) -> Result<u64, PathwayError> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = input.split_first().ok_or(PathwayError::Varint)?;
        *input = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Ok(v);
        }
    }
    Err(PathwayError::Varint)
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_encode(bytes: &[u8]) -> String {
    let mut out = vec![0u8; bytes.len().div_ceil(3) * 4];
    let n = base64_into(bytes, &mut out);
    out.truncate(n);
    // The alphabet is ASCII.
    String::from_utf8(out).unwrap_or_default()
}

/// Alphabet position of every byte, 0xff for bytes outside it.
const B64_INDEX: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 64 {
        t[B64[i] as usize] = i as u8;
        i += 1;
    }
    t
};

fn base64_decode(text: &[u8]) -> Option<Vec<u8>> {
    let text = text
        .strip_suffix(b"==")
        .or_else(|| text.strip_suffix(b"="))
        .unwrap_or(text);
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for &c in text {
        let v = B64_INDEX[usize::from(c)];
        if v == 0xff {
            return None;
        }
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1_is_not_fnv1a() {
        // Published FNV-1 64 test vector for "a".
        assert_eq!(fnv1_64([&b"a"[..]]), 0xaf63_bd4c_8601_b7be);
    }

    #[test]
    fn edge_tags_are_sorted_before_hashing() {
        let a = node_hash("svc", "prod", "", &["topic:t", "direction:out", "type:kafka"]);
        let b = node_hash("svc", "prod", "", &["type:kafka", "direction:out", "topic:t"]);
        assert_eq!(a, b);
        assert_ne!(
            a,
            node_hash("svc", "staging", "", &["type:kafka", "direction:out", "topic:t"])
        );
    }

    #[test]
    fn header_round_trips_with_negative_and_large_times() {
        for (p, e) in [
            (0, 0),
            (1_700_000_000_123, 1_700_000_000_456),
            (-5, i64::MAX),
            (i64::MIN, 1),
        ] {
            let ctx = PathwayContext {
                hash: 0xdead_beef_0123_4567,
                pathway_start_ms: p,
                edge_start_ms: e,
            };
            assert_eq!(PathwayContext::from_header(ctx.to_header().as_bytes()), Ok(ctx));
        }
    }

    #[test]
    fn the_allocation_free_forms_agree() {
        let tags = ["direction:in", "group:g", "topic:t", "type:kafka"];
        assert_eq!(
            node_hash_sorted(
                "s",
                "e",
                "",
                &[&["direction:in"], &["group:", "g"], &["topic:", "t"], &["type:kafka"]]
            ),
            node_hash("s", "e", "", &tags)
        );
        let ctx = PathwayContext {
            hash: u64::MAX,
            pathway_start_ms: i64::MIN,
            edge_start_ms: i64::MAX,
        };
        let mut buf = [0u8; HEADER_MAX];
        assert_eq!(ctx.write_header(&mut buf), ctx.to_header().as_bytes());
    }

    #[test]
    fn base64_matches_the_standard_alphabet() {
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64_encode(b"fooba"), "Zm9vYmE=");
        assert_eq!(base64_encode(b"foob"), "Zm9vYg==");
        assert_eq!(base64_decode(b"Zm9vYg==").unwrap(), b"foob");
    }

    #[test]
    fn bad_headers_say_why() {
        assert_eq!(PathwayContext::from_header(b"!!!"), Err(PathwayError::Base64));
        assert_eq!(PathwayContext::from_header(b"AAAA"), Err(PathwayError::Short));
        let mut truncated = PathwayContext {
            hash: 1,
            pathway_start_ms: 1 << 40,
            edge_start_ms: 1 << 40,
        }
        .encode();
        truncated.truncate(10);
        assert_eq!(PathwayContext::decode(&truncated), Err(PathwayError::Varint));
    }
}
