//! The share coordinator (KIP-932): the durable delivery state of share-partitions, kept in
//! `__share_group_state` and served to share-partition leaders by the Initialize / Read /
//! Write / Delete / ReadSummary ShareGroupState APIs.

pub mod actor;
pub mod apis;
pub mod core;
pub mod log;
