//! One TCP connection to one broker: framing, correlation ids, version
//! negotiation and pipelining. Responses on a Kafka connection come back in the
//! order requests were sent, so many requests can be written before reading any.

use super::KafkaError;
use crate::config::ClusterConfig;
use crate::sasl::{self, Mechanism, SaslConfig, Scram};
use crate::tls::{self, Stream};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};
use std::sync::Arc;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::ClientConfig;
// kafka-protocol's codec errors are anyhow errors; only their text is kept.
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use std::collections::HashMap;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;

/// A response larger than this is refused: no admin answer we ask for comes near it.
const MAX_RESPONSE_BYTES: usize = 64 << 20;
/// The UNSUPPORTED_VERSION error code.
const UNSUPPORTED_VERSION: i16 = 35;

#[derive(Debug)]
pub(crate) struct Connection {
    pub(crate) addr: String,
    stream: BufWriter<Stream>,
    client_id: StrBytes,
    next_correlation: i32,
    /// The versions the broker accepts, by API key.
    versions: HashMap<i16, (i16, i16)>,
    timeout: Duration,
}

impl Connection {
    pub(crate) async fn connect(
        addr: &str,
        config: &ClusterConfig,
        tls: Option<&Result<Arc<ClientConfig>, String>>,
    ) -> Result<Self, KafkaError> {
        let timeout = config.request_timeout;
        let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| KafkaError::Timeout {
                broker: addr.to_owned(),
            })?
            .map_err(|e| KafkaError::Connect {
                broker: addr.to_owned(),
                reason: e.to_string(),
            })?;
        let _ = stream.set_nodelay(true);
        let tls_error = |reason: String| KafkaError::Tls {
            broker: addr.to_owned(),
            reason,
        };
        let stream = match tls {
            None => Stream::Plain(stream),
            Some(Err(e)) => return Err(tls_error(e.clone())),
            Some(Ok(client)) => {
                let name = tls::server_name(&config.tls.clone().unwrap_or_default(), addr).map_err(tls_error)?;
                let handshake = TlsConnector::from(client.clone()).connect(name, stream);
                let stream = tokio::time::timeout(timeout, handshake)
                    .await
                    .map_err(|_| KafkaError::Timeout {
                        broker: addr.to_owned(),
                    })?
                    .map_err(|e| tls_error(e.to_string()))?;
                Stream::Tls(Box::new(stream))
            }
        };
        let mut conn = Self {
            addr: addr.to_owned(),
            stream: BufWriter::new(stream),
            client_id: StrBytes::from_string(config.client_id.clone()),
            next_correlation: 0,
            versions: HashMap::new(),
            timeout,
        };
        conn.negotiate().await?;
        if let Some(sasl) = &config.sasl {
            conn.authenticate(sasl).await?;
        }
        Ok(conn)
    }

    /// SaslHandshake v1, then SaslAuthenticate round trips.
    async fn authenticate(&mut self, sasl: &SaslConfig) -> Result<(), KafkaError> {
        let broker = self.addr.clone();
        let auth = |reason: String| KafkaError::Auth {
            broker: broker.clone(),
            reason,
        };
        let handshake =
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(sasl.mechanism.name()));
        if self.version::<SaslHandshakeRequest>().is_none_or(|v| v < 1) {
            return Err(auth("the broker has no SaslHandshake v1".into()));
        }
        let answer = self.send(&handshake).await?;
        if answer.error_code != 0 {
            let offered: Vec<&str> = answer.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(auth(format!(
                "mechanism {} refused (error code {}); the broker offers {offered:?}",
                sasl.mechanism.name(),
                answer.error_code
            )));
        }
        let mut step = async |bytes: Vec<u8>| -> Result<Vec<u8>, KafkaError> {
            let answer = self
                .send(&SaslAuthenticateRequest::default().with_auth_bytes(bytes.into()))
                .await?;
            if answer.error_code != 0 {
                let message = answer.error_message.as_ref().map_or("", |m| m.as_str());
                return Err(auth(format!("error code {}: {message}", answer.error_code)));
            }
            Ok(answer.auth_bytes.to_vec())
        };
        match sasl.mechanism {
            Mechanism::Plain => {
                step(sasl::plain(&sasl.username, &sasl.password)).await?;
            }
            Mechanism::ScramSha256 | Mechanism::ScramSha512 => {
                let mut scram = Scram::new(sasl.mechanism, &sasl.username, &sasl.password, Scram::nonce());
                let server_first = step(scram.client_first()).await?;
                // Key derivation costs up to MAX_SCRAM_ITERATIONS hashes: off the
                // async workers, so that one broker's answer cannot stall the rest.
                let (scram_back, client_final) = tokio::task::spawn_blocking(move || {
                    let answer = scram.client_final(&server_first);
                    (scram, answer)
                })
                .await
                .map_err(|e| auth(format!("key derivation failed: {e}")))?;
                scram = scram_back;
                let client_final = client_final.map_err(auth)?;
                let server_final = step(client_final).await?;
                scram.verify_server_final(&server_final).map_err(auth)?;
            }
        }
        Ok(())
    }

    /// Asks the broker which versions it speaks. A broker that does not know our
    /// ApiVersions version answers in version 0 with what it does know.
    async fn negotiate(&mut self) -> Result<(), KafkaError> {
        let mut version = 3;
        for _ in 0..3 {
            let body = self.frame(
                ApiKey::ApiVersions as i16,
                version,
                ApiVersionsRequest::header_version(version),
                |b| {
                    ApiVersionsRequest::default()
                        .with_client_software_name(StrBytes::from_static_str("streamsight"))
                        .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")))
                        .encode(b, version)
                },
            )?;
            self.write(&body).await?;
            self.stream.flush().await.map_err(|e| self.io(e))?;
            let mut frame = self.read_frame().await?;
            // A version the broker does not know is refused, in v0 by the protocol
            // (librdkafka's mock answers in its own shape): then ask in the highest
            // version it names, or in v0, which every broker speaks.
            let refused = frame.len() >= 6 && i16::from_be_bytes([frame[4], frame[5]]) == UNSUPPORTED_VERSION;
            if refused {
                let _ = ResponseHeader::decode(&mut frame, 0);
                let max = ApiVersionsResponse::decode(&mut frame, 0).ok().and_then(|r| {
                    r.api_keys
                        .iter()
                        .find(|k| k.api_key == ApiKey::ApiVersions as i16)
                        .map(|k| k.max_version)
                });
                let next = max.unwrap_or(0).min(2);
                version = if next < version { next } else { 0 };
                continue;
            }
            ResponseHeader::decode(&mut frame, ApiVersionsResponse::header_version(version))
                .map_err(|e| self.decode("ApiVersions", e))?;
            let response =
                ApiVersionsResponse::decode(&mut frame, version).map_err(|e| self.decode("ApiVersions", e))?;
            if response.error_code != 0 {
                return Err(KafkaError::Broker {
                    broker: self.addr.clone(),
                    api: "ApiVersions",
                    code: response.error_code,
                });
            }
            self.versions = response
                .api_keys
                .iter()
                .map(|k| (k.api_key, (k.min_version, k.max_version)))
                .collect();
            return Ok(());
        }
        Err(KafkaError::Unsupported {
            broker: self.addr.clone(),
            api: "ApiVersions",
        })
    }

    /// The highest version of `R` both sides speak.
    pub(crate) fn version<R: Request>(&self) -> Option<i16> {
        let (min, max) = *self.versions.get(&R::KEY)?;
        let ours = R::VERSIONS;
        // Fetch v13+ names topics by id, the poller by name.
        // OffsetCommit v10+ too.
        let ours_max = if R::KEY == ApiKey::Fetch as i16 {
            ours.max.min(super::record_times::FETCH_MAX_VERSION)
        } else if R::KEY == ApiKey::OffsetCommit as i16 {
            ours.max.min(super::admin::OFFSET_COMMIT_MAX_VERSION)
        } else {
            ours.max
        };
        let v = max.min(ours_max);
        (v >= min.max(ours.min)).then_some(v)
    }

    pub(crate) fn supports<R: Request>(&self) -> bool {
        self.version::<R>().is_some()
    }

    /// Sends one request and waits for its answer.
    pub(crate) async fn send<R: Request>(&mut self, request: &R) -> Result<R::Response, KafkaError> {
        let mut answers = self.send_all(std::slice::from_ref(request)).await?;
        answers.pop().ok_or_else(|| KafkaError::Protocol {
            broker: self.addr.clone(),
            reason: "no answer".into(),
        })
    }

    /// Writes every request, then reads every answer, in order.
    pub(crate) async fn send_all<R: Request>(&mut self, requests: &[R]) -> Result<Vec<R::Response>, KafkaError> {
        let api = api_name(R::KEY);
        let version = self.version::<R>().ok_or_else(|| KafkaError::Unsupported {
            broker: self.addr.clone(),
            api,
        })?;
        let first = self.next_correlation;
        for r in requests {
            let body = self.frame(R::KEY, version, R::header_version(version), |b| r.encode(b, version))?;
            self.write(&body).await?;
        }
        self.stream.flush().await.map_err(|e| self.io(e))?;
        let mut answers = Vec::with_capacity(requests.len());
        for i in 0..requests.len() {
            let mut frame = self.read_frame().await?;
            let header = ResponseHeader::decode(&mut frame, R::Response::header_version(version))
                .map_err(|e| self.decode(api, e))?;
            let expected = first.wrapping_add(i as i32);
            if header.correlation_id != expected {
                return Err(KafkaError::Protocol {
                    broker: self.addr.clone(),
                    reason: format!("answer {} arrived for request {expected}", header.correlation_id),
                });
            }
            answers.push(R::Response::decode(&mut frame, version).map_err(|e| self.decode(api, e))?);
        }
        Ok(answers)
    }

    fn frame(
        &mut self,
        key: i16,
        version: i16,
        header_version: i16,
        encode: impl FnOnce(&mut BytesMut) -> Result<(), anyhow::Error>,
    ) -> Result<BytesMut, KafkaError> {
        let header = RequestHeader::default()
            .with_request_api_key(key)
            .with_request_api_version(version)
            .with_correlation_id(self.next_correlation)
            .with_client_id(Some(self.client_id.clone()));
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let mut buf = BytesMut::with_capacity(256);
        buf.put_i32(0);
        let api = api_name(key);
        header
            .encode(&mut buf, header_version)
            .map_err(|e| self.encode_error(api, e))?;
        encode(&mut buf).map_err(|e| self.encode_error(api, e))?;
        let len = i32::try_from(buf.len() - 4).map_err(|_| KafkaError::Protocol {
            broker: self.addr.clone(),
            reason: format!("{api} request too large"),
        })?;
        buf[..4].copy_from_slice(&len.to_be_bytes());
        Ok(buf)
    }

    async fn write(&mut self, body: &[u8]) -> Result<(), KafkaError> {
        let result = tokio::time::timeout(self.timeout, self.stream.write_all(body)).await;
        match result {
            Ok(r) => r.map_err(|e| self.io(e)),
            Err(_) => Err(KafkaError::Timeout {
                broker: self.addr.clone(),
            }),
        }
    }

    async fn read_frame(&mut self) -> Result<Bytes, KafkaError> {
        let timeout = self.timeout;
        let read = async {
            let len = self.stream.get_mut().read_i32().await?;
            let len = usize::try_from(len)
                .ok()
                .filter(|&l| l <= MAX_RESPONSE_BYTES)
                .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("frame length {len}")))?;
            // Grown as bytes arrive: a length alone does not buy memory.
            let mut buf = Vec::with_capacity(len.min(1 << 20));
            (&mut *self.stream.get_mut())
                .take(len as u64)
                .read_to_end(&mut buf)
                .await?;
            if buf.len() != len {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("frame ended after {} of {len} bytes", buf.len()),
                ));
            }
            Ok::<_, std::io::Error>(Bytes::from(buf))
        };
        match tokio::time::timeout(timeout, read).await {
            Ok(r) => r.map_err(|e| self.io(e)),
            Err(_) => Err(KafkaError::Timeout {
                broker: self.addr.clone(),
            }),
        }
    }

    /// An I/O error on a connection already made: the broker is reachable,
    /// and dropped it.
    fn io(&self, e: std::io::Error) -> KafkaError {
        KafkaError::Closed {
            broker: self.addr.clone(),
            reason: e.to_string(),
        }
    }

    fn decode(&self, api: &'static str, e: impl std::fmt::Display) -> KafkaError {
        KafkaError::Protocol {
            broker: self.addr.clone(),
            reason: format!("undecodable {api} answer: {e}"),
        }
    }

    fn encode_error(&self, api: &'static str, e: impl std::fmt::Display) -> KafkaError {
        KafkaError::Protocol {
            broker: self.addr.clone(),
            reason: format!("cannot encode {api} request: {e}"),
        }
    }
}

pub(crate) fn api_name(key: i16) -> &'static str {
    if key == streamsight_wire::kafka_admin::STREAMS_GROUP_DESCRIBE {
        return "StreamsGroupDescribe";
    }
    match ApiKey::try_from(key) {
        Ok(k) => match k {
            ApiKey::Metadata => "Metadata",
            ApiKey::ListGroups => "ListGroups",
            ApiKey::DescribeGroups => "DescribeGroups",
            ApiKey::FindCoordinator => "FindCoordinator",
            ApiKey::OffsetFetch => "OffsetFetch",
            ApiKey::ListOffsets => "ListOffsets",
            ApiKey::OffsetCommit => "OffsetCommit",
            ApiKey::ApiVersions => "ApiVersions",
            ApiKey::DeleteGroups => "DeleteGroups",
            ApiKey::SaslHandshake => "SaslHandshake",
            ApiKey::SaslAuthenticate => "SaslAuthenticate",
            ApiKey::DescribeProducers => "DescribeProducers",
            ApiKey::ListTransactions => "ListTransactions",
            ApiKey::DescribeTransactions => "DescribeTransactions",
            ApiKey::DescribeShareGroupOffsets => "DescribeShareGroupOffsets",
            ApiKey::ShareGroupDescribe => "ShareGroupDescribe",
            ApiKey::ConsumerGroupDescribe => "ConsumerGroupDescribe",
            _ => "request",
        },
        Err(()) => "request",
    }
}
