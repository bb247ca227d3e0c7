//! Messages of the `PartitionActor` (one hosted replica) and of the `ReplicaManagerActor` (the
//! registry of hosted replicas).

use std::collections::BTreeMap;

use actix::Message;
use bytes::Bytes;

use super::core::{
    AppendOutcome, EpochEndOffset, FollowerPosition, IsolationLevel, IsrChange, IsrChangeOutcome,
    PartitionAssignment, PartitionConfig, PartitionError, ReadOutcome, ReadParams, ReadScope,
    TimestampOffset, TopicPartition,
};
use kactor_protocol::Uuid;

/// Produce handler → partition: append this partition's records (one message per partition per
/// produce request, never per record). Lost: the producer times out and retries.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<AppendOutcome, AppendFailure>")]
pub struct AppendRecords {
    pub records: Bytes,
    pub required_acks: i16,
}

/// A refused [`AppendRecords`]: the error, and the log start offset the produce response
/// reports with it (-1 for the failures Kafka answers without one, see
/// [`PartitionError::produce_reports_log_start_offset`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendFailure {
    pub error: PartitionError,
    pub log_start_offset: i64,
}

/// Group / transaction coordinator → partition leader: append records the coordinator writes
/// itself (Kafka's `AppendOrigin.COORDINATOR`). A TxnOffsetCommit's records carry the
/// producer's id and epoch but no sequence, so they are neither sequence-checked nor
/// deduplicated; being transactional, they need the producer's verification guard confirmed
/// here ([`ConfirmTxnVerification`], sent by `txn::leader_verify` ahead of them) unless its
/// transaction is already open here, else INVALID_TXN_STATE and nothing is appended. Lost: the
/// coordinator's write times out and its request fails retriably.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<AppendOutcome, PartitionError>")]
pub struct AppendCoordinatorRecords {
    pub records: Bytes,
    pub required_acks: i16,
}

/// WriteTxnMarkers handler (or the transaction coordinator) → partition leader: append one
/// commit/abort marker. Lost: the coordinator retries the marker.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<AppendOutcome, PartitionError>")]
pub struct AppendTxnMarker {
    pub marker: crate::producer::partition::TxnMarker,
}

/// DescribeProducers handler → partition leader: its producer-state entries. Lost: the admin
/// request times out.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<Vec<crate::producer::ProducerStateEntry>, PartitionError>")]
pub struct DescribeProducerState;

/// Transaction verification (KIP-890) → partition leader: one producer's state, to see whether
/// it already has a transaction open here (no coordinator round trip then). Lost: the produce
/// request times out.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<Option<crate::producer::ProducerStateEntry>, PartitionError>")]
pub struct DescribeProducer {
    pub producer_id: i64,
}

/// Transaction verification (KIP-890) → partition leader, before asking the coordinator about
/// a transactional batch (Kafka's `Partition.maybeStartTransactionVerification`): the
/// producer's verification guard, or the sentinel when a transaction of `producer_epoch` is
/// already open here (no coordinator round trip then). An older epoch answers
/// INVALID_PRODUCER_EPOCH. Lost: the produce request times out.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<crate::producer::VerificationGuard, PartitionError>")]
pub struct StartTxnVerification {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    /// Transaction version 2 (Produce v12+ / TxnOffsetCommit v5+).
    pub supports_epoch_bump: bool,
}

/// Transaction verification → partition leader, after the coordinator's OK and just before the
/// request's append is sent: `guard` may start the producer's transaction here. Kafka passes
/// the guard inside the append; kactor's Produce handler is shared with non-transactional
/// traffic, so it travels in this message, ahead of the append in the same mailbox.
/// INVALID_TXN_STATE if the guard was cleared meanwhile (the transaction ended). Lost: the
/// produce request times out.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<(), PartitionError>")]
pub struct ConfirmTxnVerification {
    pub producer_id: i64,
    pub guard: crate::producer::VerificationGuard,
}

/// Fetch handler → partition: read from an offset. Lost: the fetch times out.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<ReadOutcome, PartitionError>")]
pub struct ReadRecords {
    pub params: ReadParams,
    /// Whether a follower may serve it and what the leader may answer instead (KIP-392);
    /// the default reads on the leader only.
    pub scope: ReadScope,
    /// For a follower's read: whether the metadata says its broker may join the ISR (Kafka's
    /// `isReplicaIsrEligible`: registered, unfenced, not in controlled shutdown, and the
    /// broker epoch it fetched with is current). A leader proposes no expansion otherwise.
    pub isr_eligible: bool,
    /// The broker epoch a follower fetched with (KIP-903; -1 for consumers and followers that
    /// do not send it): kept for the ISR changes the leader proposes.
    pub replica_epoch: i64,
}

/// ListOffsets handler → partition: the offset for a timestamp (or -1/-2/-3/-4/-5/-6).
/// `isolation` is `None` for requests from other brokers. Lost: the client retries.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<Option<TimestampOffset>, PartitionError>")]
pub struct GetOffsetForTimestamp {
    pub timestamp: i64,
    pub isolation: Option<IsolationLevel>,
    pub current_leader_epoch: i32,
}

/// DeleteRecords handler → partition: move the log start offset to `offset` (-1: the high
/// watermark). Returns the new low watermark. Lost: the admin client times out.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<i64, PartitionError>")]
pub struct DeleteRecordsBefore {
    pub offset: i64,
}

/// OffsetForLeaderEpoch handler → partition. Lost: the client retries.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<EpochEndOffset, PartitionError>")]
pub struct GetEndOffsetForEpoch {
    pub current_leader_epoch: i32,
    pub leader_epoch: i32,
    /// Consumers may only ask the leader; followers (replica id >= 0) may ask any replica.
    pub fetch_only_from_leader: bool,
}

/// Fetch handler → partition: bytes readable now from `fetch_offset` (the long-poll estimate).
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "usize")]
pub struct GetReadableBytes {
    pub fetch_offset: i64,
    pub max_bytes: usize,
}

/// Registry → partition: lead with this assignment and config. Lost: the partition keeps its
/// old role until the next metadata change.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<(), PartitionError>")]
pub struct BecomeLeader {
    pub assignment: PartitionAssignment,
    pub config: PartitionConfig,
}

/// Registry → partition: where to send ISR changes this replica proposes as leader (the
/// controller channel) and its topic id. Lost: the replica proposes nothing until told again.
#[derive(Message, Clone)]
#[rtype(result = "()")]
pub struct ConnectIsrChannel {
    pub topic_id: Uuid,
    pub channel: crate::runtime::MeteredRecipient<AlterIsr>,
}

/// Partition leader → controller channel: propose this ISR (one partition of AlterPartition).
/// Lost: the partition proposes again after its pending state clears (the answer or the next
/// metadata change).
#[derive(Message, Debug, Clone)]
#[rtype(result = "IsrChangeOutcome")]
pub struct AlterIsr {
    pub tp: TopicPartition,
    pub topic_id: Uuid,
    pub change: IsrChange,
}

/// Registry → partition (leaders with followers): drop followers that have not caught up within
/// `max_lag_ms` from the ISR (Kafka's `isr-expiration` task). Lost: the next tick checks again.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct MaybeShrinkIsr {
    pub max_lag_ms: i64,
}

/// Replica fetcher → follower partition: where its log stands.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<FollowerPosition, PartitionError>")]
pub struct GetFollowerPosition;

/// Replica fetcher → follower partition: append batches fetched from the leader as they are.
/// Lost: the fetcher fetches the same offset again.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<FollowerPosition, PartitionError>")]
pub struct AppendAsFollower {
    pub records: Bytes,
    pub leader_high_watermark: i64,
    pub leader_log_start_offset: i64,
    /// The position the fetch was sent from: an answer for an older one is dropped.
    pub fetched_from: FollowerPosition,
}

/// Replica fetcher → follower partition: the leader reported a diverging epoch.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<FollowerPosition, PartitionError>")]
pub struct TruncateToDivergingEpoch {
    pub epoch: i32,
    pub end_offset: i64,
}

/// Replica fetcher → follower partition: the fetch offset is outside the leader's log.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<FollowerPosition, PartitionError>")]
pub struct ResetToLeaderRange {
    pub leader_log_start_offset: i64,
    pub leader_log_end_offset: i64,
}

/// Registry → partition: follow `assignment.leader`. Lost: as for `BecomeLeader`.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct BecomeFollower {
    pub assignment: PartitionAssignment,
    pub config: PartitionConfig,
}

/// Registry → partition: the topic's config changed. Lost: the old config stays in force.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct UpdatePartitionConfig {
    pub config: PartitionConfig,
}

/// Registry → partition: stop serving; with `delete` remove the log, else hand it back for a
/// clean close. Afterwards it answers NOT_LEADER_OR_FOLLOWER. Lost: the replica keeps serving.
#[derive(Message)]
#[rtype(result = "Option<Box<dyn super::core::PartitionLog>>")]
pub struct StopReplica {
    pub delete: bool,
}

/// Partition (or anything else that met an I/O error in a log dir) → registry: take the dir
/// offline (Kafka's `LogDirFailureChannel.maybeAddOfflineLogDir`). Lost: the dir stays online
/// and its replicas keep failing one request at a time.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct LogDirFailed {
    pub log_dir: String,
    pub reason: String,
}

/// Partition → registry: restarts beyond the intensity; this replica alone goes offline until
/// the process restarts. Lost: the replica answers NOT_LEADER_OR_FOLLOWER instead of
/// KAFKA_STORAGE_ERROR.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct ReplicaFailed {
    pub tp: super::core::TopicPartition,
    pub reason: String,
}

/// Registry → partition: its log dir failed; stop serving at once and drop the log without
/// flushing into the failed disk. Lost: the replica keeps failing requests on its own.
#[derive(Message)]
#[rtype(result = "()")]
pub struct TakeReplicaOffline;

/// Log manager / DescribeLogDirs / tests → partition: the replica's vital numbers.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "ReplicaInfo")]
pub struct DescribeReplica;

#[derive(Debug, Clone, Copy, PartialEq, Eq, actix::MessageResponse)]
pub struct ReplicaInfo {
    pub is_leader: bool,
    pub leader_epoch: i32,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub high_watermark: i64,
    pub recovery_point: i64,
    pub size_bytes: u64,
}

/// Log manager → partition: flush if `flush.messages` / `flush.ms` say so (`force`: always,
/// e.g. before a clean shutdown). Lost: data stays in the page cache a little longer.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct FlushTick {
    pub force: bool,
}

/// Log manager → partition: apply `retention.ms` / `retention.bytes` now
/// (`log.retention.check.interval.ms`). Lost: old segments stay until the next tick.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "usize")]
pub struct RetentionTick;

/// Log manager → partition: forget producers idle past `producer.id.expiration.ms`
/// (`producer.id.expiration.check.interval.ms`). Lost: they stay until the next tick. Answers
/// how many were removed.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "usize")]
pub struct ProducerExpirationTick;

/// One local replica's new state from the metadata log (the registry's input; mirrors the
/// metadata publisher's `LocalPartitionChange`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionChange {
    pub kind: PartitionChangeKind,
    pub topic: String,
    pub topic_id: kactor_protocol::Uuid,
    pub partition: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// The topic's config overrides; broker defaults fill the rest.
    pub config_overrides: BTreeMap<String, String>,
}

impl From<crate::metadata::core::LocalPartitionChange> for PartitionChange {
    fn from(c: crate::metadata::core::LocalPartitionChange) -> Self {
        use crate::metadata::core::LocalPartitionChangeKind as K;
        PartitionChange {
            kind: match c.kind {
                K::BecomeLeader => PartitionChangeKind::BecomeLeader,
                K::BecomeFollower => PartitionChangeKind::BecomeFollower,
                K::Delete => PartitionChangeKind::Delete,
            },
            topic: c.topic_name,
            topic_id: c.topic_id,
            partition: c.partition_index,
            leader: c.leader_id,
            leader_epoch: c.leader_epoch,
            partition_epoch: c.partition_epoch,
            replicas: c.replicas,
            isr: c.isr,
            config_overrides: c.config_overrides,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionChangeKind {
    BecomeLeader,
    BecomeFollower,
    Delete,
}

impl PartitionChange {
    pub fn tp(&self) -> TopicPartition {
        TopicPartition::new(self.topic.clone(), self.partition)
    }
    pub fn assignment(&self) -> PartitionAssignment {
        PartitionAssignment {
            leader: self.leader,
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            replicas: self.replicas.clone(),
            isr: self.isr.clone(),
        }
    }
}

/// Metadata publisher → registry: apply committed partition changes, in order. Lost: replicas
/// don't open/lead/delete until the next change (a restart replays them from the image).
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct ApplyPartitionChanges {
    pub changes: Vec<PartitionChange>,
}

/// Metadata publisher → registry: a topic's config overrides changed.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct UpdateTopicConfig {
    pub topic: String,
    pub config_overrides: BTreeMap<String, String>,
}

/// Metadata publisher / config → registry: the broker's (dynamic) config changed; topics without
/// overrides pick up the new defaults.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct UpdateBrokerLogConfig {
    pub broker_config: BTreeMap<String, String>,
}

/// Anyone → registry: a receiver of the current partition table (request handlers keep one).
#[derive(Message)]
#[rtype(result = "super::registry::PartitionTableReader")]
pub struct SubscribePartitionTable;

/// Topology → registry, once the broker is Running (registered and caught up with the metadata
/// log, so the image is complete): logs on disk for partitions the image does not assign to
/// this node are renamed `-stray` instead of lingering (KIP-858). Lost: they stay until the
/// next start.
#[derive(Message)]
#[rtype(result = "()")]
pub struct MarkStrayLogs {
    pub image: std::sync::Arc<crate::metadata::core::MetadataImage>,
}

/// Process shutdown → registry: stop every replica and close every log cleanly (clean-shutdown
/// marker written by the log factory). Lost: the next start recovers the logs.
#[derive(Message)]
#[rtype(result = "Result<(), String>")]
pub struct ShutdownReplicas;
