//! The replica's role in its current epoch (Kafka's `EpochState` implementations) and what the
//! `quorum-state` file records for each (`EpochState.election()`).

use super::election::EpochElection;
use super::leader::LeaderState;
use super::types::{ElectionState, Endpoints, OffsetAndEpoch, ReplicaKey};

/// A snapshot being downloaded from the leader (Kafka's `FollowerState.fetchingSnapshot`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotDownload {
    pub id: OffsetAndEpoch,
    /// Bytes written so far (the next FetchSnapshot position).
    pub written: u64,
}

#[derive(Debug, Clone)]
pub enum EpochState {
    /// Knows the epoch; maybe the leader (without its endpoints) and maybe a vote granted.
    Unattached {
        epoch: i32,
        leader_id: Option<i32>,
        voted_key: Option<ReplicaKey>,
        election_deadline: i64,
        high_watermark: Option<i64>,
    },
    /// KIP-996: asking for pre-votes in the current epoch before becoming a candidate.
    Prospective {
        epoch: i32,
        leader_id: Option<i32>,
        leader_endpoints: Endpoints,
        voted_key: Option<ReplicaKey>,
        election: EpochElection,
        election_deadline: i64,
        high_watermark: Option<i64>,
    },
    /// Asking for votes in a new epoch, having voted for itself.
    Candidate {
        epoch: i32,
        election: EpochElection,
        election_deadline: i64,
        high_watermark: Option<i64>,
    },
    Leader(Box<LeaderState>),
    /// Fetching from the leader.
    Follower {
        epoch: i32,
        leader_id: i32,
        leader_endpoints: Endpoints,
        voted_key: Option<ReplicaKey>,
        fetch_deadline: i64,
        has_fetched_from_leader: bool,
        high_watermark: Option<i64>,
        fetching_snapshot: Option<SnapshotDownload>,
    },
    /// A leader that stepped down (or restarted) in its epoch: tells the voters with
    /// EndQuorumEpoch and waits for the next election.
    Resigned {
        epoch: i32,
        unacked_voters: Vec<i32>,
        preferred_successors: Vec<ReplicaKey>,
        election_deadline: i64,
    },
}

impl EpochState {
    pub fn epoch(&self) -> i32 {
        match self {
            EpochState::Unattached { epoch, .. }
            | EpochState::Prospective { epoch, .. }
            | EpochState::Candidate { epoch, .. }
            | EpochState::Follower { epoch, .. }
            | EpochState::Resigned { epoch, .. } => *epoch,
            EpochState::Leader(l) => l.epoch,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            EpochState::Unattached { .. } => "Unattached",
            EpochState::Prospective { .. } => "Prospective",
            EpochState::Candidate { .. } => "Candidate",
            EpochState::Leader(_) => "Leader",
            EpochState::Follower { .. } => "Follower",
            EpochState::Resigned { .. } => "Resigned",
        }
    }

    /// The leader this state knows of (ourselves when leading or resigned).
    pub fn leader_id(&self, local_id: Option<i32>) -> Option<i32> {
        match self {
            EpochState::Unattached { leader_id, .. }
            | EpochState::Prospective { leader_id, .. } => *leader_id,
            EpochState::Follower { leader_id, .. } => Some(*leader_id),
            EpochState::Leader(l) => Some(l.local.id),
            EpochState::Resigned { .. } => local_id,
            EpochState::Candidate { .. } => None,
        }
    }

    pub fn voted_key(&self, local: Option<ReplicaKey>) -> Option<ReplicaKey> {
        match self {
            EpochState::Unattached { voted_key, .. }
            | EpochState::Prospective { voted_key, .. }
            | EpochState::Follower { voted_key, .. } => *voted_key,
            EpochState::Candidate { .. } => local,
            EpochState::Leader(_) | EpochState::Resigned { .. } => None,
        }
    }

    pub fn high_watermark(&self) -> Option<i64> {
        match self {
            EpochState::Unattached { high_watermark, .. }
            | EpochState::Prospective { high_watermark, .. }
            | EpochState::Candidate { high_watermark, .. }
            | EpochState::Follower { high_watermark, .. } => *high_watermark,
            EpochState::Leader(l) => l.high_watermark,
            // Kafka's ResignedState has no high watermark.
            EpochState::Resigned { .. } => None,
        }
    }

    /// What the quorum-state file records for this state.
    pub fn election(&self, local: Option<ReplicaKey>, voters: Vec<i32>) -> ElectionState {
        let local_id = local.map(|k| k.id);
        match self {
            // A candidate records its own vote; leaders and resigned leaders record no vote.
            EpochState::Candidate { epoch, .. } => ElectionState {
                epoch: *epoch,
                leader_id: None,
                voted_key: local,
                voters,
            },
            _ => ElectionState {
                epoch: self.epoch(),
                leader_id: self.leader_id(local_id),
                voted_key: self.voted_key(local),
                voters,
            },
        }
    }

    /// Whether this state may grant a (pre-)vote (each Kafka state's `canGrantVote`).
    pub fn can_grant_vote(
        &self,
        candidate: ReplicaKey,
        log_up_to_date: bool,
        pre_vote: bool,
    ) -> bool {
        match self {
            EpochState::Unattached {
                leader_id,
                voted_key,
                ..
            }
            | EpochState::Prospective {
                leader_id,
                voted_key,
                ..
            } => unattached_or_prospective_can_grant(
                *leader_id,
                *voted_key,
                candidate,
                log_up_to_date,
                pre_vote,
            ),
            EpochState::Candidate { .. } | EpochState::Resigned { .. } => {
                pre_vote && log_up_to_date
            }
            EpochState::Follower {
                has_fetched_from_leader,
                ..
            } => pre_vote && !has_fetched_from_leader && log_up_to_date,
            EpochState::Leader(_) => false,
        }
    }
}

/// Kafka's `QuorumState.unattachedOrProspectiveCanGrantVote`.
fn unattached_or_prospective_can_grant(
    leader_id: Option<i32>,
    voted_key: Option<ReplicaKey>,
    candidate: ReplicaKey,
    log_up_to_date: bool,
    pre_vote: bool,
) -> bool {
    if pre_vote {
        return log_up_to_date;
    }
    if let Some(voted) = voted_key {
        return voted.id == candidate.id
            && (voted.directory_id.is_none() || voted.directory_id == candidate.directory_id);
    }
    if leader_id.is_some() {
        return false;
    }
    log_up_to_date
}
