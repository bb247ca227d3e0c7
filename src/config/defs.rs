//! The broker config definitions (Kafka's `KafkaConfig` / `ServerLogConfigs` /
//! `SocketServerConfigs` / `ReplicationConfigs` / `KRaftConfigs` key tables): name, type,
//! default and validation for every key kactor reads. Names, types and defaults are Kafka 4.4's,
//! except the handful marked "kactor single-node default", which make `kactor` with no
//! arguments a working combined-mode node.

/// Kafka's `ConfigDef.Type`, numbered as DescribeConfigs reports it (`config_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Short = 4,
    Long = 5,
    Double = 6,
    List = 7,
    Class = 8,
    Password = 9,
}

/// A per-key value check, run after the type parsed.
#[derive(Debug, Clone, Copy)]
pub enum Validator {
    Any,
    /// Numeric lower bound (inclusive).
    AtLeast(i64),
    /// Numeric range (inclusive both ends).
    Between(i64, i64),
    /// One of these (case-sensitive, as Kafka's `ValidString`).
    OneOf(&'static [&'static str]),
    /// Every list element is one of these.
    ListOf(&'static [&'static str]),
    /// Not empty after trimming.
    NonEmpty,
}

/// How often the value may change; DescribeConfigs' `read_only` is `Static` for brokers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutability {
    /// Needs a restart.
    ReadOnly,
    /// Can be changed with IncrementalAlterConfigs for one broker or the cluster default.
    ClusterWide,
}

#[derive(Debug, Clone, Copy)]
pub struct ConfigDef {
    pub name: &'static str,
    pub ty: ConfigType,
    /// `None` = Kafka's `null` default (unset).
    pub default: Option<&'static str>,
    pub validator: Validator,
    pub mutability: Mutability,
    pub doc: &'static str,
}

const fn def(
    name: &'static str,
    ty: ConfigType,
    default: Option<&'static str>,
    validator: Validator,
    doc: &'static str,
) -> ConfigDef {
    ConfigDef {
        name,
        ty,
        default,
        validator,
        mutability: Mutability::ReadOnly,
        doc,
    }
}

const fn dynamic(
    name: &'static str,
    ty: ConfigType,
    default: Option<&'static str>,
    validator: Validator,
    doc: &'static str,
) -> ConfigDef {
    ConfigDef {
        name,
        ty,
        default,
        validator,
        mutability: Mutability::ClusterWide,
        doc,
    }
}

use ConfigType::*;
use Validator::*;

pub const LONG_MAX: &str = "9223372036854775807";
pub const INT_MAX: &str = "2147483647";

/// Every key kactor knows. Unknown keys are kept (and warned about), as Kafka does.
pub const BROKER_CONFIG_DEFS: &[ConfigDef] = &[
    // --- identity and roles (KRaft) ---
    def("node.id", Int, Some("1"), AtLeast(0), "Id of this node in the cluster (kactor single-node default: 1)."),
    def("process.roles", List, Some("broker,controller"), ListOf(&["broker", "controller"]),
        "Roles of this node: broker, controller, or both (kactor single-node default: combined)."),
    def("controller.quorum.voters", List, Some("1@127.0.0.1:9093"), Any,
        "Static controller quorum as id@host:port entries (kactor single-node default: 1@127.0.0.1:9093)."),
    def("controller.quorum.bootstrap.servers", List, Some(""), Any,
        "host:port of controllers used to discover a dynamic quorum."),
    def("controller.listener.names", List, Some("CONTROLLER"), Any,
        "Listener names used by the controller (kactor single-node default: CONTROLLER)."),
    def("controller.quorum.election.timeout.ms", Int, Some("1000"), AtLeast(0), "Raft election timeout."),
    def("controller.quorum.fetch.timeout.ms", Int, Some("2000"), AtLeast(0), "Raft fetch timeout before a follower votes."),
    def("controller.quorum.election.backoff.max.ms", Int, Some("1000"), AtLeast(0), "Raft election backoff ceiling."),
    def("controller.quorum.append.linger.ms", Int, Some("25"), AtLeast(0), "Raft batching linger."),
    def("controller.quorum.request.timeout.ms", Int, Some("2000"), AtLeast(0), "Raft request timeout."),
    def("controller.quorum.retry.backoff.ms", Int, Some("20"), AtLeast(0), "Raft retry backoff."),
    def("broker.heartbeat.interval.ms", Int, Some("2000"), AtLeast(0), "Broker to controller heartbeat interval."),
    def("broker.session.timeout.ms", Int, Some("9000"), AtLeast(0), "Broker lease length at the controller."),
    def("broker.rack", String, None, Any, "Rack of this broker."),
    def("metadata.log.dir", String, None, Any, "Directory of __cluster_metadata (default: first log dir)."),
    def("metadata.log.segment.bytes", Int, Some("1073741824"), AtLeast(12), "Segment size of the metadata log."),
    def("metadata.log.segment.ms", Long, Some("604800000"), AtLeast(0), "Segment roll time of the metadata log."),
    def("metadata.max.retention.bytes", Long, Some("104857600"), Any, "Metadata log retention by size."),
    def("metadata.max.retention.ms", Long, Some("604800000"), Any, "Metadata log retention by time."),
    def("metadata.log.max.record.bytes.between.snapshots", Long, Some("20971520"), AtLeast(1), "Bytes of metadata log between snapshots."),
    // --- listeners and sockets ---
    def("listeners", List, Some("PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"), NonEmpty,
        "NAME://host:port listeners (kactor single-node default binds loopback)."),
    def("advertised.listeners", List, None, Any, "Listeners published to clients (default: listeners)."),
    def("listener.security.protocol.map", String,
        Some("SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"), Any,
        "Listener name to security protocol."),
    def("inter.broker.listener.name", String, None, Any, "Listener used between brokers."),
    def("security.inter.broker.protocol", String, Some("PLAINTEXT"),
        OneOf(&["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]), "Protocol used between brokers."),
    def("num.network.threads", Int, Some("3"), AtLeast(1), "Network arbiters (connection handling)."),
    def("num.io.threads", Int, Some("8"), AtLeast(1), "Partition arbiters (request processing)."),
    def("background.threads", Int, Some("10"), AtLeast(1), "Background task threads."),
    def("socket.send.buffer.bytes", Int, Some("102400"), Any, "SO_SNDBUF; -1 = OS default."),
    def("socket.receive.buffer.bytes", Int, Some("102400"), Any, "SO_RCVBUF; -1 = OS default."),
    def("socket.request.max.bytes", Int, Some("104857600"), AtLeast(1), "Largest request frame accepted."),
    def("socket.listen.backlog.size", Int, Some("50"), AtLeast(1), "listen(2) backlog."),
    dynamic("max.connections", Int, Some(INT_MAX), AtLeast(0), "Connection limit across listeners."),
    dynamic("max.connections.per.ip", Int, Some(INT_MAX), AtLeast(0), "Connection limit per client address."),
    dynamic("max.connections.per.ip.overrides", String, Some(""), Any, "host:limit overrides."),
    def("connections.max.idle.ms", Long, Some("600000"), Any, "Idle connections are closed after this."),
    def("queued.max.requests", Int, Some("500"), AtLeast(1), "In-flight requests per connection before reading pauses."),
    def("queued.max.request.bytes", Long, Some("-1"), Any, "Bytes of queued requests; -1 = unbounded."),
    def("request.timeout.ms", Int, Some("30000"), AtLeast(0), "Broker-side request timeout."),
    // --- logs ---
    def("log.dirs", List, Some("./data"), Any, "Data directories (kactor single-node default: ./data)."),
    def("log.dir", String, Some("/tmp/kafka-logs"), Any, "Data directory, used when log.dirs is unset."),
    def("num.partitions", Int, Some("1"), AtLeast(1), "Default partition count for new topics."),
    def("default.replication.factor", Int, Some("1"), AtLeast(1), "Default replication factor for new topics."),
    dynamic("min.insync.replicas", Int, Some("1"), AtLeast(1), "Minimum ISR size for acks=all."),
    dynamic("log.segment.bytes", Int, Some("1073741824"), AtLeast(14), "Segment size."),
    def("log.roll.hours", Int, Some("168"), AtLeast(1), "Segment roll time (hours)."),
    dynamic("log.roll.ms", Long, None, Any, "Segment roll time (ms); overrides log.roll.hours."),
    def("log.roll.jitter.hours", Int, Some("0"), AtLeast(0), "Segment roll jitter (hours)."),
    dynamic("log.roll.jitter.ms", Long, None, Any, "Segment roll jitter (ms)."),
    def("log.retention.hours", Int, Some("168"), Any, "Retention time (hours)."),
    def("log.retention.minutes", Int, None, Any, "Retention time (minutes); overrides hours."),
    dynamic("log.retention.ms", Long, None, Any, "Retention time (ms); overrides minutes; -1 = forever."),
    dynamic("log.retention.bytes", Long, Some("-1"), Any, "Retention size per partition; -1 = unbounded."),
    def("log.retention.check.interval.ms", Long, Some("300000"), AtLeast(1), "Retention check period."),
    dynamic("log.cleanup.policy", List, Some("delete"), ListOf(&["delete", "compact"]), "delete and/or compact."),
    def("log.cleaner.enable", Boolean, Some("true"), Any, "Run the log cleaner."),
    def("log.cleaner.threads", Int, Some("1"), AtLeast(0), "Log cleaner threads."),
    dynamic("log.cleaner.delete.retention.ms", Long, Some("86400000"), AtLeast(0), "Tombstone retention."),
    dynamic("log.cleaner.min.compaction.lag.ms", Long, Some("0"), AtLeast(0), "Minimum age before compaction."),
    dynamic("log.cleaner.min.cleanable.ratio", Double, Some("0.5"), Any, "Dirty ratio that triggers cleaning."),
    dynamic("log.index.size.max.bytes", Int, Some("10485760"), AtLeast(4), "Offset index size limit."),
    dynamic("log.index.interval.bytes", Int, Some("4096"), AtLeast(0), "Bytes between index entries."),
    dynamic("log.flush.interval.messages", Long, Some(LONG_MAX), AtLeast(1), "Messages between fsyncs."),
    dynamic("log.flush.interval.ms", Long, None, Any, "Time between fsyncs."),
    def("log.flush.scheduler.interval.ms", Long, Some(LONG_MAX), Any, "Flush check period."),
    def("log.flush.offset.checkpoint.interval.ms", Int, Some("60000"), AtLeast(0), "Recovery point checkpoint period."),
    def("log.flush.start.offset.checkpoint.interval.ms", Int, Some("60000"), AtLeast(0), "Log start offset checkpoint period."),
    dynamic("log.segment.delete.delay.ms", Long, Some("60000"), AtLeast(0), "Delay before a .deleted file is removed."),
    dynamic("log.preallocate", Boolean, Some("false"), Any, "Preallocate segment files."),
    dynamic("log.message.timestamp.type", String, Some("CreateTime"), OneOf(&["CreateTime", "LogAppendTime"]), "Timestamp type of appended batches."),
    dynamic("log.message.timestamp.before.max.ms", Long, Some(LONG_MAX), AtLeast(0), "Allowed timestamp lag into the past."),
    dynamic("log.message.timestamp.after.max.ms", Long, Some("3600000"), AtLeast(0), "Allowed timestamp lead into the future."),
    def("num.recovery.threads.per.data.dir", Int, Some("2"), AtLeast(1), "Recovery threads per data dir."),
    dynamic("message.max.bytes", Int, Some("1048588"), AtLeast(0), "Largest record batch accepted."),
    dynamic("compression.type", String, Some("producer"),
        OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]), "Compression of stored batches."),
    def("auto.create.topics.enable", Boolean, Some("true"), Any, "Create topics on Metadata requests."),
    def("delete.topic.enable", Boolean, Some("true"), Any, "Allow DeleteTopics."),
    dynamic("unclean.leader.election.enable", Boolean, Some("false"), Any, "Allow out-of-ISR leaders."),
    def("auto.leader.rebalance.enable", Boolean, Some("true"), Any, "Move leadership back to preferred replicas."),
    // --- replication and fetch ---
    def("replica.lag.time.max.ms", Long, Some("30000"), Any, "Time before a lagging follower leaves the ISR."),
    def("replica.fetch.max.bytes", Int, Some("1048576"), AtLeast(0), "Follower fetch size per partition."),
    def("replica.fetch.wait.max.ms", Int, Some("500"), Any, "Follower fetch long-poll time."),
    def("replica.fetch.min.bytes", Int, Some("1"), Any, "Follower fetch minimum bytes."),
    def("replica.fetch.response.max.bytes", Int, Some("10485760"), AtLeast(0), "Follower fetch response size."),
    def("replica.fetch.backoff.ms", Int, Some("1000"), AtLeast(0), "Follower backoff after an error."),
    dynamic("num.replica.fetchers", Int, Some("1"), Any, "Fetchers per source broker."),
    def("replica.high.watermark.checkpoint.interval.ms", Long, Some("5000"), Any, "HW checkpoint period."),
    def("fetch.max.bytes", Int, Some("57671680"), AtLeast(1024), "Largest fetch response."),
    def("max.incremental.fetch.session.cache.slots", Int, Some("1000"), AtLeast(0), "Incremental fetch sessions kept."),
    def("fetch.purgatory.purge.interval.requests", Int, Some("1000"), Any, "Fetch purgatory purge period."),
    def("producer.purgatory.purge.interval.requests", Int, Some("1000"), Any, "Produce purgatory purge period."),
    // --- internal topics ---
    def("offsets.topic.num.partitions", Int, Some("50"), AtLeast(1), "__consumer_offsets partitions."),
    def("offsets.topic.replication.factor", Short, Some("1"), AtLeast(1),
        "__consumer_offsets replication factor (kactor single-node default: 1; Kafka: 3)."),
    def("offsets.topic.segment.bytes", Int, Some("104857600"), AtLeast(1), "__consumer_offsets segment size."),
    def("offsets.retention.minutes", Int, Some("10080"), AtLeast(1), "Committed offsets retention."),
    def("transaction.state.log.num.partitions", Int, Some("50"), AtLeast(1), "__transaction_state partitions."),
    def("transaction.state.log.replication.factor", Short, Some("1"), AtLeast(1),
        "__transaction_state replication factor (kactor single-node default: 1; Kafka: 3)."),
    def("transaction.state.log.min.isr", Int, Some("1"), AtLeast(1),
        "__transaction_state min ISR (kactor single-node default: 1; Kafka: 2)."),
    def("group.initial.rebalance.delay.ms", Int, Some("3000"), Any, "Delay of the first classic rebalance."),
    // --- kactor's own keys ---
    def("kactor.http.address", String, Some("127.0.0.1:9464"), NonEmpty, "host:port of /metrics, /healthz, /readyz."),
    def("kactor.log.format", String, Some("text"), OneOf(&["text", "json"]), "Log line format."),
    def("kactor.log.level", String, Some("info"), NonEmpty, "tracing filter directive (RUST_LOG overrides)."),
];

pub fn find_def(name: &str) -> Option<&'static ConfigDef> {
    BROKER_CONFIG_DEFS.iter().find(|d| d.name == name)
}
