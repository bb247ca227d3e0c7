//! The quorum controller (Kafka's `QuorumController`): the single event loop that validates
//! admin and broker-lifecycle requests, turns them into `__cluster_metadata` records, and
//! answers once Raft has committed them. Second step of the "Metadata change" path
//! (router → controller → Raft → publisher).

pub mod actor;
pub mod broker_apis;
pub mod core;
pub mod envelope;
pub mod messages;
pub mod metrics;

pub use self::actor::QuorumControllerActor;
pub use self::core::{ControllerConfig, QuorumControllerCore};
pub use self::messages::*;
pub mod startup;

pub use self::startup::{start_kraft, KraftConfig, KraftHandles};
pub mod apis;
pub mod cluster_apis;
