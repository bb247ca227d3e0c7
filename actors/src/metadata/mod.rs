//! Metadata on every node (Kafka's `MetadataLoader` + `MetadataPublisher`s, `MetadataImage`,
//! `BrokerLifecycleManager`): committed `__cluster_metadata` records are replayed into an
//! immutable [`MetadataImage`], published to readers as an `Arc` snapshot, and turned into
//! per-partition leader/follower/delete notifications. Last step of the "Metadata change" path.

pub mod actor;
pub mod alter_partition;
pub mod controller_channel;
pub mod core;
pub mod lifecycle;
pub mod messages;

pub use self::actor::{wait_for_offset, MetadataImageWatch, MetadataPublisherActor};
pub use self::core::MetadataImage;
pub use self::lifecycle::{BrokerLifecycleActor, BrokerLifecycleConfig, BrokerLifecycleState};
pub use self::messages::{
    BrokerConfigsChanged, GetMetadataImage, PartitionsChanged, SubscribeBrokerConfigChanges,
    SubscribePartitionChanges,
};

/// Kafka's internal topics (`Topic.isInternal`): clients may not write to them nor delete
/// their records, and Metadata flags them `IsInternal`.
pub const INTERNAL_TOPICS: [&str; 3] = [
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
];

pub fn is_internal_topic(name: &str) -> bool {
    INTERNAL_TOPICS.contains(&name)
}
