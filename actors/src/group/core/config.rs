//! Broker settings the group coordinator reads (Kafka's `GroupCoordinatorConfig`), with
//! Kafka 4.4's names and defaults.

/// Group coordinator settings; field names are Kafka's property names with units kept.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupCoordinatorConfig {
    /// `offsets.topic.num.partitions`
    pub offsets_topic_num_partitions: i32,
    /// `group.min.session.timeout.ms`
    pub group_min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`
    pub group_max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms`
    pub group_initial_rebalance_delay_ms: i32,
    /// `group.max.size`
    pub group_max_size: usize,
    /// How long a new classic member's parked JoinGroup may wait (Kafka's fixed 5 minutes).
    pub classic_new_member_join_timeout_ms: i32,
    /// `offsets.retention.minutes`, in ms.
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms`
    pub offsets_retention_check_interval_ms: i64,
    /// `offset.metadata.max.bytes`
    pub offset_metadata_max_bytes: usize,
    /// `group.consumer.session.timeout.ms`
    pub consumer_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms`
    pub consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.max.size`
    pub consumer_max_size: usize,
    /// `group.consumer.assignors`: the first is the default.
    pub consumer_assignors: Vec<String>,
}

impl Default for GroupCoordinatorConfig {
    fn default() -> Self {
        GroupCoordinatorConfig {
            offsets_topic_num_partitions: 50,
            group_min_session_timeout_ms: 6_000,
            group_max_session_timeout_ms: 1_800_000,
            group_initial_rebalance_delay_ms: 3_000,
            group_max_size: i32::MAX as usize,
            classic_new_member_join_timeout_ms: 300_000,
            offsets_retention_ms: 10_080 * 60 * 1000,
            offsets_retention_check_interval_ms: 600_000,
            offset_metadata_max_bytes: 4096,
            consumer_session_timeout_ms: 45_000,
            consumer_heartbeat_interval_ms: 5_000,
            consumer_max_size: i32::MAX as usize,
            consumer_assignors: vec!["uniform".to_string(), "range".to_string()],
        }
    }
}
