//! The group coordinator's pure core (Kafka's `GroupCoordinatorShard`): no actix, no I/O.
//! `GroupCoordinatorShard::handle(request_id, request, now_ms)` returns the records to append
//! to `__consumer_offsets` and the responses to send once they are committed;
//! `fire_timers(now_ms)` runs session/rebalance/retention deadlines; `replay(record)` rebuilds
//! the state from the partition when the shard loads.

pub mod api;
pub mod assignor;
mod classic;
pub mod classic_group;
pub mod config;
mod consumer;
pub(crate) use consumer::INTERNAL_TOPICS;
pub mod consumer_group;
pub mod consumer_protocol;
pub mod hashing;
mod mixed;
mod offsets;
pub mod records;
pub mod regex;
mod shard;
pub mod share;
pub mod timers;

pub use api::*;
pub use config::GroupCoordinatorConfig;
pub use offsets::OffsetStore;
pub use records::CoordinatorRecord;
pub use shard::{Group, GroupCoordinatorShard};

#[cfg(test)]
mod tests;

/// Fixtures other test modules of the group coordinator reuse.
#[cfg(test)]
pub(crate) mod tests_support {
    pub fn record_log_of_a_busy_shard() -> Vec<super::CoordinatorRecord> {
        super::tests::busy_log()
    }
}
