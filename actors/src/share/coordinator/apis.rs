//! InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState,
//! DeleteShareGroupState and ReadShareGroupStateSummary (Kafka's `KafkaApis` handlers over
//! `ShareCoordinatorService`): each share-partition of a request goes to the shard of
//! `abs(hash("group:topicId:partition")) % share.coordinator.state.topic.num.partitions`;
//! one this broker does not lead is answered NOT_COORDINATOR (the sender looks the
//! coordinator up again). [`ShareStateClient`] is the same routing for this broker's own
//! share-partition leaders.

use futures_util::future::join_all;
use kactor_protocol::errors::{NONE, NOT_COORDINATOR};
use kactor_protocol::messages::{
    delete_share_group_state_response as dsr, initialize_share_group_state_response as isr,
    read_share_group_state_response as rsr, read_share_group_state_summary_response as rssr,
    write_share_group_state_response as wsr, DeleteShareGroupStateResponse,
    InitializeShareGroupStateResponse, ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryResponse, WriteShareGroupStateResponse,
};
use kactor_protocol::{ApiKey, RequestBody, ResponseBody, Uuid};

use super::actor::{ShareCoordinatorTable, ShareStateRequest, StateAnswer, StateOp};
use super::core::{StateBatch, StateError, StateKey, WriteState};
use crate::group::core::hashing::coordinator_partition;
use crate::network::{HandlerOutcome, RequestRouter};

/// Routes share-partition state requests to this broker's coordinator shards.
#[derive(Clone)]
pub struct ShareStateClient {
    pub shards: ShareCoordinatorTable,
    /// `share.coordinator.state.topic.num.partitions`
    pub num_partitions: i32,
}

impl ShareStateClient {
    /// The `__share_group_state` partition coordinating `key`.
    pub fn partition_for(&self, key: &StateKey) -> i32 {
        coordinator_partition(&key.coordinator_key(), self.num_partitions.max(1))
    }

    /// Whether this broker runs the shard coordinating `key`.
    pub fn is_local(&self, key: &StateKey) -> bool {
        self.shards.borrow().contains_key(&self.partition_for(key))
    }

    pub async fn call(&self, key: StateKey, op: StateOp) -> Result<StateAnswer, StateError> {
        let p = self.partition_for(&key);
        let shard = self.shards.borrow().get(&p).cloned();
        let Some(shard) = shard else {
            return Err(not_coordinator());
        };
        shard
            .send(ShareStateRequest { key, op })
            .await
            .unwrap_or_else(|_| Err(not_coordinator()))
    }
}

fn not_coordinator() -> StateError {
    kactor_protocol::errors::with_default_message(NOT_COORDINATOR)
}

/// (error code, message) of an outcome, Kafka's way: success has a null message.
fn codes<T>(r: &Result<T, StateError>) -> (i16, Option<String>) {
    match r {
        Ok(_) => (NONE, None),
        Err((code, message)) => (*code, Some(message.clone())),
    }
}

/// Each (topic id, partition) of a request with its outcome, in request order.
async fn each<P>(
    client: &ShareStateClient,
    group: &str,
    topics: Vec<(Uuid, Vec<P>)>,
    op: impl Fn(&P) -> (i32, StateOp),
) -> Vec<(Uuid, Vec<(i32, Result<StateAnswer, StateError>)>)> {
    let mut out = Vec::with_capacity(topics.len());
    for (topic_id, parts) in topics {
        let calls = parts.iter().map(|p| {
            let (partition, o) = op(p);
            let key = StateKey::new(group, topic_id, partition);
            async move { (partition, client.call(key, o).await) }
        });
        out.push((topic_id, join_all(calls).await));
    }
    out
}

/// A response that only says, per partition, whether it worked (Initialize, Write and Delete
/// share the shape, each with its own generated structs).
macro_rules! outcome_only {
    ($results:expr, $response:ident, $module:ident, $topic:ident) => {
        $response {
            results: $results
                .into_iter()
                .map(|(topic_id, ps)| $module::$topic {
                    topic_id,
                    partitions: ps
                        .into_iter()
                        .map(|(partition, r)| {
                            let (error_code, error_message) = codes(&r);
                            $module::PartitionResult {
                                partition,
                                error_code,
                                error_message,
                                ..Default::default()
                            }
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    };
}

pub fn register(router: &mut RequestRouter, client: ShareStateClient) {
    let c = client.clone();
    router.register(ApiKey::InitializeShareGroupState, move |_ctx, body| {
        let c = c.clone();
        Box::pin(async move {
            let RequestBody::InitializeShareGroupState(r) = body else {
                unreachable!("router dispatches by key")
            };
            let topics = r
                .topics
                .into_iter()
                .map(|t| (t.topic_id, t.partitions))
                .collect();
            let results = each(&c, &r.group_id, topics, |p| {
                (
                    p.partition,
                    StateOp::Initialize {
                        state_epoch: p.state_epoch,
                        start_offset: p.start_offset,
                    },
                )
            })
            .await;
            HandlerOutcome::Respond(ResponseBody::InitializeShareGroupState(outcome_only!(
                results,
                InitializeShareGroupStateResponse,
                isr,
                InitializeStateResult
            )))
        })
    });
    let c = client.clone();
    router.register(ApiKey::ReadShareGroupState, move |_ctx, body| {
        let c = c.clone();
        Box::pin(async move {
            let RequestBody::ReadShareGroupState(r) = body else {
                unreachable!("router dispatches by key")
            };
            let topics = r
                .topics
                .into_iter()
                .map(|t| (t.topic_id, t.partitions))
                .collect();
            let results = each(&c, &r.group_id, topics, |p| {
                (
                    p.partition,
                    StateOp::Read {
                        leader_epoch: p.leader_epoch,
                    },
                )
            })
            .await;
            HandlerOutcome::Respond(ResponseBody::ReadShareGroupState(
                ReadShareGroupStateResponse {
                    results: results
                        .into_iter()
                        .map(|(topic_id, ps)| rsr::ReadStateResult {
                            topic_id,
                            partitions: ps.into_iter().map(read_result).collect(),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                },
            ))
        })
    });
    let c = client.clone();
    router.register(ApiKey::WriteShareGroupState, move |_ctx, body| {
        let c = c.clone();
        Box::pin(async move {
            let RequestBody::WriteShareGroupState(r) = body else {
                unreachable!("router dispatches by key")
            };
            let topics = r
                .topics
                .into_iter()
                .map(|t| (t.topic_id, t.partitions))
                .collect();
            let results = each(&c, &r.group_id, topics, |p| {
                (
                    p.partition,
                    StateOp::Write(WriteState {
                        state_epoch: p.state_epoch,
                        leader_epoch: p.leader_epoch,
                        start_offset: p.start_offset,
                        delivery_complete_count: p.delivery_complete_count,
                        batches: p.state_batches.iter().map(StateBatch::from).collect(),
                    }),
                )
            })
            .await;
            HandlerOutcome::Respond(ResponseBody::WriteShareGroupState(outcome_only!(
                results,
                WriteShareGroupStateResponse,
                wsr,
                WriteStateResult
            )))
        })
    });
    let c = client.clone();
    router.register(ApiKey::DeleteShareGroupState, move |_ctx, body| {
        let c = c.clone();
        Box::pin(async move {
            let RequestBody::DeleteShareGroupState(r) = body else {
                unreachable!("router dispatches by key")
            };
            let topics = r
                .topics
                .into_iter()
                .map(|t| (t.topic_id, t.partitions))
                .collect();
            let results = each(&c, &r.group_id, topics, |p| (p.partition, StateOp::Delete)).await;
            HandlerOutcome::Respond(ResponseBody::DeleteShareGroupState(outcome_only!(
                results,
                DeleteShareGroupStateResponse,
                dsr,
                DeleteStateResult
            )))
        })
    });
    let c = client;
    router.register(ApiKey::ReadShareGroupStateSummary, move |_ctx, body| {
        let c = c.clone();
        Box::pin(async move {
            let RequestBody::ReadShareGroupStateSummary(r) = body else {
                unreachable!("router dispatches by key")
            };
            let topics = r
                .topics
                .into_iter()
                .map(|t| (t.topic_id, t.partitions))
                .collect();
            let results = each(&c, &r.group_id, topics, |p| (p.partition, StateOp::Summary)).await;
            HandlerOutcome::Respond(ResponseBody::ReadShareGroupStateSummary(
                ReadShareGroupStateSummaryResponse {
                    results: results
                        .into_iter()
                        .map(|(topic_id, ps)| rssr::ReadStateSummaryResult {
                            topic_id,
                            partitions: ps.into_iter().map(summary_result).collect(),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                },
            ))
        })
    });
}

fn read_result((partition, r): (i32, Result<StateAnswer, StateError>)) -> rsr::PartitionResult {
    let (error_code, error_message) = codes(&r);
    match r {
        Ok(StateAnswer::Read(s)) => rsr::PartitionResult {
            partition,
            error_code,
            error_message,
            state_epoch: s.state_epoch,
            start_offset: s.start_offset,
            state_batches: s.batches.iter().map(Into::into).collect(),
            ..Default::default()
        },
        // Kafka's error rows: epoch 0, start offset 0, no batches.
        _ => rsr::PartitionResult {
            partition,
            error_code,
            error_message,
            ..Default::default()
        },
    }
}

fn summary_result((partition, r): (i32, Result<StateAnswer, StateError>)) -> rssr::PartitionResult {
    let (error_code, error_message) = codes(&r);
    match r {
        Ok(StateAnswer::Summary(s)) => rssr::PartitionResult {
            partition,
            error_code,
            error_message,
            state_epoch: s.state_epoch,
            leader_epoch: s.leader_epoch,
            start_offset: s.start_offset,
            delivery_complete_count: s.delivery_complete_count,
            ..Default::default()
        },
        _ => rssr::PartitionResult {
            partition,
            error_code,
            error_message,
            ..Default::default()
        },
    }
}

/// How to create `__share_group_state` through the controller (Kafka creates it on the first
/// FindCoordinator for a share key, or a share-partition leader's first state read).
#[derive(Clone)]
pub struct ShareStateTopicCreator {
    pub controller: crate::runtime::MeteredRecipient<crate::controller::messages::CreateTopics>,
    /// `share.coordinator.state.topic.num.partitions`
    pub num_partitions: i32,
    /// `share.coordinator.state.topic.replication.factor`
    pub replication_factor: i16,
    /// `share.coordinator.state.topic.min.isr`
    pub min_isr: i32,
    /// `share.coordinator.state.topic.segment.bytes`
    pub segment_bytes: i64,
}

impl ShareStateTopicCreator {
    /// The topic as Kafka configures it (`ShareCoordinatorService.shareGroupStateTopicConfigs`):
    /// deleted by the coordinator's own pruning rather than compacted, kept forever otherwise.
    pub fn topic(&self) -> crate::controller::core::requests::CreatableTopic {
        crate::controller::core::requests::CreatableTopic {
            name: super::actor::SHARE_STATE_TOPIC.to_string(),
            num_partitions: self.num_partitions,
            replication_factor: self.replication_factor,
            assignments: Vec::new(),
            configs: vec![
                ("cleanup.policy".to_string(), Some("delete".to_string())),
                ("compression.type".to_string(), Some("producer".to_string())),
                (
                    "segment.bytes".to_string(),
                    Some(self.segment_bytes.to_string()),
                ),
                (
                    "min.insync.replicas".to_string(),
                    Some(self.min_isr.to_string()),
                ),
                ("retention.ms".to_string(), Some("-1".to_string())),
            ],
        }
    }

    /// Creates the topic in the background when the image has none (a concurrent creation
    /// fails harmlessly with TOPIC_ALREADY_EXISTS); callers answer COORDINATOR_NOT_AVAILABLE
    /// meanwhile and are retried.
    pub fn ensure(&self, image: Option<&crate::metadata::core::MetadataImage>) {
        let missing = image.is_some_and(|i| {
            i.topics
                .get_by_name(super::actor::SHARE_STATE_TOPIC)
                .is_none()
        });
        if !missing {
            return;
        }
        let topic = self.topic();
        let controller = self.controller.clone();
        actix::spawn(async move {
            let _ = controller
                .send(crate::controller::messages::CreateTopics {
                    topics: vec![topic],
                    validate_only: false,
                })
                .await;
        });
    }
}
