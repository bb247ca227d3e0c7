//! The group coordinator (Kafka's `group-coordinator` module: `GroupCoordinatorService`, one
//! `GroupCoordinatorShard` per `__consumer_offsets` partition led). `core` holds the pure shard
//! state machine (classic and KIP-848 consumer groups, committed offsets, their
//! `__consumer_offsets` records and replay); the actor around it appends those records through
//! the partition leader and answers only once they are committed.

pub mod actor;
pub mod apis;
pub mod codec;
pub mod core;
pub mod log;
pub mod manager;
pub mod messages;
pub mod metrics;

pub use actor::GroupCoordinatorActor;
pub use manager::GroupCoordinatorManagerActor;
