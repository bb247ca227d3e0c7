//! Process assembly (Kafka's `KafkaRaftServer` / `BrokerServer` / `ControllerServer` start-up):
//! which actor runs on which arbiter, which addresses each gets, and the request router's
//! table. This is the one place cross-component `Recipient`s are wired (DESIGN.md §1.2).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use actix::prelude::*;
use anyhow::Context as _;
use kactor_actors::metrics;
use kactor_actors::network::api_versions::{bootstrap_finalized_features, supported_features};
use kactor_actors::network::{
    features_channel, BoundListener, ConnectionLimits, FinalizedFeatures, ListenerKind,
    ListenerSpec, NetworkConfig, RequestRouter, SocketServerActor, StopAccepting,
};
use kactor_actors::runtime::ArbiterPools;
use tokio::sync::watch;

use crate::config::BrokerConfig;

/// What a started node holds on to until shutdown.
pub struct Node {
    pub pools: ArbiterPools,
    pub socket_server: Addr<SocketServerActor>,
    pub listeners: Vec<BoundListener>,
    pub http_address: SocketAddr,
    /// Given to the MetadataPublisherActor once it exists: it publishes finalized features.
    #[allow(dead_code)]
    pub finalized_features: watch::Sender<FinalizedFeatures>,
}

/// The network settings the SocketServerActor needs, from the broker config.
pub fn network_config(cfg: &BrokerConfig) -> NetworkConfig {
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
        .map(|l| ListenerSpec {
            kind: if controller_names.contains(&l.name) {
                ListenerKind::Controller
            } else {
                ListenerKind::Broker
            },
            name: l.name,
            host: l.host,
            port: l.port,
        })
        .collect();
    NetworkConfig {
        listeners,
        listen_backlog_size: cfg.get_i32("socket.listen.backlog.size") as u32,
        socket_send_buffer_bytes: cfg.get_i32("socket.send.buffer.bytes"),
        socket_receive_buffer_bytes: cfg.get_i32("socket.receive.buffer.bytes"),
        max_connections: cfg.get_i32("max.connections") as usize,
        max_connections_per_ip: cfg.get_i32("max.connections.per.ip") as usize,
        max_connections_per_ip_overrides: per_ip_overrides(cfg),
        limits: ConnectionLimits {
            socket_request_max_bytes: cfg.get_i32("socket.request.max.bytes") as usize,
            queued_max_requests: cfg.get_i32("queued.max.requests") as usize,
            connections_max_idle_ms: cfg.get_i64("connections.max.idle.ms"),
        },
    }
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

/// The request router with every API this build serves. Partition, controller and
/// coordinator engineers add their `router.register(ApiKey::X, handler)` lines here, with
/// handlers capturing the `Recipient`s of the actors they talk to.
fn request_router(_cfg: &BrokerConfig) -> RequestRouter {
    RequestRouter::new()
}

/// Starts every component. Must run inside the actix `System`.
pub async fn start(cfg: &BrokerConfig) -> anyhow::Result<Node> {
    let readiness = metrics::readiness();
    readiness.require("listeners");

    let pools = ArbiterPools::start(
        cfg.get_i32("num.network.threads") as usize,
        cfg.get_i32("num.io.threads") as usize,
    );
    let (finalized_features, features) =
        features_channel(supported_features(), bootstrap_finalized_features());
    let router: Arc<RequestRouter> = request_router(cfg).build(features);

    let http: SocketAddr = cfg
        .get_str("kactor.http.address")
        .unwrap_or_default()
        .parse()
        .context("kactor.http.address")?;
    let http_address = metrics::http::serve(http)
        .await
        .with_context(|| format!("cannot serve metrics on kactor.http.address={http}"))?;

    let server = SocketServerActor::bind(network_config(cfg), router, pools.clone())?;
    let listeners = server.bound_listeners().to_vec();
    let socket_server = SocketServerActor::start_in_arbiter(&pools.next_network(), move |_| server);
    readiness.set("listeners", true);
    for l in &listeners {
        tracing::info!(listener = %l.name, address = %l.address, "listener bound");
    }
    Ok(Node {
        pools,
        socket_server,
        listeners,
        http_address,
        finalized_features,
    })
}

impl Node {
    /// Stops accepting, closes connections, stops the arbiters.
    pub async fn shutdown(self) {
        metrics::readiness().set("listeners", false);
        let _ = self.socket_server.send(StopAccepting).await;
        self.pools.stop();
    }
}
