//! BrokerRegistration, BrokerHeartbeat and AlterPartition on the controller listener (Kafka's
//! `ControllerApis` `handleBrokerRegistration` / `handleBrokerHeartbeatRequest` /
//! `handleAlterPartitionRequest`): how a broker in another process reaches the active
//! controller. Also the conversions its client side (`metadata/controller_channel.rs`) uses.

use kactor_protocol::errors::{NOT_CONTROLLER, UNKNOWN_SERVER_ERROR};
use kactor_protocol::messages::{self as m, ApiKey, RequestBody, ResponseBody};
use kactor_protocol::metadata::register_broker_record::{BrokerEndpoint, BrokerFeature};
use kactor_protocol::metadata::register_controller_record::{
    ControllerEndpoint, ControllerFeature, RegisterControllerRecord,
};

use super::actor::QuorumControllerActor;
use super::core::errors::ApiError;
use super::core::requests::{
    AllocateProducerIdsReply, AlterPartition, AlterPartitionPartition,
    AlterPartitionPartitionReply, AlterPartitionReply, AlterPartitionTopic,
    AlterPartitionTopicReply, BrokerHeartbeat, BrokerHeartbeatReply, BrokerRegistration,
    BrokerRegistrationReply, IsrMember,
};
use super::messages::{
    AllocateProducerIds, ControllerError, ProcessAlterPartition, ProcessBrokerHeartbeat,
    RegisterBroker, RegisterController,
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

/// The first AlterPartition version whose ISR members carry broker epochs (`NewIsrWithEpochs`);
/// earlier versions send bare ids (`NewIsr`).
const ALTER_PARTITION_ISR_WITH_EPOCHS: i16 = 3;

/// An AlterPartition request as the controller reads it: a v2 ISR's ids get epoch -1 (not
/// checked), as Kafka widens them.
pub fn alter_partition_from_wire(r: m::AlterPartitionRequest, version: i16) -> AlterPartition {
    AlterPartition {
        broker_id: r.broker_id,
        broker_epoch: r.broker_epoch,
        topics: r
            .topics
            .into_iter()
            .map(|t| AlterPartitionTopic {
                topic_id: t.topic_id,
                partitions: t
                    .partitions
                    .into_iter()
                    .map(|p| AlterPartitionPartition {
                        partition_index: p.partition_index,
                        leader_epoch: p.leader_epoch,
                        new_isr: if version >= ALTER_PARTITION_ISR_WITH_EPOCHS {
                            p.new_isr_with_epochs
                                .iter()
                                .map(|b| IsrMember {
                                    broker_id: b.broker_id,
                                    broker_epoch: b.broker_epoch,
                                })
                                .collect()
                        } else {
                            p.new_isr
                                .iter()
                                .map(|&broker_id| IsrMember {
                                    broker_id,
                                    broker_epoch: -1,
                                })
                                .collect()
                        },
                        leader_recovery_state: p.leader_recovery_state,
                        partition_epoch: p.partition_epoch,
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// The wire form of `req` for a controller that takes AlterPartition `version` (2 or 3; pick it
/// with the connection's `version_for(ApiKey::AlterPartition)` and send with `send_at`): v3
/// carries each member's broker epoch, v2 only the ids.
pub fn alter_partition_request(req: &AlterPartition, version: i16) -> m::AlterPartitionRequest {
    use m::alter_partition_request as q;
    let with_epochs = version >= ALTER_PARTITION_ISR_WITH_EPOCHS;
    m::AlterPartitionRequest {
        broker_id: req.broker_id,
        broker_epoch: req.broker_epoch,
        topics: req
            .topics
            .iter()
            .map(|t| q::TopicData {
                topic_id: t.topic_id,
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| q::PartitionData {
                        partition_index: p.partition_index,
                        leader_epoch: p.leader_epoch,
                        new_isr: if with_epochs {
                            Vec::new()
                        } else {
                            p.new_isr.iter().map(|b| b.broker_id).collect()
                        },
                        new_isr_with_epochs: if with_epochs {
                            p.new_isr
                                .iter()
                                .map(|b| q::BrokerState {
                                    broker_id: b.broker_id,
                                    broker_epoch: b.broker_epoch,
                                    ..Default::default()
                                })
                                .collect()
                        } else {
                            Vec::new()
                        },
                        leader_recovery_state: p.leader_recovery_state,
                        partition_epoch: p.partition_epoch,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

pub fn alter_partition_to_wire(req: &AlterPartition, version: i16) -> RequestBody {
    RequestBody::AlterPartition(alter_partition_request(req, version))
}

pub fn alter_partition_reply_to_wire(r: &AlterPartitionReply) -> m::AlterPartitionResponse {
    use m::alter_partition_response as a;
    m::AlterPartitionResponse {
        error_code: r.error.code,
        topics: r
            .topics
            .iter()
            .map(|t| a::TopicData {
                topic_id: t.topic_id,
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| a::PartitionData {
                        partition_index: p.partition_index,
                        error_code: p.error_code,
                        leader_id: p.leader_id,
                        leader_epoch: p.leader_epoch,
                        isr: p.isr.clone(),
                        leader_recovery_state: p.leader_recovery_state,
                        partition_epoch: p.partition_epoch,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// The controller's AlterPartition answer as the sending broker reads it; None if `body` is not
/// one.
pub fn alter_partition_reply_from_wire(body: ResponseBody) -> Option<AlterPartitionReply> {
    let ResponseBody::AlterPartition(r) = body else {
        return None;
    };
    Some(AlterPartitionReply {
        error: ApiError::code(r.error_code),
        topics: r
            .topics
            .into_iter()
            .map(|t| AlterPartitionTopicReply {
                topic_id: t.topic_id,
                partitions: t
                    .partitions
                    .into_iter()
                    .map(|p| AlterPartitionPartitionReply {
                        partition_index: p.partition_index,
                        error_code: p.error_code,
                        leader_id: p.leader_id,
                        leader_epoch: p.leader_epoch,
                        isr: p.isr,
                        leader_recovery_state: p.leader_recovery_state,
                        partition_epoch: p.partition_epoch,
                    })
                    .collect(),
            })
            .collect(),
    })
}

/// AllocateProducerIds' answer from the wire; `None` if the body is another API's.
pub fn allocate_producer_ids_reply_from_wire(
    body: ResponseBody,
) -> Option<AllocateProducerIdsReply> {
    let ResponseBody::AllocateProducerIds(r) = body else {
        return None;
    };
    Some(AllocateProducerIdsReply {
        error: ApiError::code(r.error_code),
        producer_id_start: r.producer_id_start,
        producer_id_len: r.producer_id_len,
    })
}

/// Registers BrokerRegistration, BrokerHeartbeat, AlterPartition, AllocateProducerIds and
/// ControllerRegistration (controller listeners only, by schema, as in Kafka).
pub fn register(router: &mut RequestRouter, controller: MeteredAddr<QuorumControllerActor>) {
    {
        let controller = controller.clone();
        router.register(ApiKey::AllocateProducerIds, move |ctx, body| {
            let controller = controller.clone();
            Box::pin(async move {
                let RequestBody::AllocateProducerIds(r) = body else {
                    return HandlerOutcome::Close("not an AllocateProducerIds body".into());
                };
                let msg = AllocateProducerIds {
                    broker_id: r.broker_id,
                    broker_epoch: r.broker_epoch,
                };
                let resp = match controller.send(msg).await {
                    Ok(Ok(c)) => m::AllocateProducerIdsResponse {
                        error_code: c.response.error.code,
                        producer_id_start: c.response.producer_id_start,
                        producer_id_len: c.response.producer_id_len,
                        ..Default::default()
                    },
                    Ok(Err(e)) => m::AllocateProducerIdsResponse {
                        error_code: code(&e),
                        producer_id_start: -1,
                        producer_id_len: -1,
                        ..Default::default()
                    },
                    Err(_) => m::AllocateProducerIdsResponse {
                        error_code: NOT_CONTROLLER,
                        producer_id_start: -1,
                        producer_id_len: -1,
                        ..Default::default()
                    },
                };
                ctx.record_error(resp.error_code);
                HandlerOutcome::Respond(ResponseBody::AllocateProducerIds(resp))
            })
        });
    }
    {
        let controller = controller.clone();
        router.register(ApiKey::AlterPartition, move |ctx, body| {
            let controller = controller.clone();
            Box::pin(async move {
                let RequestBody::AlterPartition(r) = body else {
                    return HandlerOutcome::Close("not an AlterPartition body".into());
                };
                let msg = ProcessAlterPartition {
                    request: alter_partition_from_wire(r, ctx.api_version),
                };
                let reply = match controller.send(msg).await {
                    Ok(Ok(c)) => c.response,
                    Ok(Err(e)) => AlterPartitionReply::failed(ApiError::code(code(&e))),
                    Err(_) => AlterPartitionReply::failed(ApiError::code(NOT_CONTROLLER)),
                };
                ctx.record_error(reply.error.code);
                HandlerOutcome::Respond(ResponseBody::AlterPartition(
                    alter_partition_reply_to_wire(&reply),
                ))
            })
        });
    }
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

#[cfg(test)]
mod tests {
    use kactor_protocol::{Uuid, Writer};

    use super::*;

    fn request() -> AlterPartition {
        AlterPartition {
            broker_id: 2,
            broker_epoch: 40,
            topics: vec![AlterPartitionTopic {
                topic_id: Uuid([7; 16]),
                partitions: vec![AlterPartitionPartition {
                    partition_index: 3,
                    leader_epoch: 5,
                    new_isr: vec![
                        IsrMember {
                            broker_id: 2,
                            broker_epoch: 40,
                        },
                        IsrMember {
                            broker_id: 1,
                            broker_epoch: 12,
                        },
                    ],
                    leader_recovery_state: 1,
                    partition_epoch: 9,
                }],
            }],
        }
    }

    /// Encodes at `version` and decodes as the controller listener does.
    fn through_the_wire(req: &AlterPartition, version: i16) -> AlterPartition {
        let mut w = Writer::new();
        alter_partition_to_wire(req, version)
            .encode(&mut w, version)
            .expect("encodes");
        let mut buf = w.into_bytes();
        let RequestBody::AlterPartition(r) =
            RequestBody::decode(ApiKey::AlterPartition, version, &mut buf).expect("decodes")
        else {
            panic!("not AlterPartition");
        };
        alter_partition_from_wire(r, version)
    }

    #[test]
    fn alter_partition_requests_cross_the_wire_at_v2_and_v3() {
        let req = request();
        assert_eq!(through_the_wire(&req, 3), req);
        // v2 has no broker epochs in the ISR: they arrive as -1 (unchecked).
        let mut v2 = req.clone();
        for m in &mut v2.topics[0].partitions[0].new_isr {
            m.broker_epoch = -1;
        }
        assert_eq!(through_the_wire(&req, 2), v2);
    }

    #[test]
    fn alter_partition_replies_cross_the_wire() {
        let reply = AlterPartitionReply {
            error: ApiError::NONE,
            topics: vec![AlterPartitionTopicReply {
                topic_id: Uuid([7; 16]),
                partitions: vec![
                    AlterPartitionPartitionReply {
                        partition_index: 3,
                        error_code: 0,
                        leader_id: 2,
                        leader_epoch: 5,
                        isr: vec![2, 1],
                        leader_recovery_state: 0,
                        partition_epoch: 10,
                    },
                    AlterPartitionPartitionReply {
                        partition_index: 4,
                        error_code: kactor_protocol::errors::INELIGIBLE_REPLICA,
                        ..Default::default()
                    },
                ],
            }],
        };
        for version in [2, 3] {
            let mut w = Writer::new();
            ResponseBody::AlterPartition(alter_partition_reply_to_wire(&reply))
                .encode(&mut w, version)
                .expect("encodes");
            let mut buf = w.into_bytes();
            let body =
                ResponseBody::decode(ApiKey::AlterPartition, version, &mut buf).expect("decodes");
            assert_eq!(alter_partition_reply_from_wire(body), Some(reply.clone()));
        }
    }
}
