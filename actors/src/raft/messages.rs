//! RaftActor's mailbox (Kafka's `RaftClient` interface: `scheduleAtomicAppend`, `register`,
//! `Listener.handleCommit` / `handleLeaderChange`, and the DescribeQuorum view).

use std::sync::Arc;

use actix::prelude::*;

use crate::runtime::MeteredRecipient;
use bytes::Bytes;
use kactor_protocol::Uuid;

use super::batch::MetadataBatch;
use super::core::Endpoints;

/// Sent by the QuorumControllerActor: append these framed metadata record values as one atomic
/// batch, in `epoch` (the leadership the controller activated in; refused in any other). Lost,
/// the controller's pending requests never complete (clients time out and retry).
#[derive(Debug, Message)]
#[rtype(result = "Result<AppendedBatch, RaftError>")]
pub struct AppendMetadataRecords {
    pub records: Vec<Bytes>,
    pub epoch: i32,
}

/// Sent by the QuorumControllerActor when an UpdateFeatures raises kraft.version (Kafka's
/// `RaftClient.upgradeKRaftVersion`): the leader appends a KRaftVersionRecord and the
/// VotersRecord as one control batch. `None`: nothing appended (already at that version, or
/// validate only). Lost, the controller's pending requests never complete (clients time out
/// and retry).
#[derive(Debug, Message)]
#[rtype(result = "Result<Option<AppendedBatch>, RaftError>")]
pub struct UpgradeKRaftVersion {
    pub kraft_version: i16,
    pub validate_only: bool,
    /// The epoch the controller activated in (refused in any other, as appends are).
    pub epoch: i32,
}

/// Where an appended batch went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendedBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    pub epoch: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RaftError {
    #[error("not the leader (leader {leader_id:?}, epoch {epoch})")]
    NotLeader { leader_id: Option<i32>, epoch: i32 },
    #[error("metadata log storage failed: {0}")]
    Storage(String),
    /// A kraft.version upgrade refused, with Kafka's message.
    #[error("{0}")]
    InvalidUpdateVersion(String),
}

/// Sent by RaftActor to each listener: committed batches, in offset order, with nothing skipped
/// since the previous one (Kafka's `handleCommit`). Lost, the listener's image would silently
/// fall behind; actix only drops it if the listener has stopped.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct MetadataBatchesCommitted {
    /// A snapshot to load before the batches (Kafka's `handleLoadSnapshot`): sent when the
    /// listener starts from the beginning and a snapshot exists, or when it is behind the log
    /// start. The listener replaces its state with the snapshot's unless it is already past
    /// the snapshot's end.
    pub snapshot: Option<Arc<LoadedSnapshot>>,
    pub batches: Arc<Vec<MetadataBatch>>,
    pub high_watermark: i64,
}

/// A metadata snapshot read back from its `.checkpoint` file.
#[derive(Debug)]
pub struct LoadedSnapshot {
    /// End offset (exclusive) and epoch: the state after the record at `offset - 1`.
    pub id: crate::raft::core::OffsetAndEpoch,
    /// Metadata record values, in order.
    pub values: Vec<bytes::Bytes>,
    /// The kraft.version in effect at the snapshot's end, if its header batch names one.
    pub kraft_version: Option<i16>,
}

/// Sent by RaftActor to each listener when leadership changes (Kafka's `handleLeaderChange`).
/// When this node became leader, `next_offset` is where the first data record will go, and the
/// listener has already received every committed batch before it. Lost, a new leader's
/// controller would never activate.
#[derive(Debug, Clone, PartialEq, Eq, Message)]
#[rtype(result = "()")]
pub struct RaftLeaderChanged {
    pub leader_id: Option<i32>,
    pub epoch: i32,
    pub next_offset: Option<i64>,
}

/// Sent by the topology (or a listener rebuilding its state): deliver the latest snapshot, if
/// any, and every committed batch after it, then follow. Registering again under the same `name` replaces
/// the earlier registration (and restarts delivery from the log start), so a listener that
/// rebuilds never sees batches out of order. Lost, the listener never hears from Raft.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RegisterRaftListener {
    /// Identifies the listener, e.g. "QuorumControllerActor".
    pub name: &'static str,
    pub committed: MeteredRecipient<MetadataBatchesCommitted>,
    pub leader_changes: Option<MeteredRecipient<RaftLeaderChanged>>,
}

/// Sent by MetadataPublisherActor when enough metadata has been committed since its last
/// snapshot (Kafka's `SnapshotGenerator`): write the image it holds, as records, as the
/// snapshot ending after `last_offset`. Answered with the snapshot's size, None when one at or
/// past that offset exists. Lost, the next trigger writes a later one.
#[derive(Debug, Message)]
#[rtype(result = "Result<Option<u64>, RaftError>")]
pub struct CreateSnapshot {
    /// The last offset the image contains, and that record's epoch.
    pub last_offset: i64,
    pub last_epoch: i32,
    /// Append time of the last batch the image contains (the header's
    /// `LastContainedLogTimestamp`, which retention by age reads).
    pub last_contained_timestamp_ms: i64,
    /// Metadata record values, in order.
    pub values: Vec<bytes::Bytes>,
}

/// Query for DescribeQuorum (`kafka-metadata-quorum describe --status`).
#[derive(Debug, Message)]
#[rtype(result = "QuorumInfo")]
pub struct DescribeQuorumState;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumReplicaInfo {
    pub replica_id: i32,
    /// Its metadata log directory id; ZERO when unknown.
    pub directory_id: Uuid,
    pub log_end_offset: i64,
    pub last_fetch_timestamp_ms: i64,
    pub last_caught_up_timestamp_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumInfo {
    pub leader_id: Option<i32>,
    pub leader_epoch: i32,
    pub high_watermark: i64,
    pub log_end_offset: i64,
    pub voters: Vec<QuorumReplicaInfo>,
    pub observers: Vec<QuorumReplicaInfo>,
    /// Each voter's listeners, for DescribeQuorum v2's `Nodes` and DescribeCluster.
    pub nodes: Vec<(i32, Endpoints)>,
}

/// Keeps the active controller's offset predictions true while Raft appends control batches
/// of its own in the same epoch (VotersRecords of voter changes, KIP-853).
///
/// The controller applies its records before Raft places them, predicting their offsets
/// (broker epochs are those offsets). Kafka's controller learns each offset synchronously from
/// the Raft accumulator; here two actors meet through this gate instead: the controller marks
/// an append in flight while it predicts and waits, and Raft holds back the inputs that make it
/// append a voter change until none is, then leaves the batch's offsets here for the
/// controller to step over before its next prediction.
#[derive(Debug, Default)]
pub struct AppendGate {
    state: std::sync::Mutex<GateState>,
}

#[derive(Debug, Default)]
pub struct GateState {
    /// The controller is between a prediction and Raft's answer to its append.
    in_flight: bool,
    /// Offsets (base, last) of Raft's own control batches not yet seen by the controller.
    control: Vec<(i64, i64)>,
}

impl GateState {
    /// Whether a controller append is being predicted or placed.
    pub fn busy(&self) -> bool {
        self.in_flight
    }
    pub fn appended_control(&mut self, batches: impl IntoIterator<Item = (i64, i64)>) {
        self.control.extend(batches);
    }
}

impl AppendGate {
    /// The controller is about to apply records at predicted offsets: Raft's control batches
    /// since its last prediction, which it must step over.
    pub fn enter(&self) -> Vec<(i64, i64)> {
        let mut s = self.lock();
        s.in_flight = true;
        std::mem::take(&mut s.control)
    }

    /// The controller's records are placed (or it wrote none, or the append failed). Raft
    /// calls it too, once it has placed them: nothing is predicted until the controller's next
    /// `enter` (it holds its mailbox until this append is answered), so voter changes held
    /// back meanwhile can go at once rather than at the next tick.
    pub fn leave(&self) {
        self.lock().in_flight = false;
    }

    /// Raft's side: held while it decides whether to append, and while it does. Both actors
    /// run on the controller arbiter, so the fsync done under it never blocks the controller
    /// mid-handler; on separate threads it would only make the controller wait.
    pub fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}
