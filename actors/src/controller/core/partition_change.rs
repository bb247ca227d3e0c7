//! The one place partition changes are built from a partition's registration and the state
//! asked for (Kafka's `PartitionChangeBuilder.build` with eligible.leader.replicas.version 0,
//! with `PartitionReassignmentReplicas.maybeCompleteReassignment` folded in). AlterPartition
//! (a new ISR), AlterPartitionReassignments (new replicas, or a reverted ones) go through it, so
//! a reassignment completes, and leadership leaves a removed replica, by the same rules
//! whichever request brings the ISR that allows it.
//!
//! ELR (KIP-966) is not maintained by this controller (see `SUPPORTED_FEATURES`): a leftover ELR
//! is cleared and the last known ELR is left alone, as Kafka's builder does with ELR off.

use kactor_protocol::metadata::PartitionChangeRecord;
use kactor_protocol::Uuid;

use super::QuorumControllerCore;
use crate::metadata::core::image::NO_LEADER_CHANGE;
use crate::metadata::core::PartitionRegistration;

/// Kafka's `LeaderRecoveryState` values.
pub(super) const RECOVERED: i8 = 0;
pub(super) const RECOVERING: i8 = 1;
/// `PartitionChangeRecord.leaderRecoveryState` when it does not change.
const NO_RECOVERY_STATE_CHANGE: i8 = -1;
/// Kafka's `DirectoryId.MIGRATING`: the directory of a replica whose partition record predates
/// directory assignment.
const MIGRATING_DIRECTORY: Uuid = Uuid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
/// metadata.version 3.6-IV0: from here an ISR shrink no longer bumps the leader epoch (before
/// it, brokers needed the bump, KAFKA-15021).
const MV_NO_EPOCH_BUMP_ON_SHRINK: i16 = 12;
/// metadata.version 3.7-IV2: partition changes carry replica directories.
const MV_DIRECTORY_ASSIGNMENT: i16 = 17;

/// The state a change aims at; starts as the partition's own ([`Targets::of`]).
#[derive(Debug, Clone)]
pub(super) struct Targets {
    pub isr: Vec<i32>,
    pub replicas: Vec<i32>,
    pub removing: Vec<i32>,
    pub adding: Vec<i32>,
    pub leader_recovery_state: i8,
    /// Kafka's `Election.UNCLEAN`: when no in-sync replica can lead, any live replica may
    /// (per the topic's `unclean.leader.election.enable`).
    pub unclean: bool,
}

impl Targets {
    pub fn of(p: &PartitionRegistration) -> Self {
        Targets {
            isr: p.isr.clone(),
            replicas: p.replicas.clone(),
            removing: p.removing_replicas.clone(),
            adding: p.adding_replicas.clone(),
            leader_recovery_state: p.leader_recovery_state,
            unclean: false,
        }
    }

    /// Kafka 4.4's `maybeCompleteReassignment`: the removed replicas leave the replica set and
    /// the ISR once every replica being added is in the target ISR (and, when more are removed
    /// than added, every replica that stays), and at least one in-sync replica stays. A replica
    /// that stays but fell out of sync does not hold up a reassignment that adds as many
    /// replicas as it removes.
    fn complete_reassignment_if_possible(&mut self) {
        if self.removing.is_empty() && self.adding.is_empty() {
            return;
        }
        let keep = |v: &[i32]| -> Vec<i32> {
            v.iter()
                .copied()
                .filter(|b| !self.removing.contains(b))
                .collect()
        };
        let (isr, replicas) = (keep(&self.isr), keep(&self.replicas));
        if isr.is_empty() || replicas.is_empty() {
            return;
        }
        if !self.adding.iter().all(|r| isr.contains(r)) {
            return;
        }
        if self.adding.len() < self.removing.len() && !replicas.iter().all(|r| isr.contains(r)) {
            return;
        }
        self.isr = isr;
        self.replicas = replicas;
        self.removing.clear();
        self.adding.clear();
    }
}

impl QuorumControllerCore {
    /// The record that takes partition `index` of topic `topic_id` from `p` to `targets`, or
    /// None when nothing would change.
    pub(super) fn build_partition_change(
        &self,
        topic_id: Uuid,
        index: i32,
        p: &PartitionRegistration,
        mut targets: Targets,
    ) -> Option<PartitionChangeRecord> {
        let mv = self.image.metadata_version().unwrap_or(0);
        let mut record = PartitionChangeRecord {
            topic_id,
            partition_id: index,
            ..Default::default()
        };
        targets.complete_reassignment_if_possible();
        // Leadership stays where it can (in the target ISR, on a usable broker), else goes to the
        // first such replica in target order; failing that, with an unclean election allowed,
        // to the first usable replica, which becomes the whole ISR and recovers its log.
        let can_lead = |b: i32| targets.isr.contains(&b) && self.is_usable(b);
        let (leader, unclean) = if can_lead(p.leader) {
            (p.leader, false)
        } else if let Some(b) = targets.replicas.iter().copied().find(|b| can_lead(*b)) {
            (b, false)
        } else if let Some(b) = targets
            .replicas
            .iter()
            .copied()
            .find(|b| targets.unclean && self.is_usable(*b))
        {
            (b, true)
        } else {
            (-1, false)
        };
        if leader != p.leader {
            record.leader = leader;
            if unclean {
                record.isr = Some(vec![leader]);
                if p.leader_recovery_state != RECOVERING {
                    record.leader_recovery_state = RECOVERING;
                }
            }
        }
        // Dropping a replica bumps the leader epoch, so that the removed one's fetches fail.
        if record.leader == NO_LEADER_CHANGE
            && !p.replicas.iter().all(|r| targets.replicas.contains(r))
        {
            record.leader = p.leader;
        }
        if !p.elr.is_empty() {
            record.eligible_leader_replicas = Some(Vec::new());
        }
        if record.isr.is_none() && !targets.isr.is_empty() && targets.isr != p.isr {
            record.isr = Some(targets.isr.clone());
        }
        if mv < MV_NO_EPOCH_BUMP_ON_SHRINK && record.leader == NO_LEADER_CHANGE {
            if let Some(new_isr) = &record.isr {
                if !p.isr.iter().all(|b| new_isr.contains(b)) {
                    record.leader = p.leader;
                }
            }
        }
        if !targets.replicas.is_empty() {
            if mv >= MV_DIRECTORY_ASSIGNMENT {
                let current: Vec<Uuid> = if p.directories.len() == p.replicas.len() {
                    p.directories.clone()
                } else {
                    vec![MIGRATING_DIRECTORY; p.replicas.len()]
                };
                // A replica keeps its directory; a new one goes where its broker puts it.
                let target: Vec<Uuid> = targets
                    .replicas
                    .iter()
                    .map(|r| {
                        p.replicas
                            .iter()
                            .position(|x| x == r)
                            .map(|i| current[i])
                            .unwrap_or_else(|| self.directories_for(&[*r])[0])
                    })
                    .collect();
                if target != current {
                    record.directories = Some(target);
                }
            }
            if targets.replicas != p.replicas {
                record.replicas = Some(targets.replicas);
            }
        }
        if targets.removing != p.removing_replicas {
            record.removing_replicas = Some(targets.removing);
        }
        if targets.adding != p.adding_replicas {
            record.adding_replicas = Some(targets.adding);
        }
        if targets.leader_recovery_state != p.leader_recovery_state {
            record.leader_recovery_state = targets.leader_recovery_state;
        }
        let no_op = record.isr.is_none()
            && record.eligible_leader_replicas.is_none()
            && record.last_known_elr.is_none()
            && record.leader == NO_LEADER_CHANGE
            && record.replicas.is_none()
            && record.removing_replicas.is_none()
            && record.adding_replicas.is_none()
            && record.leader_recovery_state == NO_RECOVERY_STATE_CHANGE
            && record.directories.is_none();
        (!no_op).then_some(record)
    }
}
