//! Envelope (KIP-590) on the controller listener: an admin request a broker forwards to the
//! active controller, wrapped with the client's principal and address. Apache Kafka brokers
//! forward this way, so this is what lets a Kafka 4.4 broker in a kactor-controlled cluster
//! create topics or change configs. The inner request is decoded and served by the same route
//! a direct request would take; its response (header included) goes back inside the
//! EnvelopeResponse.
//!
//! Envelope-level errors, as Kafka's controller gives them: an inner request that cannot be
//! parsed, or whose API is not forwardable, is INVALID_REQUEST; an unreadable principal is
//! PRINCIPAL_DESERIALIZATION_FAILURE; an inner version this build does not serve is
//! UNSUPPORTED_VERSION. The inner request carries the client's principal and address, so the
//! authorization gate checks it as that client (the envelope itself needs CLUSTER_ACTION).

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};

use bytes::{Buf, Bytes};
use kactor_protocol::codec::get_uvarint;
use kactor_protocol::messages::{
    self as m, ApiKey, RequestBody, RequestHeader, ResponseBody, ResponseHeader,
};
use kactor_protocol::{
    request_header_version, response_header_version, versions, Decode, Encode, Writer,
};

use crate::network::frame::RequestPrefix;
use crate::network::router::{HandlerOutcome, RequestContext, RequestRouter};
use kactor_protocol::errors::{
    INVALID_REQUEST, PRINCIPAL_DESERIALIZATION_FAILURE, UNKNOWN_SERVER_ERROR, UNSUPPORTED_VERSION,
};

/// APIs Kafka 4.4 marks forwardable (`ApiKeys.forwardable`): only these may arrive in an
/// Envelope. (Delegation tokens and AllocateProducerIds, also forwardable in Kafka, have no
/// route here, so they are refused as unknown.)
pub const FORWARDABLE: &[ApiKey] = &[
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::CreateAcls,
    ApiKey::DeleteAcls,
    ApiKey::AlterConfigs,
    ApiKey::CreatePartitions,
    ApiKey::ElectLeaders,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::AlterPartitionReassignments,
    ApiKey::ListPartitionReassignments,
    ApiKey::AlterClientQuotas,
    ApiKey::AlterUserScramCredentials,
    ApiKey::DescribeQuorum,
    ApiKey::UpdateFeatures,
    ApiKey::UnregisterBroker,
    ApiKey::AddRaftVoter,
    ApiKey::RemoveRaftVoter,
];

/// The router the inner requests go through: the node's own, set once it is built (the
/// Envelope route is part of it, hence the late binding).
pub type InnerRouter = Arc<OnceLock<Arc<RequestRouter>>>;

pub fn register(router: &mut RequestRouter, inner: InnerRouter) {
    router.register(ApiKey::Envelope, move |ctx, body| {
        let inner = inner.clone();
        Box::pin(async move {
            let RequestBody::Envelope(env) = body else {
                return HandlerOutcome::Close("not an Envelope body".into());
            };
            let Some(router) = inner.get().cloned() else {
                return respond(&ctx, None, UNKNOWN_SERVER_ERROR);
            };
            match serve(&router, &ctx, env).await {
                Ok(data) => respond(&ctx, Some(data), 0),
                Err(code) => respond(&ctx, None, code),
            }
        })
    });
}

fn respond(ctx: &RequestContext, data: Option<Bytes>, error_code: i16) -> HandlerOutcome {
    ctx.record_error(error_code);
    HandlerOutcome::Respond(ResponseBody::Envelope(m::EnvelopeResponse {
        response_data: data,
        error_code,
        ..Default::default()
    }))
}

/// Serves the enveloped request; its encoded response, or an envelope error code.
async fn serve(
    router: &RequestRouter,
    outer: &RequestContext,
    env: m::EnvelopeRequest,
) -> Result<Bytes, i16> {
    let principal = check_principal(env.request_principal.as_deref())
        .map_err(|_| PRINCIPAL_DESERIALIZATION_FAILURE)?;
    let client_ip = client_address(&env.client_host_address).ok_or(INVALID_REQUEST)?;
    let frame = env.request_data;
    let prefix = RequestPrefix::peek(&frame).ok_or(INVALID_REQUEST)?;
    let api_key = ApiKey::try_from(prefix.api_key).map_err(|_| INVALID_REQUEST)?;
    if !FORWARDABLE.contains(&api_key) {
        return Err(INVALID_REQUEST);
    }
    let route = router.route(api_key).ok_or(INVALID_REQUEST)?.clone();
    let version = prefix.api_version;
    if !versions::is_supported(api_key, version) {
        return Err(UNSUPPORTED_VERSION);
    }
    let request_bytes = frame.len();
    let mut buf = frame;
    let header = RequestHeader::decode(&mut buf, request_header_version(api_key, version))
        .map_err(|_| INVALID_REQUEST)?;
    let body = RequestBody::decode(api_key, version, &mut buf).map_err(|_| INVALID_REQUEST)?;
    let mut connection = outer.connection.clone();
    connection.peer = SocketAddr::new(client_ip, 0);
    connection.principal = principal;
    let ctx = RequestContext {
        api_key,
        api_version: version,
        header,
        connection,
        received_at: outer.received_at,
        request_bytes,
    };
    let correlation_id = ctx.header.correlation_id;
    let response = match (route.handler)(ctx, body).await {
        HandlerOutcome::Respond(r)
        | HandlerOutcome::Throttled {
            response: Some(r), ..
        } => r,
        HandlerOutcome::NoResponse
        | HandlerOutcome::Throttled { response: None, .. }
        | HandlerOutcome::Close(_) => return Err(INVALID_REQUEST),
    };
    let mut w = Writer::with_capacity(256);
    let header = ResponseHeader {
        correlation_id,
        ..Default::default()
    };
    header
        .encode(&mut w, response_header_version(api_key, version))
        .map_err(|_| UNKNOWN_SERVER_ERROR)?;
    response
        .encode(&mut w, version)
        .map_err(|_| UNKNOWN_SERVER_ERROR)?;
    Ok(w.into_bytes())
}

/// The client address: 4 or 16 bytes.
fn client_address(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.len() {
        4 => Some(IpAddr::from(<[u8; 4]>::try_from(bytes).ok()?)),
        16 => Some(IpAddr::from(<[u8; 16]>::try_from(bytes).ok()?)),
        _ => None,
    }
}

/// Kafka's default principal serde (`DefaultPrincipalData`, flexible v0, prefixed by its
/// version as an int16): principal type, name, token-authenticated flag, tagged fields. A
/// custom principal builder may use another format; a null principal is refused as Kafka does.
/// The client principal a forwarding broker serialized (Kafka's `DefaultKafkaPrincipalBuilder`:
/// version 0, compact type and name strings, a token flag, no tagged fields). The inner
/// request is authorized as this principal, as Kafka's controller does.
fn check_principal(data: Option<&[u8]>) -> Result<crate::security::KafkaPrincipal, ()> {
    let mut b = Bytes::copy_from_slice(data.ok_or(())?);
    if b.remaining() < 2 || b.get_i16() != 0 {
        return Err(());
    }
    let mut parts = Vec::with_capacity(2);
    for _ in 0..2 {
        let len = get_uvarint(&mut b).map_err(|_| ())? as usize;
        let len = len.checked_sub(1).ok_or(())?;
        if b.remaining() < len {
            return Err(());
        }
        parts.push(std::str::from_utf8(&b[..len]).map_err(|_| ())?.to_string());
        b.advance(len);
    }
    if b.remaining() < 1 {
        return Err(());
    }
    b.advance(1);
    let tags = get_uvarint(&mut b).map_err(|_| ())?;
    if tags != 0 || b.has_remaining() {
        return Err(());
    }
    Ok(crate::security::KafkaPrincipal {
        principal_type: std::sync::Arc::from(parts[0].as_str()),
        name: std::sync::Arc::from(parts[1].as_str()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_principal_bytes_parse() {
        // User:ANONYMOUS as a Kafka 4.4 broker serialized it in an Envelope.
        let anon = [
            0, 0, 5, b'U', b's', b'e', b'r', 10, b'A', b'N', b'O', b'N', b'Y', b'M', b'O', b'U',
            b'S', 0, 0,
        ];
        assert!(check_principal(Some(&anon)).is_ok());
        assert!(check_principal(None).is_err());
        assert!(check_principal(Some(&anon[..10])).is_err());
        let mut v1 = anon;
        v1[1] = 1;
        assert!(check_principal(Some(&v1)).is_err());
    }

    #[test]
    fn client_addresses() {
        assert_eq!(
            client_address(&[127, 0, 0, 1]),
            Some(IpAddr::from([127, 0, 0, 1]))
        );
        assert!(client_address(&[1, 2, 3]).is_none());
    }
}
