//! The broker config definitions (Kafka's `KafkaConfig` / `ServerLogConfigs` /
//! `SocketServerConfigs` / `ReplicationConfigs` / `KRaftConfigs` key tables): name, type,
//! default and validation for every key kactor knows. Names, types and defaults are Kafka 4.4's
//! (the `default` of each entry is what Kafka's `ConfigDef` says); the handful of keys a
//! no-argument `kactor` needs to be a working combined-mode node get a value from
//! [`SINGLE_NODE_DEFAULTS`], which DescribeConfigs reports as STATIC_BROKER_CONFIG (it is part
//! of the node's start-up configuration) followed by Kafka's default as DEFAULT_CONFIG.
//! Keys marked "not used by kactor" are accepted, validated and described with Kafka's default
//! so tools and config files that set them keep working, but change nothing in kactor.

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
    def("node.id", Int, None, AtLeast(0), "Id of this node in the cluster (kactor single-node default: 1)."),
    def("process.roles", List, None, ListOf(&["broker", "controller"]),
        "Roles of this node: broker, controller, or both (kactor single-node default: combined)."),
    def("controller.quorum.voters", List, Some(""), Any,
        "Static controller quorum as id@host:port entries (kactor single-node default: 1@127.0.0.1:9093)."),
    def("controller.quorum.bootstrap.servers", List, Some(""), Any,
        "host:port of controllers used to discover a dynamic quorum."),
    def("controller.listener.names", List, None, Any,
        "Listener names used by the controller (kactor single-node default: CONTROLLER)."),
    def("controller.quorum.election.timeout.ms", Int, Some("1000"), AtLeast(0), "Raft election timeout."),
    def("controller.quorum.fetch.timeout.ms", Int, Some("2000"), AtLeast(0), "Raft fetch timeout before a follower votes (not used by kactor yet: one-voter quorum)."),
    def("controller.quorum.election.backoff.max.ms", Int, Some("1000"), AtLeast(0), "Raft election backoff ceiling (not used by kactor yet: one-voter quorum)."),
    def("controller.quorum.append.linger.ms", Int, Some("25"), AtLeast(0), "Raft batching linger (not used by kactor: each controller write is appended at once)."),
    def("controller.quorum.request.timeout.ms", Int, Some("2000"), AtLeast(0), "Raft request timeout (not used by kactor yet: one-voter quorum)."),
    def("controller.quorum.retry.backoff.ms", Int, Some("20"), AtLeast(0), "Raft retry backoff (not used by kactor yet: one-voter quorum)."),
    def("broker.heartbeat.interval.ms", Int, Some("2000"), AtLeast(0), "Broker to controller heartbeat interval."),
    def("broker.session.timeout.ms", Int, Some("9000"), AtLeast(0), "Broker lease length at the controller."),
    def("broker.rack", String, None, Any, "Rack of this broker."),
    def("metadata.log.dir", String, None, Any, "Directory of __cluster_metadata (default: first log dir)."),
    def("metadata.log.segment.bytes", Int, Some("1073741824"), AtLeast(12), "Segment size of the metadata log."),
    def("metadata.log.segment.ms", Long, Some("604800000"), AtLeast(0), "Segment roll time of the metadata log."),
    def("metadata.max.retention.bytes", Long, Some("104857600"), Any, "Metadata log retention by size (not used by kactor yet: no metadata snapshots)."),
    def("metadata.max.retention.ms", Long, Some("604800000"), Any, "Metadata log retention by time (not used by kactor yet: no metadata snapshots)."),
    def("metadata.log.max.record.bytes.between.snapshots", Long, Some("20971520"), AtLeast(1), "Bytes of metadata log between snapshots (not used by kactor yet: no metadata snapshots)."),
    // --- listeners and sockets ---
    def("listeners", List, Some("PLAINTEXT://:9092"), NonEmpty,
        "NAME://host:port listeners (kactor single-node default: PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093)."),
    def("advertised.listeners", List, None, Any, "Listeners published to clients (default: listeners)."),
    def("listener.security.protocol.map", String,
        Some("SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"), Any,
        "Listener name to security protocol."),
    def("inter.broker.listener.name", String, None, Any, "Listener used between brokers (not used by kactor yet: no inter-broker traffic)."),
    def("security.inter.broker.protocol", String, Some("PLAINTEXT"),
        OneOf(&["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]), "Protocol used between brokers (not used by kactor yet: no inter-broker traffic)."),
    dynamic("num.network.threads", Int, Some("3"), AtLeast(1), "Network arbiters (connection handling) (dynamic in Kafka; kactor stores a dynamic value but does not apply it)."),
    dynamic("num.io.threads", Int, Some("8"), AtLeast(1), "Partition arbiters (request processing) (dynamic in Kafka; kactor stores a dynamic value but does not apply it)."),
    dynamic("background.threads", Int, Some("10"), AtLeast(1), "Background task threads (not used by kactor)."),
    def("socket.send.buffer.bytes", Int, Some("102400"), Any, "SO_SNDBUF; -1 = OS default."),
    def("socket.receive.buffer.bytes", Int, Some("102400"), Any, "SO_RCVBUF; -1 = OS default."),
    def("socket.request.max.bytes", Int, Some("104857600"), AtLeast(1), "Largest request frame accepted."),
    def("socket.listen.backlog.size", Int, Some("50"), AtLeast(1), "listen(2) backlog."),
    dynamic("max.connections", Int, Some(INT_MAX), AtLeast(0), "Connection limit across listeners."),
    dynamic("max.connections.per.ip", Int, Some(INT_MAX), AtLeast(0), "Connection limit per client address."),
    dynamic("max.connections.per.ip.overrides", String, Some(""), Any, "host:limit overrides."),
    def("connections.max.idle.ms", Long, Some("600000"), Any, "Idle connections are closed after this."),
    def("queued.max.requests", Int, Some("500"), AtLeast(1), "In-flight requests per connection before reading pauses."),
    // Any value, as in Kafka (no validator there): ≤ 0 is no bound; the cross-key rule in
    // config::validate_cross asks a bound to hold the largest request.
    def("queued.max.request.bytes", Long, Some("-1"), Any, "Bytes of requests read and not yet handled, shared by all broker listeners' connections (controller listeners get a pool of the same size); a connection stops reading while the pool is empty. -1 (any value ≤ 0) = unbounded; else at least socket.request.max.bytes."),
    def("request.timeout.ms", Int, Some("30000"), AtLeast(0), "Broker-side request timeout."),
    dynamic("max.connection.creation.rate", Int, Some(INT_MAX), AtLeast(0), "New connections per second (not used by kactor)."),
    def("socket.connection.setup.timeout.ms", Long, Some("10000"), Any, "Outgoing connection set-up timeout (not used by kactor)."),
    def("socket.connection.setup.timeout.max.ms", Long, Some("30000"), Any, "Outgoing connection set-up timeout ceiling (not used by kactor)."),
    def("controller.socket.timeout.ms", Int, Some("30000"), Any, "Broker to controller socket timeout (not used by kactor)."),
    def("initial.broker.registration.timeout.ms", Int, Some("60000"), Any, "Time to wait for the first broker registration (not used by kactor: it retries until stopped)."),
    // --- logs ---
    def("log.dirs", List, None, Any, "Data directories (kactor single-node default: ./data)."),
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
    def("log.cleaner.enable", Boolean, Some("true"), Any, "Run the log cleaner (not used by kactor)."),
    dynamic("log.cleaner.threads", Int, Some("1"), AtLeast(0), "Log cleaner threads (dynamic in Kafka; kactor stores a dynamic value but does not apply it)."),
    dynamic("log.cleaner.delete.retention.ms", Long, Some("86400000"), AtLeast(0), "Tombstone retention."),
    dynamic("log.cleaner.min.compaction.lag.ms", Long, Some("0"), AtLeast(0), "Minimum age before compaction."),
    dynamic("log.cleaner.min.cleanable.ratio", Double, Some("0.5"), Any, "Dirty ratio that triggers cleaning."),
    dynamic("log.index.size.max.bytes", Int, Some("10485760"), AtLeast(4), "Offset index size limit."),
    dynamic("log.index.interval.bytes", Int, Some("4096"), AtLeast(0), "Bytes between index entries."),
    dynamic("log.flush.interval.messages", Long, Some(LONG_MAX), AtLeast(1), "Messages between fsyncs."),
    dynamic("log.flush.interval.ms", Long, None, Any, "Time between fsyncs."),
    def("log.flush.scheduler.interval.ms", Long, Some(LONG_MAX), Any, "Flush check period."),
    def("log.flush.offset.checkpoint.interval.ms", Int, Some("60000"), AtLeast(0), "Recovery point checkpoint period."),
    def("log.flush.start.offset.checkpoint.interval.ms", Int, Some("60000"), AtLeast(0), "Log start offset checkpoint period (not used by kactor: written with the recovery points)."),
    dynamic("log.segment.delete.delay.ms", Long, Some("60000"), AtLeast(0), "Delay before a .deleted file is removed."),
    dynamic("log.preallocate", Boolean, Some("false"), Any, "Preallocate segment files."),
    dynamic("log.message.timestamp.type", String, Some("CreateTime"), OneOf(&["CreateTime", "LogAppendTime"]), "Timestamp type of appended batches."),
    dynamic("log.message.timestamp.before.max.ms", Long, Some(LONG_MAX), AtLeast(0), "Allowed timestamp lag into the past."),
    dynamic("log.message.timestamp.after.max.ms", Long, Some("3600000"), AtLeast(0), "Allowed timestamp lead into the future."),
    dynamic("num.recovery.threads.per.data.dir", Int, Some("2"), AtLeast(1), "Recovery threads per data dir (not used by kactor)."),
    dynamic("message.max.bytes", Int, Some("1048588"), AtLeast(0), "Largest record batch accepted."),
    dynamic("compression.type", String, Some("producer"),
        OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]), "Compression of stored batches."),
    def("auto.create.topics.enable", Boolean, Some("true"), Any, "Create topics on Metadata requests."),
    def("delete.topic.enable", Boolean, Some("true"), Any, "Allow DeleteTopics."),
    dynamic("unclean.leader.election.enable", Boolean, Some("false"), Any, "Allow out-of-ISR leaders."),
    def("auto.leader.rebalance.enable", Boolean, Some("true"), Any, "Move leadership back to preferred replicas (not used by kactor yet: single node)."),
    dynamic("log.cleaner.max.compaction.lag.ms", Long, Some(LONG_MAX), AtLeast(1), "Maximum time a record stays uncompacted."),
    dynamic("log.cleaner.backoff.ms", Long, Some("15000"), AtLeast(0), "Cleaner sleep when there is nothing to clean (not used by kactor)."),
    dynamic("log.cleaner.dedupe.buffer.size", Long, Some("134217728"), Any, "Cleaner dedupe buffer across threads (not used by kactor)."),
    dynamic("log.cleaner.io.buffer.load.factor", Double, Some("0.9"), Any, "Cleaner dedupe buffer load factor (not used by kactor)."),
    dynamic("log.cleaner.io.buffer.size", Int, Some("524288"), AtLeast(0), "Cleaner I/O buffer size (not used by kactor)."),
    dynamic("log.cleaner.io.max.bytes.per.second", Double, Some("1.7976931348623157E308"), Any, "Cleaner I/O throttle (not used by kactor)."),
    dynamic("log.local.retention.ms", Long, Some("-2"), AtLeast(-2), "Local retention with tiered storage; -2 = log.retention.ms (not used by kactor: no tiered storage)."),
    dynamic("log.local.retention.bytes", Long, Some("-2"), AtLeast(-2), "Local retention bytes with tiered storage; -2 = log.retention.bytes (not used by kactor: no tiered storage)."),
    def("log.dir.failure.timeout.ms", Long, Some("30000"), AtLeast(1), "Time to report a failed log dir before shutting down (not used by kactor)."),
    dynamic("max.decompressed.message.bytes", Int, Some("2147483639"), AtLeast(0), "Largest decompressed batch accepted when recompressing (not used by kactor)."),
    dynamic("compression.gzip.level", Int, Some("-1"), Any, "gzip level when the broker compresses; -1 = codec default (not used by kactor: codec default)."),
    dynamic("compression.lz4.level", Int, Some("9"), Between(1, 17), "lz4 level when the broker compresses (not used by kactor: codec default)."),
    dynamic("compression.zstd.level", Int, Some("3"), Between(-131072, 22), "zstd level when the broker compresses (not used by kactor: codec default)."),
    def("controlled.shutdown.enable", Boolean, Some("true"), Any, "Controlled shutdown on SIGTERM (kactor always shuts down through the controller)."),
    def("leader.imbalance.check.interval.seconds", Long, Some("300"), AtLeast(1), "Preferred leader check period (not used by kactor)."),
    def("delete.records.purgatory.purge.interval.requests", Int, Some("1"), Any, "DeleteRecords purgatory purge period (not used by kactor)."),
    def("authorizer.class.name", String, Some(""), Any, "Authorizer class (not used by kactor: no authorization yet)."),
    // --- replication and fetch ---
    def("replica.lag.time.max.ms", Long, Some("30000"), Any, "Time before a lagging follower leaves the ISR (not used by kactor yet: no replication)."),
    def("replica.fetch.max.bytes", Int, Some("1048576"), AtLeast(0), "Follower fetch size per partition (not used by kactor yet: no replication)."),
    def("replica.fetch.wait.max.ms", Int, Some("500"), Any, "Follower fetch long-poll time (not used by kactor yet: no replication)."),
    def("replica.fetch.min.bytes", Int, Some("1"), Any, "Follower fetch minimum bytes (not used by kactor yet: no replication)."),
    def("replica.fetch.response.max.bytes", Int, Some("10485760"), AtLeast(0), "Follower fetch response size (not used by kactor yet: no replication)."),
    def("replica.fetch.backoff.ms", Int, Some("1000"), AtLeast(0), "Follower backoff after an error (not used by kactor yet: no replication)."),
    dynamic("num.replica.fetchers", Int, Some("1"), Any, "Fetchers per source broker."),
    def("replica.high.watermark.checkpoint.interval.ms", Long, Some("5000"), Any, "HW checkpoint period (not used by kactor yet: no replication)."),
    def("fetch.max.bytes", Int, Some("57671680"), AtLeast(1024), "Largest fetch response (not used by kactor)."),
    def("max.incremental.fetch.session.cache.slots", Int, Some("1000"), AtLeast(0), "Incremental fetch sessions kept."),
    def("fetch.purgatory.purge.interval.requests", Int, Some("1000"), Any, "Fetch purgatory purge period (not used by kactor)."),
    def("producer.purgatory.purge.interval.requests", Int, Some("1000"), Any, "Produce purgatory purge period (not used by kactor)."),
    def("replica.socket.timeout.ms", Int, Some("30000"), Any, "Follower fetch socket timeout (not used by kactor)."),
    def("replica.socket.receive.buffer.bytes", Int, Some("65536"), Any, "Follower fetch SO_RCVBUF (not used by kactor)."),
    // --- internal topics ---
    def("offsets.topic.num.partitions", Int, Some("50"), AtLeast(1), "__consumer_offsets partitions."),
    def("offsets.topic.replication.factor", Short, Some("3"), AtLeast(1),
        "__consumer_offsets replication factor (kactor single-node default: 1; Kafka: 3)."),
    def("offsets.topic.segment.bytes", Int, Some("104857600"), AtLeast(1), "__consumer_offsets segment size."),
    def("offsets.retention.minutes", Int, Some("10080"), AtLeast(1), "Committed offsets retention."),
    def("transaction.state.log.num.partitions", Int, Some("50"), AtLeast(1), "__transaction_state partitions."),
    def("transaction.state.log.replication.factor", Short, Some("3"), AtLeast(1),
        "__transaction_state replication factor (kactor single-node default: 1; Kafka: 3)."),
    def("transaction.state.log.min.isr", Int, Some("2"), AtLeast(1),
        "__transaction_state min ISR (kactor single-node default: 1; Kafka: 2)."),
    def("group.initial.rebalance.delay.ms", Int, Some("3000"), Any, "Delay of the first classic rebalance."),
    // --- consumer groups ---
    def("group.min.session.timeout.ms", Int, Some("6000"), Any, "Smallest classic group session timeout."),
    def("group.max.session.timeout.ms", Int, Some("1800000"), Any, "Largest classic group session timeout."),
    def("group.max.size", Int, Some(INT_MAX), AtLeast(1), "Members per classic group."),
    def("group.coordinator.rebalance.protocols", List, Some("classic,consumer,streams"), Any, "Enabled group protocols (not used by kactor: classic and consumer are always on, streams is not served)."),
    def("group.coordinator.threads", Int, Some("4"), AtLeast(1), "Group coordinator threads (not used by kactor: one actor per __consumer_offsets partition)."),
    def("group.consumer.session.timeout.ms", Int, Some("45000"), AtLeast(1), "Consumer group (KIP-848) session timeout."),
    def("group.consumer.min.session.timeout.ms", Int, Some("45000"), AtLeast(1), "Smallest consumer group session timeout (not used by kactor)."),
    def("group.consumer.max.session.timeout.ms", Int, Some("60000"), AtLeast(1), "Largest consumer group session timeout (not used by kactor)."),
    def("group.consumer.heartbeat.interval.ms", Int, Some("5000"), AtLeast(1), "Consumer group heartbeat interval."),
    def("group.consumer.min.heartbeat.interval.ms", Int, Some("5000"), AtLeast(1), "Smallest consumer group heartbeat interval (not used by kactor)."),
    def("group.consumer.max.heartbeat.interval.ms", Int, Some("15000"), AtLeast(1), "Largest consumer group heartbeat interval (not used by kactor)."),
    def("group.consumer.max.size", Int, Some(INT_MAX), AtLeast(1), "Members per consumer group."),
    def("group.consumer.assignors", List, Some("uniform,range"), Any, "Server-side assignors (names or class names)."),
    def("group.consumer.migration.policy", String, Some("bidirectional"), Any, "Classic/consumer group conversions: disabled, downgrade, upgrade, bidirectional."),
    def("offsets.retention.check.interval.ms", Long, Some("600000"), AtLeast(1), "Expired offsets check period."),
    def("offset.metadata.max.bytes", Int, Some("4096"), Any, "Largest commit metadata string."),
    def("offsets.commit.timeout.ms", Int, Some("5000"), AtLeast(1), "Offset commit write timeout (not used by kactor)."),
    def("offsets.load.buffer.size", Int, Some("5242880"), AtLeast(1), "Read size when loading offsets (not used by kactor)."),
    def("offsets.topic.compression.codec", Int, Some("0"), Any, "Compression of __consumer_offsets writes (not used by kactor: uncompressed)."),
    // --- transactions and producer ids ---
    def("transaction.max.timeout.ms", Int, Some("900000"), AtLeast(1), "Largest transaction timeout a producer may ask for."),
    def("transaction.abort.timed.out.transaction.cleanup.interval.ms", Int, Some("10000"), AtLeast(1), "Timed-out transaction abort check period."),
    def("transaction.remove.expired.transaction.cleanup.interval.ms", Int, Some("3600000"), AtLeast(1), "How often transactional ids idle past transactional.id.expiration.ms are removed."),
    def("transactional.id.expiration.ms", Int, Some("604800000"), AtLeast(1), "Idle time after which a finished transactional id is removed (tombstone in __transaction_state)."),
    def("transaction.state.log.segment.bytes", Int, Some("104857600"), AtLeast(1), "__transaction_state segment size."),
    def("transaction.state.log.load.buffer.size", Int, Some("5242880"), AtLeast(1), "Read size when loading transactions (not used by kactor)."),
    dynamic("transaction.partition.verification.enable", Boolean, Some("true"), Any, "Verify partitions are in the transaction before appending (Produce < v12, TxnOffsetCommit < v5)."),
    def("transaction.two.phase.commit.enable", Boolean, Some("false"), Any, "KIP-939 two-phase commit (not used by kactor)."),
    dynamic("producer.id.expiration.ms", Int, Some("86400000"), AtLeast(1), "Idle time after which a producer id's state (and a pending transaction verification) is removed from a partition; an open transaction keeps it."),
    def("producer.id.expiration.check.interval.ms", Int, Some("600000"), AtLeast(1), "How often partitions remove producer ids idle past producer.id.expiration.ms (an internal key in Kafka, whose DescribeConfigs lists it only when set; kactor always lists it)."),
    // --- kactor's own keys ---
    def("kactor.http.address", String, Some("127.0.0.1:9464"), NonEmpty, "host:port of /metrics, /healthz, /readyz."),
    def("kactor.log.format", String, Some("text"), OneOf(&["text", "json"]), "Log line format."),
    def("kactor.log.level", String, Some("info"), NonEmpty, "tracing filter directive (RUST_LOG overrides)."),
];

/// The values a no-argument `kactor` runs with where Kafka has no usable default (Kafka requires
/// `node.id`, `process.roles` and friends, and defaults internal topics to three replicas): a
/// working single-node combined-mode broker on loopback. They sit between Kafka's defaults and
/// the properties file, and DescribeConfigs reports them as STATIC_BROKER_CONFIG.
pub const SINGLE_NODE_DEFAULTS: &[(&str, &str)] = &[
    ("node.id", "1"),
    ("process.roles", "broker,controller"),
    ("controller.quorum.voters", "1@127.0.0.1:9093"),
    ("controller.listener.names", "CONTROLLER"),
    (
        "listeners",
        "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    ),
    ("log.dirs", "./data"),
    ("offsets.topic.replication.factor", "1"),
    ("transaction.state.log.replication.factor", "1"),
    ("transaction.state.log.min.isr", "1"),
];

pub fn find_def(name: &str) -> Option<&'static ConfigDef> {
    BROKER_CONFIG_DEFS.iter().find(|d| d.name == name)
}
