//! Partition reassignment (`kafka-reassign-partitions`, AlterPartitionReassignments; Kafka's
//! `ReplicationControlManager.alterPartitionReassignments` with `PartitionReassignmentReplicas`
//! and `PartitionReassignmentRevert`).
//!
//! A reassignment runs in two changes. The first (written here) makes the replica set the
//! target followed by the replicas being removed, and records which replicas are being added and
//! removed; brokers added start following the leader. The second is written when the ISR holds
//! every target replica, by whichever request brings that ISR: usually the leader's
//! AlterPartition once the new replicas caught up, or this request at once when the target is
//! already in sync (a reordering, or a shrink). It drops the removed replicas from the replicas
//! and the ISR, and moves leadership off a removed leader (`partition_change`).
//!
//! Cancelling (null replicas) reverts to the replicas before the reassignment: the added ones
//! leave the replicas and the ISR, the removed ones stay.
//!
//! Every partition is judged against the image as it was before the request (Kafka replays a
//! request's records only once it has generated all of them); the request's changes are then
//! written together.

use std::collections::BTreeSet;

use kactor_protocol::errors::*;
use kactor_protocol::metadata::PartitionChangeRecord;
use kactor_protocol::Uuid;

use super::errors::*;
use super::partition_change::Targets;
use super::requests::{ReassignableTopic, ReassignableTopicResult};
use super::topic_configs;
use super::{ControllerResult, QuorumControllerCore};
use crate::metadata::core::{ConfigResource, MetadataRecord, PartitionRegistration};

impl QuorumControllerCore {
    /// AlterPartitionReassignments: each partition in request order, each answered on its own.
    /// `allow_replication_factor_change` false (v1, KIP-860) refuses targets whose size differs
    /// from the partition's replication factor (the target's, if a reassignment is under way).
    pub fn alter_partition_reassignments(
        &mut self,
        topics: &[ReassignableTopic],
        allow_replication_factor_change: bool,
    ) -> ControllerResult<Vec<ReassignableTopicResult>> {
        if let Some(r) = self.not_controller(Vec::new()) {
            return r;
        }
        let mut records = Vec::new();
        let mut results = Vec::with_capacity(topics.len());
        for t in topics {
            let partitions = t
                .partitions
                .iter()
                .map(|(index, target)| {
                    let outcome = self.reassign_one(
                        &t.name,
                        *index,
                        target.as_deref(),
                        allow_replication_factor_change,
                    );
                    let error = match outcome {
                        Ok(change) => {
                            records.extend(change.map(MetadataRecord::PartitionChange));
                            ApiError::NONE
                        }
                        Err(e) => e,
                    };
                    (*index, error)
                })
                .collect();
            results.push(ReassignableTopicResult {
                name: t.name.clone(),
                partitions,
            });
        }
        self.finish(records, results)
    }

    /// One partition's change (None: nothing to write), or why it is refused.
    fn reassign_one(
        &self,
        topic: &str,
        index: i32,
        target: Option<&[i32]>,
        allow_replication_factor_change: bool,
    ) -> Result<Option<PartitionChangeRecord>, ApiError> {
        let Some(t) = self.image.topics.get_by_name(topic) else {
            return Err(ApiError::new(
                UNKNOWN_TOPIC_OR_PARTITION,
                format!("Unable to find a topic named {topic}."),
            ));
        };
        let Some(p) = t.partitions.get(&index) else {
            return Err(ApiError::new(
                UNKNOWN_TOPIC_OR_PARTITION,
                format!("Unable to find partition {topic}:{index}."),
            ));
        };
        match target {
            None => self.cancel_reassignment(topic, t.id, index, p),
            Some(target) => {
                self.change_reassignment(t.id, index, p, target, allow_replication_factor_change)
            }
        }
    }

    /// Kafka's `cancelPartitionReassignment`: back to the replicas before the reassignment.
    fn cancel_reassignment(
        &self,
        topic: &str,
        topic_id: Uuid,
        index: i32,
        p: &PartitionRegistration,
    ) -> Result<Option<PartitionChangeRecord>, ApiError> {
        if p.adding_replicas.is_empty() && p.removing_replicas.is_empty() {
            // No message: Kafka's is the code's own text, which `ApiError` leaves out.
            return Err(ApiError::code(NO_REASSIGNMENT_IN_PROGRESS));
        }
        let not_added = |v: &[i32]| -> Vec<i32> {
            v.iter()
                .copied()
                .filter(|b| !p.adding_replicas.contains(b))
                .collect()
        };
        let replicas = not_added(&p.replicas);
        let mut isr = not_added(&p.isr);
        let unclean_election = self.unclean_election_enabled(topic);
        if isr.is_empty() {
            // Only added replicas were in sync: the first original replica is the one left to
            // lead, which is an unclean election.
            let Some(&first) = replicas.first() else {
                return Err(ApiError::new(
                    INVALID_REPLICA_ASSIGNMENT,
                    "Invalid replica assignment: addingReplicas contains all replicas.",
                ));
            };
            if !unclean_election {
                return Err(ApiError::new(
                    INVALID_REPLICA_ASSIGNMENT,
                    format!("Unable to revert partition assignment for {topic}:{index} because it would require an unclean leader election."),
                ));
            }
            isr.push(first);
        }
        let targets = Targets {
            isr,
            replicas,
            removing: Vec::new(),
            adding: Vec::new(),
            unclean: unclean_election,
            ..Targets::of(p)
        };
        Ok(self.build_partition_change(topic_id, index, p, targets))
    }

    /// Kafka's `changePartitionReassignment`: the target first, then the replicas it removes.
    fn change_reassignment(
        &self,
        topic_id: Uuid,
        index: i32,
        p: &PartitionRegistration,
        target: &[i32],
        allow_replication_factor_change: bool,
    ) -> Result<Option<PartitionChangeRecord>, ApiError> {
        self.check_reassignment_target(target)?;
        if !allow_replication_factor_change {
            // Under way, the replication factor is the target's: the replicas not being removed.
            let current: BTreeSet<i32> = p
                .replicas
                .iter()
                .copied()
                .filter(|b| !p.removing_replicas.contains(b))
                .collect();
            if current.len() != target.len() {
                return Err(ApiError::new(
                    INVALID_REPLICATION_FACTOR,
                    format!(
                        "The replication factor is changed from {} to {}",
                        current.len(),
                        target.len()
                    ),
                ));
            }
        }
        // Both in broker id order, as Kafka computes them (sorted set differences).
        let removing: Vec<i32> = p
            .replicas
            .iter()
            .copied()
            .filter(|b| !target.contains(b))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let adding: Vec<i32> = target
            .iter()
            .copied()
            .filter(|b| !p.replicas.contains(b))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let replicas: Vec<i32> = target.iter().chain(&removing).copied().collect();
        // Lists that come out empty leave a reassignment already under way as it was, as in
        // Kafka (which only sets the non-empty ones on its builder).
        let mut targets = Targets::of(p);
        targets.replicas = replicas;
        if !removing.is_empty() {
            targets.removing = removing;
        }
        if !adding.is_empty() {
            targets.adding = adding;
        }
        Ok(self.build_partition_change(topic_id, index, p, targets))
    }

    /// Kafka's `validateManualPartitionAssignment` without a replication factor to match: the
    /// ids are checked in ascending order, so the lowest offending id is the one named.
    fn check_reassignment_target(&self, target: &[i32]) -> Result<(), ApiError> {
        let invalid = |m: String| Err(ApiError::new(INVALID_REPLICA_ASSIGNMENT, m));
        if target.is_empty() {
            return invalid(
                "The manual partition assignment includes an empty replica list.".to_string(),
            );
        }
        let mut sorted = target.to_vec();
        sorted.sort_unstable();
        let mut previous = None;
        for id in sorted {
            if !self.image.brokers.contains_key(&id) {
                return invalid(format!("The manual partition assignment includes broker {id}, but no such broker is registered."));
            }
            if previous == Some(id) {
                return invalid(format!(
                    "The manual partition assignment includes the broker {id} more than once."
                ));
            }
            previous = Some(id);
        }
        Ok(())
    }

    /// The topic's `unclean.leader.election.enable`, resolved as a broker would (topic
    /// override, this node's dynamic value, the cluster default, the static config).
    pub(super) fn unclean_election_enabled(&self, topic: &str) -> bool {
        let Some(def) = topic_configs::topic_config("unclean.leader.election.enable") else {
            return false;
        };
        let overrides = self.image.config_overrides(&ConfigResource::topic(topic));
        let dyn_broker = self
            .image
            .config_overrides(&ConfigResource::broker(&self.cfg.node_id.to_string()));
        let dyn_default = self.image.config_overrides(&ConfigResource::broker(""));
        let layers = self.config_layers_for(&overrides, &dyn_broker, &dyn_default);
        topic_configs::resolve(def, layers)
            .value
            .trim()
            .eq_ignore_ascii_case("true")
    }
}
