//! Partition-layer metric families (Kafka's `BrokerTopicStats` and `ReplicaManager` gauges):
//! bytes and messages in / out per topic, hosted / leader / under-replicated / offline partition
//! counts, log size per partition, and purgatory sizes.

use std::sync::OnceLock;

use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts};

use crate::metrics::register;

pub struct PartitionMetrics {
    /// `kactor_partition_bytes_in_total{topic}`: record bytes appended by producers.
    pub bytes_in_total: IntCounterVec,
    /// `kactor_partition_messages_in_total{topic}`: records appended by producers.
    pub messages_in_total: IntCounterVec,
    /// `kactor_partition_bytes_out_total{topic}`: record bytes returned by fetches.
    pub bytes_out_total: IntCounterVec,
    /// `kactor_partitions`: replicas hosted on this broker.
    pub partitions: IntGauge,
    /// `kactor_partitions_leader`: replicas this broker leads.
    pub leaders: IntGauge,
    /// `kactor_partitions_under_replicated`: led partitions whose ISR is smaller than
    /// their replica set.
    pub under_replicated: IntGauge,
    /// `kactor_partitions_under_min_isr` / `kactor_partitions_at_min_isr`: led partitions
    /// whose ISR is below / exactly at the effective `min.insync.replicas` (Kafka's
    /// `UnderMinIsrPartitionCount` / `AtMinIsrPartitionCount`): acks=all is refused / one more
    /// lost replica away from being refused.
    pub under_min_isr: IntGauge,
    pub at_min_isr: IntGauge,
    /// `kactor_partitions_offline`: assigned replicas whose log failed to open.
    pub offline: IntGauge,
    /// `kactor_fetch_sessions`: incremental fetch sessions this broker's cache holds (Kafka's
    /// `FetchSessionCache` `NumIncrementalFetchSessions`), and the partitions they hold
    /// (`NumIncrementalFetchPartitionsCached`), as of the last sessioned fetch.
    pub fetch_sessions: IntGauge,
    pub fetch_session_partitions: IntGauge,
    /// `kactor_replica_fetch_requests_total{kind}`: Fetch requests this broker's replica
    /// fetchers sent, `full` (opening a session), `incremental` (in one) or `sessionless`.
    pub replica_fetch_requests_total: IntCounterVec,
    /// `kactor_replica_fetcher_max_lag{leader,fetcher}`: the largest lag, in records, of the
    /// partitions a fetcher follows after its last round (leader's high watermark minus the
    /// follower's log end; Kafka's `ReplicaFetcherManager` `MaxLag`).
    pub fetcher_max_lag: IntGaugeVec,
    /// `kactor_partition_log_size_bytes{topic,partition}` (refreshed at each checkpoint).
    pub log_size_bytes: IntGaugeVec,
    /// `kactor_purgatory_size{operation}`: waiting DelayedProduce / DelayedFetch operations.
    pub purgatory_size: IntGaugeVec,
    /// `kactor_partition_last_stable_offset_lag{topic,partition}`: high watermark minus last
    /// stable offset of a led partition (Kafka's `LastStableOffsetLag`): how far open
    /// transactions hold read_committed consumers back.
    pub last_stable_offset_lag: IntGaugeVec,
    /// `kactor_partition_producers{topic,partition}`: producer ids with state in a led
    /// partition (idempotent and transactional producers not yet expired).
    pub producers: IntGaugeVec,
    /// `kactor_replication_bytes_in_total`: bytes followers here appended from leaders
    /// (Kafka's `ReplicationBytesInPerSec`).
    pub replication_bytes_in_total: IntCounter,
    /// `kactor_isr_shrinks_total` / `kactor_isr_expands_total`: ISR changes this broker's
    /// leaders proposed and the controller committed (Kafka's `IsrShrinksPerSec` /
    /// `IsrExpandsPerSec`).
    pub isr_shrinks_total: IntCounter,
    pub isr_expands_total: IntCounter,
}

pub fn partition_metrics() -> &'static PartitionMetrics {
    static M: OnceLock<PartitionMetrics> = OnceLock::new();
    M.get_or_init(|| {
        let counter = |name: &str, help: &str| {
            register(IntCounterVec::new(Opts::new(name, help), &["topic"]).expect("valid family"))
        };
        let counter1 =
            |name: &str, help: &str| register(IntCounter::new(name, help).expect("valid family"));
        let gauge =
            |name: &str, help: &str| register(IntGauge::new(name, help).expect("valid family"));
        let per_partition = |name: &str, help: &str| {
            register(
                IntGaugeVec::new(Opts::new(name, help), &["topic", "partition"])
                    .expect("valid family"),
            )
        };
        PartitionMetrics {
            bytes_in_total: counter(
                "kactor_partition_bytes_in_total",
                "Record bytes appended by producers, by topic.",
            ),
            messages_in_total: counter(
                "kactor_partition_messages_in_total",
                "Records appended by producers, by topic.",
            ),
            bytes_out_total: counter(
                "kactor_partition_bytes_out_total",
                "Record bytes returned by fetches, by topic.",
            ),
            partitions: gauge(
                "kactor_partitions",
                "Partition replicas hosted on this broker.",
            ),
            leaders: gauge("kactor_partitions_leader", "Partitions this broker leads."),
            under_replicated: gauge(
                "kactor_partitions_under_replicated",
                "Led partitions whose ISR is smaller than their replica set.",
            ),
            under_min_isr: gauge(
                "kactor_partitions_under_min_isr",
                "Led partitions whose ISR is below the effective min.insync.replicas.",
            ),
            at_min_isr: gauge(
                "kactor_partitions_at_min_isr",
                "Led partitions whose ISR is exactly the effective min.insync.replicas.",
            ),
            offline: gauge(
                "kactor_partitions_offline",
                "Assigned replicas whose log could not be opened.",
            ),
            fetch_sessions: gauge(
                "kactor_fetch_sessions",
                "Incremental fetch sessions (KIP-227) in this broker's session cache.",
            ),
            fetch_session_partitions: gauge(
                "kactor_fetch_session_partitions",
                "Partitions held by the incremental fetch sessions in this broker's cache.",
            ),
            replica_fetch_requests_total: register(
                IntCounterVec::new(
                    Opts::new(
                        "kactor_replica_fetch_requests_total",
                        "Fetch requests sent by this broker's replica fetchers, by kind \
                         (full, incremental, sessionless).",
                    ),
                    &["kind"],
                )
                .expect("valid family"),
            ),
            fetcher_max_lag: register(
                IntGaugeVec::new(
                    Opts::new(
                        "kactor_replica_fetcher_max_lag",
                        "Largest lag in records (leader high watermark minus follower log end) \
                         among a replica fetcher's partitions after its last round.",
                    ),
                    &["leader", "fetcher"],
                )
                .expect("valid family"),
            ),
            log_size_bytes: per_partition(
                "kactor_partition_log_size_bytes",
                "Bytes of a partition's log on disk.",
            ),
            last_stable_offset_lag: per_partition(
                "kactor_partition_last_stable_offset_lag",
                "High watermark minus last stable offset of a led partition (open transactions).",
            ),
            producers: per_partition(
                "kactor_partition_producers",
                "Producer ids with state in a led partition.",
            ),
            replication_bytes_in_total: counter1(
                "kactor_replication_bytes_in_total",
                "Bytes followers on this broker appended from their leaders.",
            ),
            isr_shrinks_total: counter1(
                "kactor_isr_shrinks_total",
                "ISR shrinks proposed by this broker's leaders and committed.",
            ),
            isr_expands_total: counter1(
                "kactor_isr_expands_total",
                "ISR expansions proposed by this broker's leaders and committed.",
            ),
            purgatory_size: register(
                IntGaugeVec::new(
                    Opts::new(
                        "kactor_purgatory_size",
                        "Operations waiting in the purgatory, by operation.",
                    ),
                    &["operation"],
                )
                .expect("valid family"),
            ),
        }
    })
}
