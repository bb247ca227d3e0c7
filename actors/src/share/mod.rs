//! KIP-932 share groups on the partition leader: share-partitions (delivery state per group and
//! partition) and share sessions, behind ShareFetch and ShareAcknowledge. Membership and
//! assignment are the group coordinator's (`group/core/share.rs`).

pub mod actor;
pub mod apis;
pub mod coordinator;
pub mod core;
pub mod messages;
pub mod metrics;
pub mod persister;
