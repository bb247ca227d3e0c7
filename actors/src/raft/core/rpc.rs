//! The Raft RPCs as the core sees them: the fields of Kafka's Vote, BeginQuorumEpoch,
//! EndQuorumEpoch, Fetch, FetchSnapshot, DescribeQuorum, AddRaftVoter, RemoveRaftVoter and
//! UpdateRaftVoter messages (schemas/messages/) that Raft reads or fills, for the one partition
//! `__cluster_metadata-0`. The shell maps them to and from the wire; it checks the topic and
//! partition itself (a mismatch is a top-level INVALID_REQUEST, as Kafka answers) and fills the
//! record bytes the core points at ([`Records::Read`], [`SnapshotBytes::Read`]).

use bytes::Bytes;

use super::types::{Endpoints, OffsetAndEpoch, ReplicaKey, VoterSet};

/// A control record in `__cluster_metadata` (Kafka's `ControlRecordType` with its message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlRecord {
    /// LeaderChangeMessage: written by every new leader at the start of its epoch.
    LeaderChange {
        leader_id: i32,
        voters: Vec<i32>,
        granting_voters: Vec<i32>,
    },
    /// VotersRecord (KIP-853): the voter set from this offset on.
    Voters(VoterSet),
    /// KRaftVersionRecord (KIP-853): the kraft.version from this offset on.
    KRaftVersion(i16),
}

/// A batch as the follower appends it: its offsets and epoch, the control records it holds
/// (the core tracks voter sets from them), and the bytes the shell writes (opaque to the core).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    pub epoch: i32,
    pub control: Vec<ControlRecord>,
    pub is_control: bool,
    pub bytes: Bytes,
}

/// Records in a Fetch response: what the leader's shell must read (`Read`, from the core) or
/// what the follower's shell decoded (`Batches`, to the core).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Records {
    None,
    /// Read the log from `from_offset`, at most `max_bytes` (whole batches; at least one batch
    /// even if larger, as Kafka's log read does).
    Read {
        from_offset: i64,
        max_bytes: i32,
    },
    Batches(Vec<LogBatch>),
}

/// Snapshot bytes in a FetchSnapshot response: to read (leader) or read (follower).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotBytes {
    None,
    Read {
        id: OffsetAndEpoch,
        position: u64,
        len: u64,
    },
    Bytes(Bytes),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoteRequest {
    pub cluster_id: Option<String>,
    /// The voter the request is meant for (v1+), checked against the receiver's key.
    pub voter_key: Option<ReplicaKey>,
    pub candidate: ReplicaKey,
    pub candidate_epoch: i32,
    pub last_offset_epoch: i32,
    pub last_offset: i64,
    pub pre_vote: bool,
}

/// The partition part of Vote / BeginQuorumEpoch / EndQuorumEpoch responses, plus the
/// top-level error and the leader's endpoints (`NodeEndpoints`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumResponse {
    pub error: i16,
    pub partition_error: i16,
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub leader_endpoints: Endpoints,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoteResponse {
    pub common: QuorumResponse,
    pub vote_granted: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BeginQuorumEpochRequest {
    pub cluster_id: Option<String>,
    pub voter_key: Option<ReplicaKey>,
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub leader_endpoints: Endpoints,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndQuorumEpochRequest {
    pub cluster_id: Option<String>,
    pub leader_id: i32,
    pub leader_epoch: i32,
    /// Voters in the order the resigning leader prefers them as successors.
    pub preferred_candidates: Vec<ReplicaKey>,
    pub leader_endpoints: Endpoints,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRequest {
    pub cluster_id: Option<String>,
    pub replica: ReplicaKey,
    pub max_wait_ms: i32,
    pub max_bytes: i32,
    pub current_leader_epoch: i32,
    pub fetch_offset: i64,
    pub last_fetched_epoch: i32,
    /// The fetcher's high watermark (-1 unknown): the leader answers at once when its own is
    /// higher.
    pub high_watermark: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResponse {
    pub error: i16,
    pub partition_error: i16,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub diverging_epoch: Option<OffsetAndEpoch>,
    pub snapshot_id: Option<OffsetAndEpoch>,
    pub records: Records,
    pub leader_endpoints: Endpoints,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchSnapshotRequest {
    pub cluster_id: Option<String>,
    pub replica: ReplicaKey,
    pub max_bytes: i32,
    pub current_leader_epoch: i32,
    pub snapshot_id: OffsetAndEpoch,
    pub position: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchSnapshotResponse {
    pub error: i16,
    pub partition_error: i16,
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub snapshot_id: OffsetAndEpoch,
    pub size: i64,
    pub position: i64,
    pub bytes: SnapshotBytes,
    pub leader_endpoints: Endpoints,
}

/// One replica in DescribeQuorum (`ReplicaState`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaStateView {
    pub key: ReplicaKey,
    pub log_end_offset: i64,
    pub last_fetch_timestamp: i64,
    pub last_caught_up_timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribeQuorumResponse {
    pub error: i16,
    pub partition_error: i16,
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub high_watermark: i64,
    pub current_voters: Vec<ReplicaStateView>,
    pub observers: Vec<ReplicaStateView>,
    /// Listeners of the voters (v2 `Nodes`).
    pub nodes: Vec<(i32, Endpoints)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddRaftVoterRequest {
    pub cluster_id: Option<String>,
    pub timeout_ms: i32,
    pub voter: ReplicaKey,
    pub listeners: Endpoints,
    /// v1 `AckWhenCommitted`: answer once the VotersRecord is committed (true, the default)
    /// or once it is appended (false, what an auto-joining controller asks for).
    pub ack_when_committed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoveRaftVoterRequest {
    pub cluster_id: Option<String>,
    pub voter: ReplicaKey,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateRaftVoterRequest {
    pub cluster_id: Option<String>,
    pub current_leader_epoch: i32,
    pub voter: ReplicaKey,
    pub listeners: Endpoints,
    pub kraft_version: super::types::KRaftVersionRange,
}

/// AddRaftVoter / RemoveRaftVoter response: an error and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoterChangeResponse {
    pub error: i16,
    pub error_message: Option<String>,
}

/// UpdateRaftVoter response: the error and the current leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateVoterResponse {
    pub error: i16,
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub leader_endpoints: Endpoints,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Vote(VoteRequest),
    BeginQuorumEpoch(BeginQuorumEpochRequest),
    EndQuorumEpoch(EndQuorumEpochRequest),
    Fetch(FetchRequest),
    FetchSnapshot(FetchSnapshotRequest),
    DescribeQuorum,
    AddRaftVoter(AddRaftVoterRequest),
    RemoveRaftVoter(RemoveRaftVoterRequest),
    UpdateRaftVoter(UpdateRaftVoterRequest),
    /// Sent by a leader to a voter being added, at one of `listeners` (KIP-853: the leader
    /// learns the new voter's supported kraft.version from its ApiVersions response).
    ApiVersions {
        listeners: Endpoints,
    },
}

impl Request {
    pub fn name(&self) -> &'static str {
        match self {
            Request::Vote(_) => "Vote",
            Request::BeginQuorumEpoch(_) => "BeginQuorumEpoch",
            Request::EndQuorumEpoch(_) => "EndQuorumEpoch",
            Request::Fetch(_) => "Fetch",
            Request::FetchSnapshot(_) => "FetchSnapshot",
            Request::DescribeQuorum => "DescribeQuorum",
            Request::AddRaftVoter(_) => "AddRaftVoter",
            Request::RemoveRaftVoter(_) => "RemoveRaftVoter",
            Request::UpdateRaftVoter(_) => "UpdateRaftVoter",
            Request::ApiVersions { .. } => "ApiVersions",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Vote(VoteResponse),
    BeginQuorumEpoch(QuorumResponse),
    EndQuorumEpoch(QuorumResponse),
    Fetch(FetchResponse),
    FetchSnapshot(FetchSnapshotResponse),
    DescribeQuorum(DescribeQuorumResponse),
    AddRaftVoter(VoterChangeResponse),
    RemoveRaftVoter(VoterChangeResponse),
    UpdateRaftVoter(UpdateVoterResponse),
    /// The `kraft.version` supported-feature range from an ApiVersions response.
    ApiVersions {
        error: i16,
        kraft_version: Option<super::types::KRaftVersionRange>,
    },
}
