//! AlterPartition (Kafka's `ReplicationControlManager.alterPartition` with the
//! `PartitionChangeBuilder` rules it applies): a partition leader, on whichever broker, asks the
//! controller to shrink or expand the ISR it keeps. The controller checks the request against
//! the partition's registration (the leader and partition epochs the leader acted on, that the
//! sender leads, that every proposed member could be in sync) and writes one PartitionChangeRecord
//! per partition whose state changes; replaying it bumps the partition epoch, which the answer
//! reports so the leader can send its next change against it.
//!
//! Every partition is checked against the image as it was before the request (Kafka replays a
//! request's records only once it has generated all of them), so a partition named twice is
//! judged twice on the same state.
//!
//! The change itself is built by `partition_change` (Kafka's `PartitionChangeBuilder`).

use kactor_protocol::errors::*;
use kactor_protocol::Uuid;

use super::errors::*;
use super::partition_change::{Targets, RECOVERED, RECOVERING};
use super::requests::{
    AlterPartition, AlterPartitionPartition, AlterPartitionPartitionReply, AlterPartitionReply,
    AlterPartitionTopicReply,
};
use super::{ControllerResult, QuorumControllerCore};
use crate::metadata::core::image::{merge_partition_change, NO_LEADER_CHANGE};
use crate::metadata::core::{MetadataRecord, PartitionRegistration, TopicImage};

/// Why a partition's change is not made.
enum Refusal {
    /// The partition's error code.
    Code(i16),
    /// A leader recovery state Kafka cannot parse: its controller throws, failing the whole
    /// request with UNKNOWN_SERVER_ERROR (and, in Kafka, a controller failover, which kactor
    /// does not copy: a malformed request should not move the quorum).
    Abort(String),
}

impl QuorumControllerCore {
    /// AlterPartition: checks each partition in request order and writes the changes of those
    /// that pass. A sender that is not registered at `broker_epoch` fails the whole request
    /// (STALE_BROKER_EPOCH), as does an unparsable leader recovery state (UNKNOWN_SERVER_ERROR).
    pub fn alter_partition(
        &mut self,
        req: &AlterPartition,
    ) -> ControllerResult<AlterPartitionReply> {
        // Kafka answers an empty request at once, before it is queued as a controller write.
        if req.topics.is_empty() {
            return ControllerResult::of(Vec::new(), AlterPartitionReply::failed(ApiError::NONE));
        }
        if let Some(r) =
            self.not_controller(AlterPartitionReply::failed(ApiError::code(NOT_CONTROLLER)))
        {
            return r;
        }
        let stale = match self.image.brokers.get(&req.broker_id) {
            None => Some(format!(
                "No broker registration found for broker id {}",
                req.broker_id
            )),
            Some(b) if b.epoch != req.broker_epoch => Some(format!(
                "Expected broker epoch {}, but got broker epoch {}",
                b.epoch, req.broker_epoch
            )),
            Some(_) => None,
        };
        if let Some(message) = stale {
            return ControllerResult::of(
                Vec::new(),
                AlterPartitionReply::failed(ApiError::new(STALE_BROKER_EPOCH, message)),
            );
        }
        let mut records = Vec::new();
        let mut topics = Vec::new();
        for t in &req.topics {
            let topic = Some(t.topic_id)
                .filter(|id| *id != Uuid::ZERO)
                .and_then(|id| self.image.topics.get(&id));
            let partitions = match topic {
                None => t
                    .partitions
                    .iter()
                    .map(|p| refused(p.partition_index, UNKNOWN_TOPIC_ID))
                    .collect(),
                Some(topic) => {
                    let mut rows = Vec::with_capacity(t.partitions.len());
                    for p in &t.partitions {
                        let current = match self.check_alter_partition(req.broker_id, topic, p) {
                            Ok(current) => current,
                            Err(Refusal::Code(code)) => {
                                rows.push(refused(p.partition_index, code));
                                continue;
                            }
                            Err(Refusal::Abort(message)) => {
                                return ControllerResult::of(
                                    Vec::new(),
                                    AlterPartitionReply::failed(ApiError::new(
                                        UNKNOWN_SERVER_ERROR,
                                        message,
                                    )),
                                );
                            }
                        };
                        let isr: Vec<i32> = p.new_isr.iter().map(|m| m.broker_id).collect();
                        let mut after = current.clone();
                        // Kafka's builder with a target ISR and recovery state: the ISR was
                        // checked to hold the leader and only usable replicas, so leadership
                        // moves only when the ISR completes a reassignment removing the leader.
                        let targets = Targets {
                            isr,
                            leader_recovery_state: p.leader_recovery_state,
                            ..Targets::of(current)
                        };
                        if let Some(change) = self.build_partition_change(
                            topic.id,
                            p.partition_index,
                            current,
                            targets,
                        ) {
                            merge_partition_change(&mut after, &change);
                            let moved =
                                change.leader != NO_LEADER_CHANGE && change.leader != req.broker_id;
                            records.push(MetadataRecord::PartitionChange(change));
                            if moved {
                                // Only completing a reassignment can move leadership here: the
                                // change is written, and the old leader told to refetch
                                // metadata before it tries again.
                                rows.push(refused(p.partition_index, NEW_LEADER_ELECTED));
                                continue;
                            }
                        }
                        rows.push(AlterPartitionPartitionReply {
                            partition_index: p.partition_index,
                            error_code: NONE,
                            leader_id: after.leader,
                            leader_epoch: after.leader_epoch,
                            isr: after.isr,
                            leader_recovery_state: after.leader_recovery_state,
                            partition_epoch: after.partition_epoch,
                        });
                    }
                    rows
                }
            };
            topics.push(AlterPartitionTopicReply {
                topic_id: t.topic_id,
                partitions,
            });
        }
        self.finish(
            records,
            AlterPartitionReply {
                error: ApiError::NONE,
                topics,
            },
        )
    }

    /// Kafka's `validateAlterPartitionData`, in its order: the partition's registration if the
    /// proposal may be applied to it.
    fn check_alter_partition<'t>(
        &self,
        sender: i32,
        topic: &'t TopicImage,
        p: &AlterPartitionPartition,
    ) -> Result<&'t PartitionRegistration, Refusal> {
        let Some(current) = topic.partitions.get(&p.partition_index) else {
            return Err(Refusal::Code(UNKNOWN_TOPIC_OR_PARTITION));
        };
        // Epochs ahead of this controller's: it has probably lost leadership without knowing
        // yet, so the leader should look for the new controller.
        if p.leader_epoch > current.leader_epoch || p.partition_epoch > current.partition_epoch {
            return Err(Refusal::Code(NOT_CONTROLLER));
        }
        if p.leader_epoch < current.leader_epoch {
            return Err(Refusal::Code(FENCED_LEADER_EPOCH));
        }
        if sender != current.leader {
            return Err(Refusal::Code(INVALID_REQUEST));
        }
        if p.partition_epoch < current.partition_epoch {
            return Err(Refusal::Code(INVALID_UPDATE_VERSION));
        }
        let isr: Vec<i32> = p.new_isr.iter().map(|m| m.broker_id).collect();
        if !valid_isr(&current.replicas, &isr) || !isr.contains(&current.leader) {
            return Err(Refusal::Code(INVALID_REQUEST));
        }
        match p.leader_recovery_state {
            RECOVERED => {}
            RECOVERING if isr.len() > 1 => return Err(Refusal::Code(INVALID_REQUEST)),
            RECOVERING if current.leader_recovery_state == RECOVERED => {
                return Err(Refusal::Code(INVALID_REQUEST))
            }
            RECOVERING => {}
            other => {
                return Err(Refusal::Abort(format!(
                    "Value {other} is not a valid leader recovery state"
                )))
            }
        }
        let ineligible = p
            .new_isr
            .iter()
            .any(|m| match self.image.brokers.get(&m.broker_id) {
                None => true,
                Some(b) => {
                    b.in_controlled_shutdown
                        || b.fenced
                        || (m.broker_epoch != -1 && m.broker_epoch != b.epoch)
                }
            });
        if ineligible {
            return Err(Refusal::Code(INELIGIBLE_REPLICA));
        }
        Ok(current)
    }
}

fn refused(partition_index: i32, error_code: i16) -> AlterPartitionPartitionReply {
    AlterPartitionPartitionReply {
        partition_index,
        error_code,
        ..Default::default()
    }
}

/// Kafka's `Replicas.validateIsr`: no negative ids, no duplicates, only replicas. (An empty ISR
/// passes here and is refused because it lacks the leader.)
fn valid_isr(replicas: &[i32], isr: &[i32]) -> bool {
    let mut seen = Vec::with_capacity(isr.len());
    for b in isr {
        if *b < 0 || seen.contains(b) || !replicas.contains(b) {
            return false;
        }
        seen.push(*b);
    }
    true
}
