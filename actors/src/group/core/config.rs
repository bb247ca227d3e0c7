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
    /// `group.consumer.min.session.timeout.ms` / `group.consumer.max.session.timeout.ms`:
    /// the range a group's own `consumer.session.timeout.ms` is held to.
    pub consumer_min_session_timeout_ms: i32,
    pub consumer_max_session_timeout_ms: i32,
    /// `group.consumer.min.heartbeat.interval.ms` / `group.consumer.max.heartbeat.interval.ms`
    pub consumer_min_heartbeat_interval_ms: i32,
    pub consumer_max_heartbeat_interval_ms: i32,
    /// `group.consumer.max.size`
    pub consumer_max_size: usize,
    /// `group.consumer.assignment.interval.ms`: least time between two target assignments of
    /// a group (Kafka 4.4; a group epoch bumped sooner waits for a later heartbeat).
    pub consumer_assignment_interval_ms: i32,
    /// `group.consumer.min.assignment.interval.ms` / `group.consumer.max.assignment.interval.ms`:
    /// the range a group's own `consumer.assignment.interval.ms` is held to.
    pub consumer_min_assignment_interval_ms: i32,
    pub consumer_max_assignment_interval_ms: i32,
    /// `group.consumer.regex.refresh.interval.ms`: how old a group's resolved regular
    /// expressions may get before a heartbeat has them resolved again.
    pub consumer_regex_refresh_interval_ms: i64,
    /// `group.consumer.assignors`: the first is the default.
    pub consumer_assignors: Vec<String>,
    /// `group.consumer.migration.policy`: whether a classic group may become a consumer group
    /// when a KIP-848 member joins it (upgrade), and back when its last KIP-848 member leaves
    /// (downgrade).
    pub consumer_migration_policy: ConsumerGroupMigrationPolicy,
    /// `group.share.session.timeout.ms`
    pub share_session_timeout_ms: i32,
    /// `group.share.heartbeat.interval.ms`
    pub share_heartbeat_interval_ms: i32,
    /// `group.share.max.size`
    pub share_max_size: usize,
    /// `group.share.initialize.retry.interval.ms`: an internal config in Kafka (not in its
    /// DescribeConfigs set, so not in kactor's config table either), honoured when given.
    pub share_initialize_retry_interval_ms: i64,
}

/// Kafka's `ConsumerGroupMigrationPolicy` (`group.consumer.migration.policy`, default
/// `bidirectional`; values are case-insensitive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConsumerGroupMigrationPolicy {
    #[default]
    Bidirectional,
    Upgrade,
    Downgrade,
    Disabled,
}

impl ConsumerGroupMigrationPolicy {
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "bidirectional" => Some(Self::Bidirectional),
            "upgrade" => Some(Self::Upgrade),
            "downgrade" => Some(Self::Downgrade),
            "disabled" => Some(Self::Disabled),
            _ => None,
        }
    }

    pub fn is_upgrade_enabled(self) -> bool {
        matches!(self, Self::Bidirectional | Self::Upgrade)
    }

    pub fn is_downgrade_enabled(self) -> bool {
        matches!(self, Self::Bidirectional | Self::Downgrade)
    }
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
            consumer_min_session_timeout_ms: 45_000,
            consumer_max_session_timeout_ms: 60_000,
            consumer_min_heartbeat_interval_ms: 5_000,
            consumer_max_heartbeat_interval_ms: 15_000,
            consumer_max_size: i32::MAX as usize,
            consumer_assignment_interval_ms: 1_000,
            consumer_min_assignment_interval_ms: 0,
            consumer_max_assignment_interval_ms: 15_000,
            consumer_regex_refresh_interval_ms: 600_000,
            consumer_assignors: vec!["uniform".to_string(), "range".to_string()],
            consumer_migration_policy: ConsumerGroupMigrationPolicy::default(),
            share_session_timeout_ms: 45_000,
            share_heartbeat_interval_ms: 5_000,
            share_max_size: 200,
            share_initialize_retry_interval_ms: 30_000,
        }
    }
}

impl GroupCoordinatorConfig {
    /// Reads Kafka's property names (flat keys, as in `server.properties`); absent or
    /// unparsable values keep Kafka's defaults.
    pub fn from_properties(props: &std::collections::BTreeMap<String, String>) -> Self {
        let mut c = GroupCoordinatorConfig::default();
        fn get<T: std::str::FromStr>(
            props: &std::collections::BTreeMap<String, String>,
            key: &str,
            into: &mut T,
        ) {
            if let Some(v) = props.get(key).and_then(|v| v.trim().parse().ok()) {
                *into = v;
            }
        }
        get(
            props,
            "offsets.topic.num.partitions",
            &mut c.offsets_topic_num_partitions,
        );
        get(
            props,
            "group.min.session.timeout.ms",
            &mut c.group_min_session_timeout_ms,
        );
        get(
            props,
            "group.max.session.timeout.ms",
            &mut c.group_max_session_timeout_ms,
        );
        get(
            props,
            "group.initial.rebalance.delay.ms",
            &mut c.group_initial_rebalance_delay_ms,
        );
        get(props, "group.max.size", &mut c.group_max_size);
        get(
            props,
            "offsets.retention.check.interval.ms",
            &mut c.offsets_retention_check_interval_ms,
        );
        get(
            props,
            "offset.metadata.max.bytes",
            &mut c.offset_metadata_max_bytes,
        );
        get(
            props,
            "group.consumer.session.timeout.ms",
            &mut c.consumer_session_timeout_ms,
        );
        get(
            props,
            "group.consumer.heartbeat.interval.ms",
            &mut c.consumer_heartbeat_interval_ms,
        );
        get(
            props,
            "group.consumer.min.session.timeout.ms",
            &mut c.consumer_min_session_timeout_ms,
        );
        get(
            props,
            "group.consumer.max.session.timeout.ms",
            &mut c.consumer_max_session_timeout_ms,
        );
        get(
            props,
            "group.consumer.min.heartbeat.interval.ms",
            &mut c.consumer_min_heartbeat_interval_ms,
        );
        get(
            props,
            "group.consumer.max.heartbeat.interval.ms",
            &mut c.consumer_max_heartbeat_interval_ms,
        );
        get(props, "group.consumer.max.size", &mut c.consumer_max_size);
        get(
            props,
            "group.share.session.timeout.ms",
            &mut c.share_session_timeout_ms,
        );
        get(
            props,
            "group.share.heartbeat.interval.ms",
            &mut c.share_heartbeat_interval_ms,
        );
        get(props, "group.share.max.size", &mut c.share_max_size);
        get(
            props,
            "group.share.initialize.retry.interval.ms",
            &mut c.share_initialize_retry_interval_ms,
        );
        get(
            props,
            "group.consumer.assignment.interval.ms",
            &mut c.consumer_assignment_interval_ms,
        );
        get(
            props,
            "group.consumer.min.assignment.interval.ms",
            &mut c.consumer_min_assignment_interval_ms,
        );
        get(
            props,
            "group.consumer.max.assignment.interval.ms",
            &mut c.consumer_max_assignment_interval_ms,
        );
        get(
            props,
            "group.consumer.regex.refresh.interval.ms",
            &mut c.consumer_regex_refresh_interval_ms,
        );
        if let Some(policy) = props
            .get("group.consumer.migration.policy")
            .and_then(|v| ConsumerGroupMigrationPolicy::parse(v))
        {
            c.consumer_migration_policy = policy;
        }
        let mut minutes = c.offsets_retention_ms / 60_000;
        get(props, "offsets.retention.minutes", &mut minutes);
        c.offsets_retention_ms = minutes * 60_000;
        if let Some(list) = props.get("group.consumer.assignors") {
            // Kafka lists class names; their `name()` is what members ask for.
            let names: Vec<String> = list
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .filter_map(|s| match s.rsplit('.').next().unwrap_or(s) {
                    "UniformAssignor" | "uniform" => Some("uniform".to_string()),
                    "RangeAssignor" | "range" => Some("range".to_string()),
                    _ => None,
                })
                .collect();
            if !names.is_empty() {
                c.consumer_assignors = names;
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_override_defaults() {
        let props: std::collections::BTreeMap<String, String> = [
            ("offsets.topic.num.partitions", "3"),
            ("group.initial.rebalance.delay.ms", "0"),
            ("offsets.retention.minutes", "1"),
            (
                "group.consumer.assignors",
                "org.apache.kafka.coordinator.group.assignor.RangeAssignor, uniform",
            ),
            ("group.max.size", "not a number"),
            ("group.consumer.migration.policy", "Upgrade"),
            ("group.consumer.assignment.interval.ms", "0"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let c = GroupCoordinatorConfig::from_properties(&props);
        assert_eq!(c.offsets_topic_num_partitions, 3);
        assert_eq!(c.group_initial_rebalance_delay_ms, 0);
        assert_eq!(c.offsets_retention_ms, 60_000);
        assert_eq!(
            c.consumer_assignors,
            vec!["range".to_string(), "uniform".to_string()]
        );
        assert_eq!(
            c.group_max_size,
            GroupCoordinatorConfig::default().group_max_size
        );
        assert_eq!(c.consumer_session_timeout_ms, 45_000);
        assert_eq!(c.consumer_assignment_interval_ms, 0);
        assert_eq!(c.consumer_regex_refresh_interval_ms, 600_000);
        assert_eq!(
            c.consumer_migration_policy,
            ConsumerGroupMigrationPolicy::Upgrade
        );
        assert!(!c.consumer_migration_policy.is_downgrade_enabled());
        assert_eq!(
            GroupCoordinatorConfig::default().consumer_migration_policy,
            ConsumerGroupMigrationPolicy::Bidirectional
        );
    }
}
