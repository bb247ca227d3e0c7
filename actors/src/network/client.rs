//! One outbound Kafka-protocol connection (the part of Kafka's `NetworkClient` a node uses to
//! talk to another node's listener): connect, ApiVersions first to learn the peer's version
//! ranges, then one request at a time, each sent at the highest version both sides support and
//! answered within a deadline. Used by the Raft peer connections and the broker-to-controller
//! channel.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{Buf, Bytes};
use kactor_protocol::messages::{
    ApiKey, ApiVersionsRequest, RequestBody, RequestHeader, ResponseBody, ResponseHeader,
};
use kactor_protocol::{
    request_header_version, response_header_version, versions, Decode, Encode, Writer,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest response accepted (Kafka's `socket.request.max.bytes` default, 100 MiB).
const MAX_RESPONSE_BYTES: usize = 100 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connecting to {0}: {1}")]
    Connect(String, String),
    #[error("i/o with {0}: {1}")]
    Io(String, String),
    #[error("{0} did not answer within {1} ms")]
    Timeout(String, u64),
    #[error("{0} does not support {1:?}")]
    Unsupported(String, ApiKey),
    #[error("bad response from {0}: {1}")]
    Protocol(String, String),
}

pub struct KafkaConnection {
    address: String,
    stream: TcpStream,
    client_id: String,
    next_correlation_id: i32,
    /// The peer's (min, max) per API, from its ApiVersions answer.
    peer_versions: BTreeMap<i16, (i16, i16)>,
    /// What the peer's ApiVersions answer said, for callers that need its features.
    pub api_versions: kactor_protocol::messages::ApiVersionsResponse,
}

impl KafkaConnection {
    /// Connects to `address` (host:port) and exchanges ApiVersions, within `timeout`.
    pub async fn connect(
        address: &str,
        client_id: &str,
        timeout: Duration,
    ) -> Result<KafkaConnection, ClientError> {
        let stream = tokio::time::timeout(timeout, TcpStream::connect(address))
            .await
            .map_err(|_| ClientError::Timeout(address.to_string(), timeout.as_millis() as u64))?
            .map_err(|e| ClientError::Connect(address.to_string(), e.to_string()))?;
        let _ = stream.set_nodelay(true);
        let mut conn = KafkaConnection {
            address: address.to_string(),
            stream,
            client_id: client_id.to_string(),
            next_correlation_id: 0,
            peer_versions: BTreeMap::new(),
            api_versions: Default::default(),
        };
        let req = RequestBody::ApiVersions(ApiVersionsRequest {
            client_software_name: "kactor".into(),
            client_software_version: env!("CARGO_PKG_VERSION").into(),
            ..Default::default()
        });
        // v3 is what every Kafka 4.x node answers; it is the version Kafka's clients open with.
        let resp = conn.roundtrip(req, 3, timeout).await?;
        let ResponseBody::ApiVersions(av) = resp else {
            return Err(ClientError::Protocol(
                address.to_string(),
                "not an ApiVersions answer".into(),
            ));
        };
        if av.error_code != 0 {
            return Err(ClientError::Protocol(
                address.to_string(),
                format!("ApiVersions error {}", av.error_code),
            ));
        }
        conn.peer_versions = av
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        conn.api_versions = av;
        Ok(conn)
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    /// The highest version of `key` both sides support.
    pub fn version_for(&self, key: ApiKey) -> Option<i16> {
        let (ours_min, ours_max) = versions::advertised_range(key);
        let (min, max) = *self.peer_versions.get(&(key as i16))?;
        let v = ours_max.min(max);
        (v >= ours_min.max(min)).then_some(v)
    }

    /// Sends `body` at the highest common version and returns the answer with that version.
    pub async fn send(
        &mut self,
        body: RequestBody,
        timeout: Duration,
    ) -> Result<(i16, ResponseBody), ClientError> {
        let key = body.api_key();
        let version = self
            .version_for(key)
            .ok_or_else(|| ClientError::Unsupported(self.address.clone(), key))?;
        let resp = self.roundtrip(body, version, timeout).await?;
        Ok((version, resp))
    }

    /// Sends `body` at `version` (from [`Self::version_for`]: the body was built for it).
    pub async fn send_at(
        &mut self,
        body: RequestBody,
        version: i16,
        timeout: Duration,
    ) -> Result<ResponseBody, ClientError> {
        self.roundtrip(body, version, timeout).await
    }

    async fn roundtrip(
        &mut self,
        body: RequestBody,
        version: i16,
        timeout: Duration,
    ) -> Result<ResponseBody, ClientError> {
        let key = body.api_key();
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let header = RequestHeader {
            request_api_key: key as i16,
            request_api_version: version,
            correlation_id,
            client_id: Some(self.client_id.clone()),
            ..Default::default()
        };
        let proto = |e: String| ClientError::Protocol(self.address.clone(), e);
        let mut w = Writer::new();
        header
            .encode(&mut w, request_header_version(key, version))
            .map_err(|e| proto(e.to_string()))?;
        body.encode(&mut w, version)
            .map_err(|e| proto(e.to_string()))?;
        let payload = w.into_bytes();
        let mut frame = Vec::with_capacity(payload.len() + 4);
        frame.extend_from_slice(&(payload.len() as i32).to_be_bytes());
        frame.extend_from_slice(&payload);
        let address = self.address.clone();
        let io = |e: std::io::Error| ClientError::Io(address.clone(), e.to_string());
        let stream = &mut self.stream;
        let exchange = async {
            stream.write_all(&frame).await.map_err(io)?;
            let mut len = [0u8; 4];
            stream.read_exact(&mut len).await.map_err(io)?;
            let len = i32::from_be_bytes(len);
            if len < 0 || len as usize > MAX_RESPONSE_BYTES {
                return Err(ClientError::Protocol(
                    address.clone(),
                    format!("response size {len}"),
                ));
            }
            let mut buf = vec![0u8; len as usize];
            stream.read_exact(&mut buf).await.map_err(io)?;
            Ok(Bytes::from(buf))
        };
        let mut buf = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| {
                ClientError::Timeout(self.address.clone(), timeout.as_millis() as u64)
            })??;
        let rh = ResponseHeader::decode(&mut buf, response_header_version(key, version))
            .map_err(|e| ClientError::Protocol(self.address.clone(), e.to_string()))?;
        if rh.correlation_id != correlation_id {
            return Err(ClientError::Protocol(
                self.address.clone(),
                format!(
                    "correlation id {} for request {correlation_id}",
                    rh.correlation_id
                ),
            ));
        }
        let resp = ResponseBody::decode(key, version, &mut buf)
            .map_err(|e| ClientError::Protocol(self.address.clone(), e.to_string()))?;
        if buf.has_remaining() {
            tracing::debug!(
                peer = %self.address,
                api = key.name(),
                extra = buf.remaining(),
                "response has trailing bytes"
            );
        }
        Ok(resp)
    }
}
