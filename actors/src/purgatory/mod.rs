//! The purgatory (Kafka's `DelayedOperationPurgatory` for `DelayedProduce` and `DelayedFetch`):
//! acks=all produces wait here for the high watermark, long-poll fetches for `fetch.min.bytes`
//! or `fetch.max.wait.ms`. `core` is the pure bookkeeping, `actor` the `PurgatoryActor`.

pub mod actor;
pub mod core;
pub mod messages;

pub use self::actor::PurgatoryActor;
pub use self::messages::*;
