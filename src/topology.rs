//! Process assembly (Kafka's `KafkaRaftServer` / `BrokerServer` / `ControllerServer` start-up):
//! which actor runs on which arbiter, which addresses each gets, and the request router's
//! table. This is the one place cross-component `Recipient`s are wired (DESIGN.md §1.2).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use kactor_actors::controller::apis::{
    self as controller_apis, BrokerConfigEntry, MetadataApis, QuorumView,
};
use kactor_actors::controller::core::topic_configs;
use kactor_actors::controller::core::ControllerConfig;
use kactor_actors::controller::startup::{
    start_kraft, KraftConfig, KraftHandles, MetadataLogSettings, QuorumSettings,
};
use kactor_actors::group::apis::{self as group_apis, GroupApis, OffsetsTopicCreator};
use kactor_actors::group::core::GroupCoordinatorConfig;
use kactor_actors::group::messages::CompleteGroupTransaction;
use kactor_actors::group::GroupCoordinatorManagerActor;
use kactor_actors::loggers::BrokerLoggers;
use kactor_actors::metadata::actor::SnapshotPolicy;
use kactor_actors::metadata::lifecycle::{
    BeginControlledShutdown, BrokerLifecycleConfig, BrokerLifecycleState,
};
use kactor_actors::metadata::messages::{SubscribeBrokerConfigChanges, SubscribePartitionChanges};
use kactor_actors::metrics;
use kactor_actors::network::api_versions::{bootstrap_finalized_features, supported_features};
use kactor_actors::network::inter_broker::{InterBrokerClient, InterBrokerConfig};
use kactor_actors::network::{
    features_channel, BoundListener, ConnectionLimits, EnableBrokerListeners, ListenerKind,
    ListenerSpec, NetworkConfig, RequestRouter, SocketServerActor, StopAccepting,
};
use kactor_actors::partition::apis as partition_apis;
use kactor_actors::partition::messages::MarkStrayLogs;
use kactor_actors::partition::startup::{start_partitions, PartitionLayer, PartitionLayerConfig};
use kactor_actors::raft::core::Endpoint;
use kactor_actors::runtime::{ActorMetrics, ArbiterPools, MeteredAddr};
use kactor_actors::share::coordinator::actor::{
    ShareCoordinatorConfig, ShareCoordinatorManagerActor,
};
use kactor_actors::share::coordinator::apis::{ShareStateClient, ShareStateTopicCreator};
use kactor_actors::txn::actor::start_producer_id_manager;
use kactor_actors::txn::apis::{self as txn_apis, TxnCoordinatorApis, TxnStateTopicCreator};
use kactor_actors::txn::manager::{TransactionCoordinatorManagerActor, TxnManagerConfig};
use kactor_actors::txn::markers::LocalMarkers;
use kactor_protocol::metadata::register_broker_record::BrokerEndpoint;
use kactor_protocol::Uuid;

use crate::config::{defs, BrokerConfig, KafkaConfigSource};

/// What a started node holds on to until shutdown.
pub struct Node {
    pub pools: ArbiterPools,
    pub socket_server: kactor_actors::runtime::MeteredAddr<SocketServerActor>,
    pub listeners: Vec<BoundListener>,
    pub http_address: SocketAddr,
    pub partitions: PartitionLayer,
    pub kraft: KraftHandles,
    /// Held so the managers live as long as the node, whatever their timers do.
    pub group_manager: MeteredAddr<GroupCoordinatorManagerActor>,
    pub txn_manager: Option<MeteredAddr<TransactionCoordinatorManagerActor>>,
    pub share_coordinator: MeteredAddr<ShareCoordinatorManagerActor>,
    /// How long shutdown waits for the controller to move this broker's leaderships away
    /// (`controlled.shutdown.enable`; None: off).
    pub controlled_shutdown: Option<Duration>,
}

/// The network settings the SocketServerActor needs, from the broker config.
pub fn network_config(cfg: &BrokerConfig) -> anyhow::Result<NetworkConfig> {
    let controller_names = cfg.get_list("controller.listener.names");
    let listeners = cfg
        .listeners()
        .into_iter()
        .filter(|l| {
            // A broker-only node does not serve controller listeners, and vice versa.
            let is_controller_listener = controller_names.contains(&l.name);
            if is_controller_listener {
                cfg.is_controller()
            } else {
                cfg.is_broker()
            }
        })
        .map(|l| {
            Ok(ListenerSpec {
                kind: if controller_names.contains(&l.name) {
                    ListenerKind::Controller
                } else {
                    ListenerKind::Broker
                },
                security: crate::security::listener_security(cfg, &l.name)?,
                name: l.name,
                host: l.host,
                port: l.port,
            })
        })
        .collect::<Result<Vec<_>, kactor_actors::security::SecurityError>>()?;
    Ok(NetworkConfig {
        listeners,
        listen_backlog_size: cfg.get_i32("socket.listen.backlog.size") as u32,
        socket_send_buffer_bytes: cfg.get_i32("socket.send.buffer.bytes"),
        socket_receive_buffer_bytes: cfg.get_i32("socket.receive.buffer.bytes"),
        max_connections: cfg.get_i32("max.connections") as usize,
        max_connections_per_ip: cfg.get_i32("max.connections.per.ip") as usize,
        max_connections_per_ip_overrides: per_ip_overrides(cfg),
        queued_max_request_bytes: cfg.get_i64("queued.max.request.bytes"),
        limits: ConnectionLimits {
            socket_request_max_bytes: cfg.get_i32("socket.request.max.bytes") as usize,
            queued_max_requests: cfg.get_i32("queued.max.requests") as usize,
            connections_max_idle_ms: cfg.get_i64("connections.max.idle.ms"),
        },
    })
}

/// `max.connections.per.ip.overrides` (`host:limit,...`); validated at load.
fn per_ip_overrides(cfg: &BrokerConfig) -> HashMap<IpAddr, usize> {
    cfg.get_list("max.connections.per.ip.overrides")
        .iter()
        .filter_map(|e| {
            let (host, limit) = e.rsplit_once(':')?;
            let ip = (host, 0).to_socket_addrs().ok()?.next()?.ip();
            Some((ip, limit.trim().parse().ok()?))
        })
        .collect()
}

/// `cluster.id` and `directory.id` of each log dir, from the meta.properties written by
/// `kactor format` (or the automatic format of a lone voter).
fn read_log_dir_identity(cfg: &BrokerConfig) -> anyhow::Result<(String, Vec<Uuid>)> {
    let mut cluster_id = None;
    let mut dir_ids = Vec::new();
    for dir in cfg.log_dirs() {
        let path = dir.join("meta.properties");
        let props = crate::config::read_properties(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        cluster_id = cluster_id.or_else(|| props.get("cluster.id").cloned());
        if let Some(id) = props
            .get("directory.id")
            .and_then(|v| v.parse::<Uuid>().ok())
        {
            dir_ids.push(id);
        }
    }
    let cluster_id = cluster_id.context("no cluster.id in any log dir's meta.properties")?;
    Ok((cluster_id, dir_ids))
}

/// The broker's own properties as plain (name, value) pairs, for components that resolve topic
/// config defaults from broker settings.
fn broker_properties(cfg: &BrokerConfig) -> BTreeMap<String, String> {
    cfg.entries()
        .filter_map(|(k, e)| Some((k.to_string(), e.value.clone()?)))
        .collect()
}

/// The keys this node was started with (file, environment, `--override`, the single-node
/// values): the layer Kafka calls STATIC_BROKER_CONFIG when it resolves a topic's configs. A key
/// left at its default is not in it, so a topic config that falls back to the built-in default
/// reports DEFAULT_CONFIG, as Kafka's CreateTopics response and DescribeConfigs do.
fn static_broker_properties(cfg: &BrokerConfig) -> BTreeMap<String, String> {
    cfg.entries()
        .filter(|(_, e)| e.origin.kafka_source() == KafkaConfigSource::StaticBrokerConfig)
        .filter_map(|(k, e)| Some((k.to_string(), e.value.clone()?)))
        .collect()
}

/// The controller's check of a broker key's dynamic values, from its type and validator; None
/// where Kafka checks nothing beyond the type (strings, classes, passwords, free lists).
fn broker_value_kind(d: &defs::ConfigDef) -> Option<topic_configs::ConfigType> {
    use defs::{ConfigType as T, Validator as V};
    use topic_configs::ConfigType as K;
    let (min, max, allowed) = match d.validator {
        V::AtLeast(lo) => (Some(lo), None, None),
        V::Between(lo, hi) => (Some(lo), Some(hi), None),
        V::OneOf(allowed) | V::ListOf(allowed) => (None, None, Some(allowed)),
        V::Any | V::NonEmpty => (None, None, None),
    };
    let int = |lo: i64, hi: i64| K::Int {
        min: min.unwrap_or(lo).max(lo),
        max: max.unwrap_or(hi).min(hi),
    };
    match d.ty {
        T::Int => Some(int(i32::MIN as i64, i32::MAX as i64)),
        T::Short => Some(int(i16::MIN as i64, i16::MAX as i64)),
        T::Long => Some(K::Long {
            min: min.unwrap_or(i64::MIN),
        }),
        T::Double => Some(K::Double {
            min: min.map_or(f64::MIN, |m| m as f64),
            max: max.map_or(f64::MAX, |m| m as f64),
        }),
        T::Boolean => Some(K::Boolean),
        T::String => allowed.map(K::Enum),
        T::List => allowed.map(K::List),
        T::Class | T::Password => None,
    }
}

/// The broker config rows DescribeConfigs reports, in the controller API's shape.
fn broker_config_entries(cfg: &BrokerConfig) -> Vec<BrokerConfigEntry> {
    cfg.describe()
        .into_iter()
        .map(|d| BrokerConfigEntry {
            name: d.name.to_string(),
            value: d.value,
            source: d.source as i8,
            config_type: d.config_type as i8,
            read_only: d.read_only,
            sensitive: d.sensitive,
            synonyms: d
                .synonyms
                .into_iter()
                .map(|(n, v, src)| (n, Some(v), src as i8))
                .collect(),
            documentation: Some(d.documentation.to_string()).filter(|s| !s.is_empty()),
        })
        .collect()
}

/// The endpoints this broker registers with the controller (advertised, non-controller).
fn broker_endpoints(cfg: &BrokerConfig) -> Vec<BrokerEndpoint> {
    let protocols = cfg.security_protocol_map();
    // Clients are told the advertised address of each listener (Kafka's
    // `advertised.listeners`, per listener name), falling back to the bound one.
    let advertised = cfg.advertised_listeners();
    cfg.broker_listeners()
        .into_iter()
        .map(|l| {
            advertised
                .iter()
                .find(|a| a.name == l.name)
                .cloned()
                .unwrap_or(l)
        })
        .map(|e| BrokerEndpoint {
            security_protocol: security_protocol_id(
                protocols
                    .get(&e.name)
                    .map(String::as_str)
                    .unwrap_or(&e.name),
            ),
            name: e.name,
            host: e.host,
            port: e.port,
            ..Default::default()
        })
        .collect()
}

/// Kafka's `SecurityProtocol` ids.
fn security_protocol_id(name: &str) -> i16 {
    match name {
        "SSL" => 1,
        "SASL_PLAINTEXT" => 2,
        "SASL_SSL" => 3,
        _ => 0,
    }
}

/// The other voters' controller listeners and the quorum timeouts. A voter in
/// `controller.quorum.voters` is reached on the first of `controller.listener.names`, as Kafka
/// names it.
fn quorum_settings(cfg: &BrokerConfig, cluster_id: &str) -> QuorumSettings {
    let listener = cfg
        .get_list("controller.listener.names")
        .into_iter()
        .next()
        .unwrap_or_else(|| "CONTROLLER".to_string());
    QuorumSettings {
        voter_endpoints: cfg
            .quorum_voters()
            .into_iter()
            .map(|v| {
                (
                    v.node_id,
                    vec![Endpoint {
                        listener: listener.clone(),
                        host: v.host,
                        port: v.port,
                    }],
                )
            })
            .collect(),
        cluster_id: cluster_id.to_string(),
        fetch_timeout_ms: cfg.get_i64("controller.quorum.fetch.timeout.ms"),
        election_backoff_max_ms: cfg.get_i64("controller.quorum.election.backoff.max.ms"),
        request_timeout_ms: cfg.get_i64("controller.quorum.request.timeout.ms"),
        retry_backoff_ms: cfg.get_i64("controller.quorum.retry.backoff.ms"),
        fetch_max_bytes: cfg.get_i32("controller.quorum.fetch.max.bytes"),
        // Kafka's `canBecomeVoter`: only a controller asks to become a voter.
        auto_join: cfg.get_bool("controller.quorum.auto.join.enable") && cfg.is_controller(),
        fetch_snapshot_max_bytes: cfg.get_i32("controller.quorum.fetch.snapshot.max.bytes"),
        // KIP-853 names a voter by its metadata log dir's id (kactor format writes it).
        directory_id: crate::config::read_properties(
            &cfg.metadata_log_dir().join("meta.properties"),
        )
        .ok()
        .and_then(|p| p.get("directory.id")?.parse::<Uuid>().ok())
        .unwrap_or(Uuid::ZERO),
        // Read only when controller.quorum.voters is empty (a dynamic quorum).
        bootstrap_servers: cfg.quorum_bootstrap_servers(),
        local_listeners: cfg.controller_endpoints(),
        controller_listener: listener,
    }
}

/// Starts every component. Must run inside the actix `System`.
pub async fn start(cfg: &BrokerConfig, loggers: Arc<BrokerLoggers>) -> anyhow::Result<Node> {
    // Key stores and SASL settings are read first: a listener that cannot be secured stops
    // start-up before any data is touched.
    let network = network_config(cfg)?;
    let readiness = metrics::readiness();
    readiness.require("listeners");
    readiness.require("metadata");

    let pools = ArbiterPools::start(
        cfg.get_i32("num.network.threads") as usize,
        cfg.get_i32("num.io.threads") as usize,
    );
    let (finalized_features, features) =
        features_channel(supported_features(), bootstrap_finalized_features());

    let node_id = cfg.node_id();
    let (cluster_id, log_dir_ids) = read_log_dir_identity(cfg)?;
    let log_dirs = cfg.log_dirs();
    let metadata_log_dir = cfg.metadata_log_dir();
    let voters: BTreeSet<i32> = cfg.quorum_voters().iter().map(|v| v.node_id).collect();
    let voters_n = voters.len();
    let controller_listeners: Vec<(String, String, u16)> = {
        let names = cfg.get_list("controller.listener.names");
        cfg.listeners()
            .into_iter()
            .filter(|l| names.contains(&l.name))
            .map(|l| (l.name, l.host, l.port))
            .collect()
    };
    let controller_cfg = cfg.is_controller().then(|| ControllerConfig {
        node_id,
        cluster_id: cluster_id.clone(),
        num_partitions: cfg.get_i32("num.partitions"),
        default_replication_factor: cfg.get_i32("default.replication.factor") as i16,
        min_insync_replicas: cfg.get_i32("min.insync.replicas"),
        broker_session_timeout_ms: cfg.get_i64("broker.session.timeout.ms"),
        delete_topic_enable: cfg.get_bool("delete.topic.enable"),
        max_idle_interval_ms: cfg.get_i32("metadata.max.idle.interval.ms") as i64,
        leader_imbalance_check_interval_ms: cfg.get_bool("auto.leader.rebalance.enable").then(
            || {
                cfg.get_i64("leader.imbalance.check.interval.seconds")
                    .saturating_mul(1000)
            },
        ),
        // Kafka's internal key (defineInternal): honoured when set, never described.
        unclean_leader_election_interval_ms: cfg
            .get_opt_i64("unclean.leader.election.interval.ms")
            .filter(|ms| *ms >= 1)
            .unwrap_or(300_000),
        static_broker_configs: static_broker_properties(cfg),
        broker_config_table: defs::BROKER_CONFIG_DEFS
            .iter()
            .map(|d| {
                let dynamic = d.mutability == defs::Mutability::ClusterWide;
                (d.name.to_string(), dynamic)
            })
            .collect(),
        broker_value_kinds: defs::BROKER_CONFIG_DEFS
            .iter()
            .filter_map(|d| Some((d.name.to_string(), broker_value_kind(d)?)))
            .collect(),
        broker_values: cfg
            .entries()
            .filter_map(|(k, e)| Some((k.to_string(), e.value.clone()?)))
            .collect(),
    });
    let broker_cfg = cfg.is_broker().then(|| BrokerLifecycleConfig {
        node_id,
        cluster_id: cluster_id.clone(),
        incarnation_id: Uuid::random(),
        listeners: broker_endpoints(cfg),
        rack: cfg.get_str("broker.rack").map(str::to_string),
        log_dirs: log_dir_ids,
        heartbeat_interval_ms: cfg.get_i64("broker.heartbeat.interval.ms") as u64,
    });
    let kraft = start_kraft(
        &pools.controller(),
        KraftConfig {
            node_id,
            voters,
            metadata_log_dir,
            election_timeout_ms: cfg.get_i64("controller.quorum.election.timeout.ms"),
            // Kafka 4.4 keeps `metadata.log.segment.bytes` at 8 MiB or more and lets tests go
            // below with its internal key (defineInternal): honoured when set, never described.
            metadata_log_segment_bytes: cfg
                .get_opt_i64("internal.metadata.log.segment.bytes")
                .filter(|b| *b >= 12)
                .map_or_else(
                    || cfg.get_i32("metadata.log.segment.bytes"),
                    |b| b.min(i32::MAX as i64) as i32,
                ),
            metadata_log: MetadataLogSettings {
                snapshots: SnapshotPolicy {
                    max_bytes: cfg
                        .get_i64("metadata.log.max.record.bytes.between.snapshots")
                        .max(1) as u64,
                    max_interval_ms: cfg.get_i64("metadata.log.max.snapshot.interval.ms"),
                },
                retention_bytes: cfg.get_i64("metadata.max.retention.bytes"),
                retention_ms: cfg.get_i64("metadata.max.retention.ms"),
            },
            controller: controller_cfg,
            broker: broker_cfg,
            finalized_features: Some(finalized_features),
            quorum: quorum_settings(cfg, &cluster_id),
        },
    )
    .map_err(|e| anyhow::anyhow!("cannot start the metadata quorum: {e}"))?;

    let mut partition_cfg = PartitionLayerConfig::new(node_id, log_dirs, broker_properties(cfg));
    partition_cfg.isr_channel = kraft.alter_partition.as_ref().map(|c| c.recipient());
    let partitions = start_partitions(partition_cfg, Some(&pools))
        .map_err(|e| anyhow::anyhow!("cannot load the partition logs: {e}"))?;
    let registry = partitions.registry.clone();
    kraft.publisher.do_send(SubscribePartitionChanges {
        subscriber: registry.recipient(),
    });
    kraft.publisher.do_send(SubscribeBrokerConfigChanges {
        subscriber: registry.recipient(),
    });

    let mut router = RequestRouter::new();
    let authz = authorizer(cfg);
    // With other voters, a dynamic quorum, or none here, the active controller may be in
    // another process.
    let quorum_view = (voters_n != 1 || kraft.controller.is_none()).then(|| QuorumView {
        leader: kraft.raft_leader.clone(),
        endpoints: kraft.controller_addresses.clone(),
    });
    controller_apis::register_with_auto_create_wait(
        &mut router,
        MetadataApis {
            node_id,
            cluster_id: cluster_id.clone(),
            controller: kraft.controller.clone(),
            raft: kraft.raft.clone(),
            // A broker answers from what its replicas already reflect.
            image: partitions.served_image.clone(),
            auto_create_topics_enable: cfg.get_bool("auto.create.topics.enable"),
            topic_channel: kraft.topic_channel.clone(),
            auto_create_in_flight: Default::default(),
            broker_configs: Arc::new(broker_config_entries(cfg)),
            controller_listeners,
            quorum: quorum_view.clone(),
            loggers: Some(loggers),
            authz: authz.clone(),
        },
        controller_apis::AUTO_CREATE_WAIT,
    );
    kactor_actors::raft::apis::register_voter_changes(&mut router, kraft.raft.clone());
    if let Some(q) = quorum_view {
        // Admin writes go to the active controller when it is elsewhere.
        controller_apis::register_forwarding(&mut router, node_id, q);
    }
    partition_apis::register(&mut router, partitions.apis.clone());
    if cfg.is_controller() {
        // Vote, BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot, and Fetch on controller
        // listeners, to the RaftActor.
        kactor_actors::raft::apis::register(&mut router, kraft.raft.clone());
    }
    if let Some(controller) = &kraft.controller {
        // Brokers in other processes register and heartbeat here.
        kactor_actors::controller::broker_apis::register(&mut router, controller.clone());
    }
    // Admin requests Kafka brokers forward inside an Envelope, served by this node's routes.
    let envelope_router = kactor_actors::controller::envelope::InnerRouter::default();
    if cfg.is_controller() {
        kactor_actors::controller::envelope::register(&mut router, envelope_router.clone());
    }

    // Group coordinator shards follow `__consumer_offsets` leadership in the partition table.
    let props = broker_properties(cfg);
    let partition_table = partitions.apis.partitions.clone();
    let group_manager = GroupCoordinatorManagerActor::new(
        node_id,
        GroupCoordinatorConfig::from_properties(&props),
        partition_table.clone(),
    )
    .with_purgatory(partitions.apis.purgatory.clone());
    let group_shards = group_manager.shard_table();
    let group_shards_for_txn = group_shards.clone();
    let group_manager = kactor_actors::runtime::start_supervised(
        &pools.coordinator(),
        ActorMetrics::new("GroupCoordinatorManagerActor"),
        move |_| group_manager,
    );
    // Internal topics are created at the active controller: through the topic channel on a
    // broker (it answers from the co-located controller when that one leads), else the local
    // one.
    let topic_creator: Option<
        kactor_actors::runtime::MeteredRecipient<kactor_actors::controller::messages::CreateTopics>,
    > = kraft
        .topic_channel
        .as_ref()
        .map(|c| c.recipient())
        .or_else(|| kraft.controller.as_ref().map(|c| c.recipient()));
    // KIP-932 share coordinator: shards follow `__share_group_state` leadership and keep the
    // share-partitions' durable state there.
    let share_state_partitions = cfg.get_i32("share.coordinator.state.topic.num.partitions");
    let share_coordinator = ShareCoordinatorManagerActor::new(
        node_id,
        ShareCoordinatorConfig {
            num_partitions: share_state_partitions,
            updates_per_snapshot: cfg
                .get_i32("share.coordinator.snapshot.update.records.per.snapshot"),
            write_timeout_ms: cfg.get_i32("share.coordinator.write.timeout.ms").max(1) as u64,
            // An internal config in Kafka (not in its documented set), honoured when given.
            prune_interval_ms: props
                .get("share.coordinator.state.topic.prune.interval.ms")
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(300_000),
            cold_snapshot_interval_ms: props
                .get("share.coordinator.cold.partition.snapshot.interval.ms")
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(300_000),
        },
        partition_table.clone(),
        Some(partitions.apis.purgatory.clone()),
    );
    let share_state = ShareStateClient {
        shards: share_coordinator.shard_table(),
        num_partitions: share_state_partitions,
    };
    let share_coordinator = kactor_actors::runtime::start_supervised(
        &pools.coordinator(),
        ActorMetrics::new("ShareCoordinatorManagerActor"),
        move |_| share_coordinator,
    );
    kactor_actors::share::coordinator::apis::register(&mut router, share_state.clone());
    let share_state_topic = topic_creator
        .clone()
        .map(|controller| ShareStateTopicCreator {
            controller,
            num_partitions: share_state_partitions,
            replication_factor: cfg.get_i32("share.coordinator.state.topic.replication.factor")
                as i16,
            min_isr: cfg.get_i32("share.coordinator.state.topic.min.isr"),
            segment_bytes: cfg.get_i64("share.coordinator.state.topic.segment.bytes"),
        });
    // KIP-932: share-partitions and share sessions of the partitions this broker leads.
    let share_limits = kactor_actors::share::core::Limits {
        lock_duration_ms: cfg.get_i64("group.share.record.lock.duration.ms"),
        delivery_count_limit: cfg.get_i32("group.share.delivery.count.limit") as i16,
        max_in_flight: cfg.get_i64("group.share.partition.max.record.locks"),
    };
    let share_persister;
    let share_manager = {
        let max_sessions = cfg.get_i32("group.share.max.share.sessions").max(1) as usize;
        // A session unused for twice the lock duration is gone with its client.
        let idle_ms = 2 * share_limits.lock_duration_ms;
        // Its own channels: a state write waiting for the coordinator's replication never
        // queues behind transaction markers.
        let inter_broker = InterBrokerClient::new(
            node_id,
            partitions.served_image.clone(),
            InterBrokerConfig {
                listener: cfg
                    .get_str("inter.broker.listener.name")
                    .map(str::to_string),
                request_timeout: Duration::from_millis(
                    cfg.get_i32("share.coordinator.write.timeout.ms").max(1) as u64 + 5_000,
                ),
                connect_timeout: Duration::from_secs(10),
            },
            Some(pools.coordinator()),
        );
        let persister = kactor_actors::share::persister::SharePersister {
            client: share_state.clone(),
            partitions: partition_table.clone(),
            topic: share_state_topic.clone(),
            node_id,
            inter_broker: Some(inter_broker),
        };
        share_persister = Some(persister.clone());
        kactor_actors::runtime::start_supervised(
            &pools.coordinator(),
            ActorMetrics::new("SharePartitionManagerActor"),
            move |_| {
                kactor_actors::share::actor::SharePartitionManagerActor::new(
                    max_sessions,
                    share_limits,
                    idle_ms,
                )
                .with_persister(persister)
            },
        )
    };
    kactor_actors::share::apis::register(
        &mut router,
        kactor_actors::share::apis::ShareApis {
            manager: share_manager.clone(),
            partitions: partition_table.clone(),
            purgatory: partitions.apis.purgatory.clone(),
            settings: kactor_actors::share::apis::ShareSettings {
                limits: share_limits,
                lock_duration_bounds: (
                    cfg.get_i64("group.share.min.record.lock.duration.ms"),
                    cfg.get_i64("group.share.max.record.lock.duration.ms"),
                ),
                delivery_count_bounds: (
                    cfg.get_i32("group.share.min.delivery.count.limit") as i16,
                    cfg.get_i32("group.share.max.delivery.count.limit") as i16,
                ),
                record_locks_bounds: (
                    cfg.get_i64("group.share.min.partition.max.record.locks"),
                    cfg.get_i64("group.share.max.partition.max.record.locks"),
                ),
                fetch_max_bytes: cfg.get_i32("fetch.max.bytes"),
            },
        },
    );
    group_apis::register(
        &mut router,
        GroupApis {
            shards: group_shards,
            partitions: partition_table,
            transaction_state_num_partitions: cfg.get_i32("transaction.state.log.num.partitions"),
            // Created through the channel: the active controller may be in another process.
            offsets_topic: topic_creator.clone().map(|controller| OffsetsTopicCreator {
                controller,
                replication_factor: cfg.get_i32("offsets.topic.replication.factor") as i16,
                segment_bytes: cfg.get_i64("offsets.topic.segment.bytes"),
            }),
            share_state_num_partitions: share_state_partitions,
            share_state_topic: share_state_topic.clone(),
            share_state: share_persister.map(|persister| {
                kactor_actors::group::apis::share::ShareStateAdmin {
                    persister,
                    manager: share_manager,
                }
            }),
        },
    );

    let mut txn_manager = None;
    // Transactions: producer ids come from blocks the controller allocates (ProducerIdsRecord,
    // so they never repeat across restarts); coordinator shards follow `__transaction_state`
    // leadership; FindCoordinator(TRANSACTION) creates that topic on demand, so this block
    // comes after the group APIs (it wraps their FindCoordinator handler).
    {
        let table = partitions.apis.partitions.clone();
        let props = broker_properties(cfg);
        // A marker written to `__consumer_offsets-N` (by a coordinator shard or through
        // WriteTxnMarkers) makes shard N apply or drop the producer's pending offsets.
        let group_completion: Option<kactor_actors::txn::coordinator::GroupTxnCompletion> = Some(
            Arc::new(move |partition: i32, producer_id: i64, committed: bool| {
                if let Some(shard) = group_shards_for_txn
                    .borrow()
                    .txn_completions
                    .get(&partition)
                {
                    shard.do_send(CompleteGroupTransaction {
                        producer_id,
                        committed,
                    });
                }
            }),
        );
        // Producer id blocks come from the active controller wherever it runs: through the
        // controller channel on every broker (a broker-only node too), else the local one.
        let producer_id_source = kraft
            .controller_channel
            .as_ref()
            .map(|c| c.recipient())
            .or_else(|| kraft.controller.as_ref().map(|c| c.recipient()));
        // Markers and KIP-890 verifications reach other brokers on their inter-broker
        // listener; a request may take the peer's own wait (`request.timeout.ms`, markers wait
        // for replication) plus a margin.
        let request_timeout_ms = cfg.get_i32("request.timeout.ms").max(0) as u64;
        let inter_broker = InterBrokerClient::new(
            node_id,
            partitions.served_image.clone(),
            InterBrokerConfig {
                listener: cfg
                    .get_str("inter.broker.listener.name")
                    .map(str::to_string),
                request_timeout: Duration::from_millis(request_timeout_ms + 5_000),
                connect_timeout: Duration::from_secs(10),
            },
            Some(pools.coordinator()),
        );
        let local_markers = LocalMarkers {
            partitions: table.clone(),
            purgatory: Some(partitions.apis.purgatory.clone()),
            timeout_ms: request_timeout_ms,
            group_completion: group_completion.clone(),
        };
        if let Some(source) = producer_id_source {
            let producer_ids = start_producer_id_manager(
                &pools.coordinator(),
                node_id,
                source,
                kraft.image.clone(),
            );
            let config = TxnManagerConfig::from_properties(&props);
            let num_partitions = config.num_partitions;
            let mut manager = TransactionCoordinatorManagerActor::new(
                node_id,
                config,
                table.clone(),
                producer_ids.clone(),
            );
            if let Some(c) = &group_completion {
                manager = manager.with_group_completion(c.clone());
            }
            manager = manager.with_marker_delivery(
                partitions.apis.purgatory.clone(),
                inter_broker.clone(),
                request_timeout_ms,
            );
            let shards = manager.shard_table();
            txn_manager = Some(kactor_actors::runtime::start_supervised(
                &pools.coordinator(),
                ActorMetrics::new("TransactionCoordinatorManagerActor"),
                move |_| manager,
            ));
            let apis = TxnCoordinatorApis {
                producer_ids,
                shards,
                num_partitions,
                offsets_partitions: GroupCoordinatorConfig::from_properties(&props)
                    .offsets_topic_num_partitions,
                partitions: table.clone(),
            };
            txn_apis::register_coordinator(&mut router, apis.clone());
            // KIP-890: transactional Produce / TxnOffsetCommit add or verify their partition
            // with the transaction's coordinator (here or on another broker) before they are
            // appended.
            let verifier = kactor_actors::txn::leader_verify::LeaderVerifier {
                coordinator: apis.clone(),
                partitions: table.clone(),
                inter_broker: Some(inter_broker.clone()),
            };
            kactor_actors::txn::leader_verify::wrap_produce(&mut router, verifier.clone());
            kactor_actors::txn::leader_verify::wrap_txn_offset_commit(&mut router, verifier);
            txn_apis::register_admin(&mut router, apis);
            txn_apis::wrap_find_coordinator(
                &mut router,
                table.clone(),
                TxnStateTopicCreator::from_properties(
                    topic_creator
                        .clone()
                        .expect("a producer id source implies a creator"),
                    &props,
                ),
            );
        }
        txn_apis::register_write_txn_markers(&mut router, local_markers);
        txn_apis::register_describe_producers(&mut router, table);
    }
    // ACLs are checked around every handler (and around forwarding), where a request enters
    // this node.
    kactor_actors::authorization::gate::install(
        &mut router,
        authz,
        partitions.served_image.clone(),
        cfg.get_bool("auto.create.topics.enable"),
    );
    // Client quotas go around everything else on Produce and Fetch, so that what they measure
    // is the whole request as handled, refused parts included.
    let quotas =
        kactor_actors::quota::QuotaManagers::new(kactor_actors::quota::core::WindowConfig {
            samples: cfg.get_i32("quota.window.num").max(1) as usize,
            window_ms: i64::from(cfg.get_i32("quota.window.size.seconds").max(1)) * 1000,
        });
    kactor_actors::quota::follow_image(quotas.clone(), partitions.served_image.clone());
    kactor_actors::quota::wrap_produce(&mut router, quotas.clone());
    kactor_actors::quota::wrap_fetch(&mut router, quotas);
    router.set_identity(cluster_id.clone(), node_id);
    let router: Arc<RequestRouter> = router.build(features);
    let _ = envelope_router.set(router.clone());

    let http: SocketAddr = cfg
        .get_str("kactor.http.address")
        .unwrap_or_default()
        .parse()
        .context("kactor.http.address")?;
    let http_address = metrics::http::serve(http)
        .await
        .with_context(|| format!("cannot serve metrics on kactor.http.address={http}"))?;

    let mut server = SocketServerActor::bind(network, router, pools.clone())?
        .with_metadata_image(kraft.image.clone());
    if kraft.broker_state.is_some() {
        // Like Kafka's BrokerServer, clients are served only once this broker is registered
        // and unfenced: before that, Metadata would list no brokers and no controller, and
        // librdkafka's admin client waits minutes for a refresh before sending CreateTopics.
        server = server.defer_broker_listeners();
    }
    let listeners = server.bound_listeners().to_vec();
    let socket_server = kactor_actors::runtime::start_unsupervised(
        &pools.next_network(),
        ActorMetrics::new("SocketServerActor"),
        move |_| server,
    );
    readiness.set("listeners", true);
    for l in &listeners {
        tracing::info!(listener = %l.name, address = %l.address, "listener bound");
    }
    // Ready once this broker is registered and unfenced (its metadata caught up).
    if let Some(mut state) = kraft.broker_state.clone() {
        let socket_server = socket_server.clone();
        let registry = partitions.registry.clone();
        let image = kraft.image.clone();
        let mut served = partitions.served_image.clone();
        actix_rt::spawn(async move {
            loop {
                if *state.borrow() == BrokerLifecycleState::Running {
                    // And only once the replica manager serves the image we caught up to, as
                    // Kafka's BrokerServer waits for the first metadata publish: Metadata is
                    // answered from that served image, which lags the metadata log by the
                    // replica manager's mailbox (hundreds of ms after a restart with many
                    // partitions). Opened earlier, the first answers listed no topics and
                    // librdkafka failed its queued messages as "Unknown partition".
                    let caught_up = image.borrow().provenance.last_offset;
                    while served.borrow().provenance.last_offset < caught_up {
                        if served.changed().await.is_err() {
                            break;
                        }
                    }
                    socket_server.do_send(EnableBrokerListeners);
                    // Running means caught up with the metadata log: only now is a log the
                    // image doesn't know really a stray.
                    registry.do_send(MarkStrayLogs {
                        image: image.borrow().clone(),
                    });
                    metrics::readiness().set("metadata", true);
                    break;
                }
                if state.changed().await.is_err() {
                    break;
                }
            }
        });
    } else {
        readiness.set("metadata", true);
    }
    Ok(Node {
        pools,
        socket_server,
        listeners,
        http_address,
        partitions,
        kraft,
        group_manager,
        txn_manager,
        share_coordinator,
        // Kafka bounds the wait by its whole shutdown deadline; past the session timeout the
        // controller fences a broker that stopped heartbeating anyway.
        controlled_shutdown: cfg
            .get_bool("controlled.shutdown.enable")
            .then(|| Duration::from_millis(cfg.get_i32("broker.session.timeout.ms").max(0) as u64)),
    })
}

impl Node {
    /// Kafka's controlled shutdown (`BrokerServer.shutdown`): while still serving, the broker
    /// heartbeats with `want_shut_down`; the controller moves its leaderships to other ISR
    /// members and answers `should_shut_down` once every active broker has seen that, so
    /// clients fail over before this broker stops instead of after its session times out.
    async fn controlled_shutdown(&self) {
        let (Some(limit), Some(lifecycle), Some(mut state)) = (
            self.controlled_shutdown,
            self.kraft.lifecycle.as_ref(),
            self.kraft.broker_state.clone(),
        ) else {
            return;
        };
        if *state.borrow() != BrokerLifecycleState::Running {
            return;
        }
        let started = std::time::Instant::now();
        lifecycle.do_send(BeginControlledShutdown);
        let approved = async {
            while *state.borrow_and_update() != BrokerLifecycleState::ShuttingDown {
                if state.changed().await.is_err() {
                    break;
                }
            }
        };
        match tokio::time::timeout(limit, approved).await {
            Ok(()) => tracing::info!(
                elapsed_ms = started.elapsed().as_millis() as u64,
                "controlled shutdown approved by the controller"
            ),
            Err(_) => tracing::error!(
                timeout_ms = limit.as_millis() as u64,
                "timed out waiting for the controller to approve controlled shutdown"
            ),
        }
    }

    /// Stops accepting, closes connections, stops the arbiters.
    pub async fn shutdown(self) {
        self.controlled_shutdown().await;
        metrics::readiness().set("listeners", false);
        let _ = self.socket_server.send(StopAccepting).await;
        // Coordinators resign first: parked requests get NOT_COORDINATOR now rather than a
        // closed connection, and nothing writes to the coordinator partitions being closed.
        let _ = self
            .group_manager
            .send(kactor_actors::group::manager::StopGroupCoordinators)
            .await;
        if let Some(txn) = &self.txn_manager {
            let _ = txn
                .send(kactor_actors::txn::manager::StopTxnCoordinators)
                .await;
        }
        let _ = self
            .share_coordinator
            .send(kactor_actors::share::coordinator::actor::StopShareCoordinators)
            .await;
        // Flush and checkpoint every log and write the clean-shutdown marker, so the next start
        // skips recovery.
        if let Err(e) = self.partitions.shutdown().await {
            tracing::error!(error = %e, "log shutdown failed; the next start will run recovery");
        }
        let _ = &self.kraft;
        self.pools.stop();
    }
}

/// The authorizer `authorizer.class.name` asks for (config validation refused any other
/// class); the gate decides against the ACLs of the image this broker serves.
fn authorizer(cfg: &BrokerConfig) -> kactor_actors::authorization::Authz {
    use kactor_actors::authorization::{AuthorizerConfig, Authz};
    let class = cfg.get_str("authorizer.class.name").unwrap_or("").trim();
    if class.is_empty() {
        return Authz::off();
    }
    let super_users = cfg
        .get_str("super.users")
        .unwrap_or("")
        .split(';')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_string)
        .collect();
    Authz::standard(AuthorizerConfig {
        super_users,
        allow_everyone_if_no_acl_found: cfg.get_bool("allow.everyone.if.no.acl.found"),
    })
}
