//! BrokerRegistration and BrokerHeartbeat on the controller listener (Kafka's `ControllerApis`
//! `handleBrokerRegistration` / `handleBrokerHeartbeatRequest`): how a broker in another
//! process reaches the active controller. Also the conversions its client side
//! (`metadata/controller_channel.rs`) uses.

use kactor_protocol::messages::{self as m, ApiKey, RequestBody, ResponseBody};
use kactor_protocol::metadata::register_broker_record::{BrokerEndpoint, BrokerFeature};
use kactor_protocol::metadata::register_controller_record::{
    ControllerEndpoint, ControllerFeature, RegisterControllerRecord,
};

use super::actor::QuorumControllerActor;
use super::core::errors::{ApiError, NOT_CONTROLLER, UNKNOWN_SERVER_ERROR};
use super::core::requests::{
    BrokerHeartbeat, BrokerHeartbeatReply, BrokerRegistration, BrokerRegistrationReply,
};
use super::messages::{
    ControllerError, ProcessBrokerHeartbeat, RegisterBroker, RegisterController,
};
use crate::network::router::{HandlerOutcome, RequestRouter};
use crate::runtime::MeteredAddr;

fn code(e: &ControllerError) -> i16 {
    match e {
        ControllerError::NotController => NOT_CONTROLLER,
        ControllerError::WriteFailed(_) => UNKNOWN_SERVER_ERROR,
    }
}

pub fn registration_from_wire(r: m::BrokerRegistrationRequest) -> BrokerRegistration {
    BrokerRegistration {
        broker_id: r.broker_id,
        cluster_id: r.cluster_id,
        incarnation_id: r.incarnation_id,
        listeners: r
            .listeners
            .into_iter()
            .map(|l| BrokerEndpoint {
                name: l.name,
                host: l.host,
                port: l.port,
                security_protocol: l.security_protocol,
                ..Default::default()
            })
            .collect(),
        features: r
            .features
            .into_iter()
            .map(|f| BrokerFeature {
                name: f.name,
                min_supported_version: f.min_supported_version,
                max_supported_version: f.max_supported_version,
                ..Default::default()
            })
            .collect(),
        rack: r.rack,
        log_dirs: r.log_dirs,
        previous_broker_epoch: r.previous_broker_epoch,
    }
}

pub fn controller_record_from_wire(
    r: m::ControllerRegistrationRequest,
) -> RegisterControllerRecord {
    RegisterControllerRecord {
        controller_id: r.controller_id,
        incarnation_id: r.incarnation_id,
        zk_migration_ready: r.zk_migration_ready,
        end_points: r
            .listeners
            .into_iter()
            .map(|l| ControllerEndpoint {
                name: l.name,
                host: l.host,
                port: l.port,
                security_protocol: l.security_protocol,
                ..Default::default()
            })
            .collect(),
        features: r
            .features
            .into_iter()
            .map(|f| ControllerFeature {
                name: f.name,
                min_supported_version: f.min_supported_version,
                max_supported_version: f.max_supported_version,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

pub fn registration_to_wire(r: &BrokerRegistration) -> RequestBody {
    use m::broker_registration_request as q;
    RequestBody::BrokerRegistration(m::BrokerRegistrationRequest {
        broker_id: r.broker_id,
        cluster_id: r.cluster_id.clone(),
        incarnation_id: r.incarnation_id,
        listeners: r
            .listeners
            .iter()
            .map(|l| q::Listener {
                name: l.name.clone(),
                host: l.host.clone(),
                port: l.port,
                security_protocol: l.security_protocol,
                ..Default::default()
            })
            .collect(),
        features: r
            .features
            .iter()
            .map(|f| q::Feature {
                name: f.name.clone(),
                min_supported_version: f.min_supported_version,
                max_supported_version: f.max_supported_version,
                ..Default::default()
            })
            .collect(),
        rack: r.rack.clone(),
        log_dirs: r.log_dirs.clone(),
        previous_broker_epoch: r.previous_broker_epoch,
        ..Default::default()
    })
}

pub fn heartbeat_to_wire(h: &BrokerHeartbeat) -> RequestBody {
    RequestBody::BrokerHeartbeat(m::BrokerHeartbeatRequest {
        broker_id: h.broker_id,
        broker_epoch: h.broker_epoch,
        current_metadata_offset: h.current_metadata_offset,
        want_fence: h.want_fence,
        want_shut_down: h.want_shut_down,
        ..Default::default()
    })
}

/// Registers BrokerRegistration, BrokerHeartbeat and ControllerRegistration (controller
/// listeners only, by schema).
pub fn register(router: &mut RequestRouter, controller: MeteredAddr<QuorumControllerActor>) {
    {
        let controller = controller.clone();
        router.register(ApiKey::ControllerRegistration, move |ctx, body| {
            let controller = controller.clone();
            Box::pin(async move {
                let RequestBody::ControllerRegistration(r) = body else {
                    return HandlerOutcome::Close("not a ControllerRegistration body".into());
                };
                let msg = RegisterController {
                    record: controller_record_from_wire(r),
                };
                let error = match controller.send(msg).await {
                    Ok(Ok(c)) => c.response,
                    Ok(Err(e)) => ApiError::code(code(&e)),
                    Err(_) => ApiError::code(NOT_CONTROLLER),
                };
                ctx.record_error(error.code);
                HandlerOutcome::Respond(ResponseBody::ControllerRegistration(
                    m::ControllerRegistrationResponse {
                        error_code: error.code,
                        error_message: error.message,
                        ..Default::default()
                    },
                ))
            })
        });
    }
    {
        let controller = controller.clone();
        router.register(ApiKey::BrokerRegistration, move |_ctx, body| {
            let controller = controller.clone();
            Box::pin(async move {
                let RequestBody::BrokerRegistration(r) = body else {
                    return HandlerOutcome::Close("not a BrokerRegistration body".into());
                };
                let msg = RegisterBroker {
                    registration: registration_from_wire(r),
                };
                let (error_code, broker_epoch) = match controller.send(msg).await {
                    Ok(Ok(c)) => (c.response.error.code, c.response.broker_epoch),
                    Ok(Err(e)) => (code(&e), -1),
                    Err(_) => (NOT_CONTROLLER, -1),
                };
                HandlerOutcome::Respond(ResponseBody::BrokerRegistration(
                    m::BrokerRegistrationResponse {
                        error_code,
                        broker_epoch,
                        ..Default::default()
                    },
                ))
            })
        });
    }
    router.register(ApiKey::BrokerHeartbeat, move |_ctx, body| {
        let controller = controller.clone();
        Box::pin(async move {
            let RequestBody::BrokerHeartbeat(h) = body else {
                return HandlerOutcome::Close("not a BrokerHeartbeat body".into());
            };
            let msg = ProcessBrokerHeartbeat {
                heartbeat: BrokerHeartbeat {
                    broker_id: h.broker_id,
                    broker_epoch: h.broker_epoch,
                    current_metadata_offset: h.current_metadata_offset,
                    want_fence: h.want_fence,
                    want_shut_down: h.want_shut_down,
                },
            };
            let resp = match controller.send(msg).await {
                Ok(Ok(c)) => m::BrokerHeartbeatResponse {
                    error_code: c.response.error.code,
                    is_caught_up: c.response.is_caught_up,
                    is_fenced: c.response.is_fenced,
                    should_shut_down: c.response.should_shut_down,
                    ..Default::default()
                },
                Ok(Err(e)) => m::BrokerHeartbeatResponse {
                    error_code: code(&e),
                    is_fenced: true,
                    ..Default::default()
                },
                Err(_) => m::BrokerHeartbeatResponse {
                    error_code: NOT_CONTROLLER,
                    is_fenced: true,
                    ..Default::default()
                },
            };
            HandlerOutcome::Respond(ResponseBody::BrokerHeartbeat(resp))
        })
    });
}

pub fn registration_reply_from_wire(body: ResponseBody) -> Option<BrokerRegistrationReply> {
    let ResponseBody::BrokerRegistration(r) = body else {
        return None;
    };
    Some(BrokerRegistrationReply {
        error: ApiError::code(r.error_code),
        broker_epoch: r.broker_epoch,
    })
}

pub fn heartbeat_reply_from_wire(body: ResponseBody) -> Option<BrokerHeartbeatReply> {
    let ResponseBody::BrokerHeartbeat(r) = body else {
        return None;
    };
    Some(BrokerHeartbeatReply {
        error: ApiError::code(r.error_code),
        is_caught_up: r.is_caught_up,
        is_fenced: r.is_fenced,
        should_shut_down: r.should_shut_down,
    })
}
