//! The purgatory (Kafka's `DelayedOperationPurgatory` for `DelayedProduce` and `DelayedFetch`):
//! acks=all produces wait here for the high watermark, long-poll fetches for `fetch.min.bytes`
//! or `fetch.max.wait.ms`. `core` is the pure bookkeeping, `actor` the `PurgatoryActor`.

pub mod actor;
pub mod core;
pub mod messages;

pub use self::actor::PurgatoryActor;
pub use self::messages::*;

/// Parks acks=all `watches` until each partition's high watermark passes its required offset,
/// or `timeout_ms`: the code per partition (NONE, REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER,
/// NOT_ENOUGH_REPLICAS_AFTER_APPEND). No watches, no round trip; an empty answer when the
/// purgatory is gone (shutting down), so nothing is taken as replicated.
pub async fn await_replication(
    purgatory: &crate::runtime::MeteredAddr<PurgatoryActor>,
    watches: Vec<self::core::ProduceWatch>,
    timeout_ms: u64,
) -> std::collections::HashMap<crate::partition::core::TopicPartition, i16> {
    if watches.is_empty() {
        return Default::default();
    }
    let (done, rx) = tokio::sync::oneshot::channel();
    purgatory.do_send(WatchProduce {
        watches,
        timeout_ms,
        done,
    });
    rx.await
        .map(|r| r.into_iter().collect())
        .unwrap_or_default()
}
