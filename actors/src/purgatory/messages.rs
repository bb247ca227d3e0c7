//! Messages of the `PurgatoryActor`.

use actix::Message;
use tokio::sync::oneshot;

use super::core::{FetchWatch, ProduceWatch};
use crate::partition::core::TopicPartition;

/// Per partition of a parked produce: NONE, REQUEST_TIMED_OUT or NOT_LEADER_OR_FOLLOWER.
pub type ProduceWaitResult = Vec<(TopicPartition, i16)>;

/// Produce handler → purgatory: park an acks=all produce until every partition's high
/// watermark passes its last offset, or `timeout_ms`. Lost: the client sees its own timeout.
#[derive(Message)]
#[rtype(result = "()")]
pub struct WatchProduce {
    pub watches: Vec<ProduceWatch>,
    pub timeout_ms: u64,
    pub done: oneshot::Sender<ProduceWaitResult>,
}

/// Fetch handler → purgatory: park a long poll until `min_bytes` are readable, a partition's
/// leadership changes, or `max_wait_ms`; `done` then says whether it expired and the handler
/// re-reads. Lost: the consumer waits for its own request timeout.
#[derive(Message)]
#[rtype(result = "()")]
pub struct WatchFetch {
    pub watches: Vec<FetchWatch>,
    pub min_bytes: usize,
    pub accumulated_bytes: usize,
    pub max_wait_ms: u64,
    /// A follower's fetch (watches log end offsets; see `Purgatory::add_fetch`).
    pub follower: bool,
    pub done: oneshot::Sender<bool>,
}

/// PartitionActor → purgatory: the high watermark moved and `bytes` more are readable. Lost:
/// waiting acks=all produces time out and long polls wait their full max wait.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct HighWatermarkAdvanced {
    pub tp: TopicPartition,
    pub high_watermark: i64,
    pub bytes: usize,
    /// The ISR is smaller than `min.insync.replicas`: acks=all produces the move completes get
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND (written, but not on enough replicas).
    pub under_min_isr: bool,
}

/// PartitionActor (a leader with followers) → purgatory: an append moved the log end, making
/// `bytes` more readable for followers. Lost: follower fetches wait their max wait, delaying
/// acks=all produces by as much.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct LogEndAdvanced {
    pub tp: TopicPartition,
    pub log_end_offset: i64,
    pub bytes: usize,
}

/// PartitionActor → purgatory: this replica stopped leading (follower, stopped, deleted).
/// Lost: its waiters complete only at their timeouts.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct LeadershipLost {
    pub tp: TopicPartition,
    /// The leader epoch of the leadership that ended.
    pub leader_epoch: i32,
    /// The replica was deleted: the partition's epochs may start over (a topic created again
    /// under the same name), so nothing of it is remembered.
    pub deleted: bool,
}

/// Metrics / tests → purgatory: how many operations wait (`kactor_purgatory_size`).
#[derive(Message)]
#[rtype(result = "PurgatorySize")]
pub struct DescribePurgatory;

#[derive(Debug, Clone, Copy, PartialEq, Eq, actix::MessageResponse)]
pub struct PurgatorySize {
    pub delayed_produce: usize,
    pub delayed_fetch: usize,
}
