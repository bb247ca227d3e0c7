//! Metadata on every node (Kafka's `MetadataLoader` + `MetadataPublisher`s, `MetadataImage`):
//! committed `__cluster_metadata` records are replayed into an immutable [`MetadataImage`],
//! published to readers as an `Arc` snapshot, and turned into per-partition
//! leader/follower/delete notifications. Last step of the "Metadata change" path.

pub mod core;
