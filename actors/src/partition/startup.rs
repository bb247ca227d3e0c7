//! Starting the partition layer (Kafka's `BrokerServer` start-up of `LogManager`,
//! `ReplicaManager` and the purgatories): one call for the topology, returning what it wires.
//!
//! ```ignore
//! let layer = kactor_actors::partition::startup::start_partitions(cfg, Some(&pools))?;
//! kactor_actors::partition::apis::register(&mut router, layer.apis.clone());
//! let registry = layer.registry.addr().clone();
//! kraft.publisher.do_send(SubscribePartitionChanges { subscriber: registry.clone().recipient() });
//! kraft.publisher.do_send(SubscribeBrokerConfigChanges { subscriber: registry.recipient() });
//! // on shutdown, before stopping the arbiters:
//! layer.shutdown().await?;
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use actix::Supervisor;

use super::apis::PartitionApis;
use super::fetch_session::FetchSessions;
use super::log_cleaner::{CleanerManager, LogCleanerActor};
use super::log_dirs::LogDirsFactory;
use super::log_manager::{LogManagerActor, LogManagerConfig, ShutdownLogs};
use super::registry::{LogFactory, ReplicaManagerActor};
use super::PurgatoryLink;
use crate::purgatory::PurgatoryActor;
use crate::runtime::{start_supervised, ActorMetrics, ArbiterPools, MeteredAddr};

#[derive(Debug, Clone)]
pub struct PartitionLayerConfig {
    /// `node.id`
    pub broker_id: i32,
    /// `log.dirs` (or `log.dir`).
    pub log_dirs: Vec<PathBuf>,
    /// The broker's properties (Kafka's names), for topic config defaults and the log manager's
    /// intervals.
    pub broker_config: BTreeMap<String, String>,
    /// `max.incremental.fetch.session.cache.slots`
    pub fetch_session_cache_slots: usize,
    /// Where partition leaders send ISR changes (the controller channel); `None`: nowhere
    /// (single-replica tests).
    pub isr_channel: Option<crate::runtime::MeteredRecipient<super::messages::AlterIsr>>,
}

impl PartitionLayerConfig {
    pub fn new(
        broker_id: i32,
        log_dirs: Vec<PathBuf>,
        broker_config: BTreeMap<String, String>,
    ) -> Self {
        let fetch_session_cache_slots = broker_config
            .get("max.incremental.fetch.session.cache.slots")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(1000);
        PartitionLayerConfig {
            broker_id,
            log_dirs,
            broker_config,
            fetch_session_cache_slots,
            isr_channel: None,
        }
    }
}

/// The started partition layer.
pub struct PartitionLayer {
    /// Subscribe it to the MetadataPublisherActor's `PartitionsChanged` and
    /// `BrokerConfigsChanged`.
    pub registry: MeteredAddr<ReplicaManagerActor>,
    pub purgatory: MeteredAddr<PurgatoryActor>,
    pub log_manager: MeteredAddr<LogManagerActor>,
    /// `log.cleaner.threads` cleaners (none when `log.cleaner.enable=false`).
    pub log_cleaners: Vec<MeteredAddr<LogCleanerActor>>,
    /// The metadata image once this broker's replicas reflect it: the one client-facing
    /// handlers answer from.
    pub served_image: crate::metadata::actor::MetadataImageWatch,
    /// What `apis::register` needs.
    pub apis: PartitionApis,
}

impl PartitionLayer {
    /// Clean shutdown: replicas stopped, logs flushed and closed, `.kafka_cleanshutdown` written.
    pub async fn shutdown(&self) -> Result<(), String> {
        self.log_manager
            .send(ShutdownLogs)
            .await
            .map_err(|e| e.to_string())?
    }
}

/// Loads the logs under `log_dirs` (recovering after a crash) and starts the registry,
/// purgatory, fetch session cache and log manager. Must run inside the actix `System`.
pub fn start_partitions(
    cfg: PartitionLayerConfig,
    pools: Option<&ArbiterPools>,
) -> Result<PartitionLayer, String> {
    let factory: Box<dyn LogFactory> =
        Box::new(LogDirsFactory::load(&cfg.log_dirs, &cfg.broker_config)?);
    start_with_factory(cfg, factory, pools)
}

/// [`start_partitions`] with any log factory (tests use `MemoryLogFactory`).
pub fn start_with_factory(
    cfg: PartitionLayerConfig,
    factory: Box<dyn LogFactory>,
    pools: Option<&ArbiterPools>,
) -> Result<PartitionLayer, String> {
    let purgatory_metrics = ActorMetrics::new("PurgatoryActor");
    let purgatory = match pools {
        Some(p) => start_supervised(&p.io_for(&"purgatory"), purgatory_metrics, |_| {
            PurgatoryActor::new()
        }),
        None => MeteredAddr::new(
            Supervisor::start(|_| PurgatoryActor::new()),
            purgatory_metrics,
        ),
    };
    let link = PurgatoryLink {
        high_watermark: purgatory.recipient(),
        log_end: purgatory.recipient(),
        leadership_lost: purgatory.recipient(),
    };
    let registry_actor = ReplicaManagerActor::new(
        cfg.broker_id,
        cfg.broker_config.clone(),
        factory,
        pools.cloned(),
        Some(link),
    )
    .with_isr_channel(cfg.isr_channel.clone());
    let reader = registry_actor.reader();
    let replication_quotas = registry_actor.replication_quotas();
    let served_image = registry_actor.served_image();
    let registry_metrics = ActorMetrics::new("ReplicaManagerActor");
    let registry = match pools {
        Some(p) => start_supervised(&p.storage(), registry_metrics, move |_| registry_actor),
        None => MeteredAddr::new(Supervisor::start(move |_| registry_actor), registry_metrics),
    };
    let fetch_sessions = FetchSessions::new(cfg.fetch_session_cache_slots);
    let lm_config = LogManagerConfig::from_broker_config(&cfg.broker_config);
    let lm_metrics = ActorMetrics::new("LogManagerActor");
    let (lm_registry, lm_reader) = (registry.clone(), reader.clone());
    let log_manager = match pools {
        Some(p) => start_supervised(&p.storage(), lm_metrics, move |_| {
            LogManagerActor::new(lm_config, lm_registry, lm_reader)
        }),
        None => MeteredAddr::new(
            Supervisor::start(move |_| LogManagerActor::new(lm_config, lm_registry, lm_reader)),
            lm_metrics,
        ),
    };
    // Kafka's LogCleaner: its threads share the manager state (checkpoints, logs in progress).
    let cleaner_config = crate::log::cleaner::CleanerConfig::from_broker_config(&cfg.broker_config);
    let manager = std::sync::Arc::new(CleanerManager::default());
    let threads = if cleaner_config.enable {
        cleaner_config.threads
    } else {
        0
    };
    let log_cleaners = (0..threads)
        .map(|id| {
            let (reader, manager) = (reader.clone(), manager.clone());
            let make = move |_: &mut actix::Context<LogCleanerActor>| {
                LogCleanerActor::new(id, cleaner_config, reader, manager)
            };
            let metrics = ActorMetrics::new("LogCleanerActor");
            match pools {
                // The cleaning itself runs on the blocking pool; the actor only gathers and
                // hands over, like the log manager beside it.
                Some(p) => start_supervised(&p.storage(), metrics, make),
                None => MeteredAddr::new(Supervisor::start(make), metrics),
            }
        })
        .collect();
    let rack_aware_reads = cfg
        .broker_config
        .get("replica.selector.class")
        .is_some_and(|c| c.trim() == super::core::read_replica::RACK_AWARE_SELECTOR);
    Ok(PartitionLayer {
        registry,
        purgatory: purgatory.clone(),
        log_manager,
        log_cleaners,
        served_image,
        apis: PartitionApis {
            partitions: reader,
            purgatory,
            fetch_sessions,
            rack_aware_reads,
            replication_quotas,
        },
    })
}
