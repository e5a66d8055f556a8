//! Just enough HTTP/1.1 to POST a payload to the collector, with timeouts, on
//! the shipper thread: no runtime, no connection pool, nothing on the app's path.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub(crate) enum PostError {
    #[error("collector url {0:?} is not http://HOST:PORT")]
    BadUrl(String),
    #[error("cannot reach the collector: {0}")]
    Io(std::io::Error),
    #[error("the collector answered {0:?}")]
    Status(String),
}

/// POSTs a gzipped msgpack body to `base` (`http://host:port`) + `path`, with
/// `key` as a bearer token when there is one.
pub(crate) fn post_msgpack(base: &str, path: &str, body: &[u8], key: Option<&str>) -> Result<(), PostError> {
    let authority = base
        .strip_prefix("http://")
        .map(|a| a.trim_end_matches('/'))
        .filter(|a| !a.is_empty() && !a.contains('/'))
        .ok_or_else(|| PostError::BadUrl(base.to_owned()))?;
    let addr = authority
        .to_socket_addrs()
        .map_err(PostError::Io)?
        .next()
        .ok_or_else(|| PostError::BadUrl(base.to_owned()))?;
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT).map_err(PostError::Io)?;
    stream.set_read_timeout(Some(TIMEOUT)).map_err(PostError::Io)?;
    stream.set_write_timeout(Some(TIMEOUT)).map_err(PostError::Io)?;
    // A key with a line break in it would inject headers: it is not sent.
    let auth = key
        .filter(|k| !k.contains(['\r', '\n']))
        .map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"));
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/msgpack\r\nContent-Encoding: gzip\r\n{auth}Datadog-Meta-Lang: rust\r\nDatadog-Meta-Tracer-Version: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        env!("CARGO_PKG_VERSION"),
        body.len()
    );
    stream.write_all(head.as_bytes()).map_err(PostError::Io)?;
    stream.write_all(body).map_err(PostError::Io)?;
    let mut status = [0u8; 12];
    stream.read_exact(&mut status).map_err(PostError::Io)?;
    let line = String::from_utf8_lossy(&status).into_owned();
    if line.starts_with("HTTP/1.1 2") || line.starts_with("HTTP/1.0 2") {
        Ok(())
    } else {
        Err(PostError::Status(line))
    }
}
