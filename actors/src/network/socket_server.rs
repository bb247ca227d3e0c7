//! The acceptor (Kafka's `SocketServer` + `Acceptor`): binds every listener with
//! `socket.listen.backlog.size`, enforces `max.connections`, and starts one
//! [`ConnectionActor`] per accepted socket on the network arbiters, round-robin, and owns the
//! request [`MemoryPool`]s (`queued.max.request.bytes`) those connections share.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use futures_util::stream::{self, StreamExt};
use tokio::net::{TcpListener, TcpSocket};

use super::connection::{CloseConnection, ConnectionActor, ConnectionClosed, ConnectionLimits};
use super::request_queue::RequestBudget;
use super::router::{ConnectionInfo, ListenerKind, RequestRouter};
use crate::metadata::MetadataImageWatch;
use crate::metrics;
use crate::runtime::{ActorMetrics, ArbiterPools, MeteredAddr};
use crate::security::ListenerSecurity;

/// One listener to bind, from `listeners` (+ `controller.listener.names` for the kind).
#[derive(Debug, Clone)]
pub struct ListenerSpec {
    pub name: String,
    /// Empty = all interfaces.
    pub host: String,
    /// 0 = any free port (tests).
    pub port: u16,
    pub kind: ListenerKind,
    /// Its security protocol's TLS and SASL settings.
    pub security: ListenerSecurity,
}

/// The network settings from the broker config.
#[derive(Debug, Clone)]
pub struct NetworkConfig {
    pub listeners: Vec<ListenerSpec>,
    /// `socket.listen.backlog.size`
    pub listen_backlog_size: u32,
    /// `socket.send.buffer.bytes`; -1 = OS default.
    pub socket_send_buffer_bytes: i32,
    /// `socket.receive.buffer.bytes`; -1 = OS default.
    pub socket_receive_buffer_bytes: i32,
    /// `max.connections` across listeners.
    pub max_connections: usize,
    /// `max.connections.per.ip`
    pub max_connections_per_ip: usize,
    /// `max.connections.per.ip.overrides`, parsed: host address → limit.
    pub max_connections_per_ip_overrides: HashMap<IpAddr, usize>,
    /// `queued.max.request.bytes`; ≤ 0 = no bound.
    pub queued_max_request_bytes: i64,
    pub limits: ConnectionLimits,
}

/// A bound listener: what a client (or test) connects to.
#[derive(Debug, Clone)]
pub struct BoundListener {
    pub name: String,
    pub kind: ListenerKind,
    pub address: SocketAddr,
}

/// Starts accepting on the broker (client) listeners held back by
/// [`SocketServerActor::defer_broker_listeners`]: sent once the broker has registered and
/// caught up with the metadata log (Kafka's `enableRequestProcessing` after the initial
/// catch-up), so no client sees a Metadata answer without this broker in it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct EnableBrokerListeners;

/// Sent by the process on SIGTERM/SIGINT: stop accepting and close every connection.
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopAccepting;

struct Accepted {
    listener: usize,
    result: std::io::Result<(tokio::net::TcpStream, SocketAddr)>,
}

impl Message for Accepted {
    type Result = ();
}

pub struct SocketServerActor {
    config: NetworkConfig,
    router: Arc<RequestRouter>,
    pools: ArbiterPools,
    /// Listening sockets, bound at construction; moved into accept streams on start.
    pending: Vec<(BoundListener, std::net::TcpListener)>,
    /// Per bound listener (same index as `bound`): how its connections are secured.
    security: Vec<ListenerSecurity>,
    /// The metadata image SCRAM logins check credentials against.
    image: Option<MetadataImageWatch>,
    /// Whether broker listeners start accepting with the actor (else on
    /// [`EnableBrokerListeners`]); their sockets are bound either way, so early clients wait
    /// in the backlog.
    broker_listeners_enabled: bool,
    /// Broker listeners waiting for [`EnableBrokerListeners`], with their index in `bound`.
    deferred: Vec<(usize, std::net::TcpListener)>,
    bound: Vec<BoundListener>,
    connections: HashMap<u64, (IpAddr, MeteredAddr<ConnectionActor>)>,
    per_ip: HashMap<IpAddr, usize>,
    next_connection_id: u64,
    accepting: bool,
    accept_streams: Vec<SpawnHandle>,
    metrics: ActorMetrics,
    connection_metrics: ActorMetrics,
    /// Shared by every connection of every broker listener. Controller listeners get a request
    /// queue and pool of their own of the same sizes: in Kafka's combined mode the broker and
    /// the controller each run a SocketServer with its own, so clients filling theirs cannot
    /// stop the quorum's and the broker's own heartbeats from being read.
    broker_budget: RequestBudget,
    controller_budget: RequestBudget,
}

fn resolve(host: &str, port: u16) -> std::io::Result<SocketAddr> {
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    (host, port).to_socket_addrs()?.next().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::AddrNotAvailable,
            format!("{host} resolves to no address"),
        )
    })
}

fn bind_one(spec: &ListenerSpec, config: &NetworkConfig) -> std::io::Result<std::net::TcpListener> {
    let addr = resolve(&spec.host, spec.port)?;
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    // Buffer sizes set on the listening socket are inherited by accepted sockets.
    if config.socket_send_buffer_bytes > 0 {
        socket.set_send_buffer_size(config.socket_send_buffer_bytes as u32)?;
    }
    if config.socket_receive_buffer_bytes > 0 {
        socket.set_recv_buffer_size(config.socket_receive_buffer_bytes as u32)?;
    }
    socket.bind(addr)?;
    let listener = socket.listen(config.listen_backlog_size)?;
    listener.into_std()
}

impl SocketServerActor {
    /// Binds every listener now, so a taken port fails start-up with the listener's name.
    /// Must run inside a tokio runtime (the actix System).
    pub fn bind(
        config: NetworkConfig,
        router: Arc<RequestRouter>,
        pools: ArbiterPools,
    ) -> std::io::Result<Self> {
        let mut pending = Vec::new();
        for spec in &config.listeners {
            let listener = bind_one(spec, &config).map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "cannot listen on {}://{}:{}: {e}",
                        spec.name, spec.host, spec.port
                    ),
                )
            })?;
            // Both results from the start, so rates and failure alerts work before the first
            // failure.
            let m = metrics::broker();
            for result in ["success", "failure"] {
                if spec.security.tls.is_some() {
                    m.tls_handshakes_total
                        .with_label_values(&[&spec.name, result]);
                }
                if spec.security.sasl.is_some() {
                    m.authentications_total
                        .with_label_values(&[&spec.name, result]);
                }
            }
            let bound = BoundListener {
                name: spec.name.clone(),
                kind: spec.kind,
                address: listener.local_addr()?,
            };
            pending.push((bound, listener));
        }
        let bound = pending.iter().map(|(b, _)| b.clone()).collect();
        let security = config
            .listeners
            .iter()
            .map(|l| l.security.clone())
            .collect();
        let (queued_requests, queued_bytes) = (
            config.limits.queued_max_requests,
            config.queued_max_request_bytes,
        );
        let broker_budget = RequestBudget::new(queued_requests, queued_bytes, "broker");
        let controller_budget = RequestBudget::new(queued_requests, queued_bytes, "controller");
        Ok(SocketServerActor {
            config,
            router,
            pools,
            pending,
            security,
            image: None,
            broker_listeners_enabled: true,
            deferred: Vec::new(),
            bound,
            connections: HashMap::new(),
            per_ip: HashMap::new(),
            next_connection_id: 0,
            accepting: true,
            accept_streams: Vec::new(),
            metrics: ActorMetrics::new("SocketServerActor"),
            connection_metrics: ActorMetrics::new("ConnectionActor"),
            broker_budget,
            controller_budget,
        })
    }

    /// Gives SASL listeners the metadata image to find SCRAM credentials in.
    pub fn with_metadata_image(mut self, image: MetadataImageWatch) -> Self {
        self.image = Some(image);
        self
    }

    pub fn bound_listeners(&self) -> &[BoundListener] {
        &self.bound
    }

    /// Holds the broker listeners back until [`EnableBrokerListeners`]; controller listeners
    /// accept at once (the quorum must form before the broker can register).
    pub fn defer_broker_listeners(mut self) -> Self {
        self.broker_listeners_enabled = false;
        self
    }

    fn start_accepting(
        &mut self,
        index: usize,
        std_listener: std::net::TcpListener,
        ctx: &mut Context<Self>,
    ) {
        let bound = self.bound[index].clone();
        let listener = match TcpListener::from_std(std_listener) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(listener = %bound.name, error = %e, "cannot register listener");
                return;
            }
        };
        tracing::info!(listener = %bound.name, address = %bound.address, "accepting connections");
        let accepts = stream::unfold(listener, move |listener| async move {
            let result = listener.accept().await;
            if let Err(e) = &result {
                // EMFILE and friends: back off instead of spinning on a full fd table.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Some((
                Accepted {
                    listener: index,
                    result,
                },
                listener,
            ))
        });
        let handle = ctx.add_stream(accepts.boxed_local());
        self.accept_streams.push(handle);
    }

    fn on_accept(
        &mut self,
        listener: usize,
        stream: tokio::net::TcpStream,
        peer: SocketAddr,
        ctx: &mut Context<Self>,
    ) {
        let bound = self.bound[listener].clone();
        let m = metrics::broker();
        if !self.accepting {
            return;
        }
        if self.connections.len() >= self.config.max_connections {
            tracing::warn!(
                peer = %peer,
                listener = %bound.name,
                "refusing connection: max.connections={} reached",
                self.config.max_connections
            );
            m.connections_refused_total
                .with_label_values(&[&bound.name])
                .inc();
            return;
        }
        let ip = peer.ip();
        let ip_limit = self
            .config
            .max_connections_per_ip_overrides
            .get(&ip)
            .copied()
            .unwrap_or(self.config.max_connections_per_ip);
        let from_ip = self.per_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= ip_limit {
            tracing::warn!(
                peer = %peer,
                listener = %bound.name,
                "refusing connection: {from_ip} connections from {ip} reached max.connections.per.ip={ip_limit}"
            );
            m.connections_refused_total
                .with_label_values(&[&bound.name])
                .inc();
            return;
        }
        m.connections_accepted_total
            .with_label_values(&[&bound.name])
            .inc();
        let std_stream = match stream.into_std() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(peer = %peer, error = %e, "cannot hand over accepted socket");
                return;
            }
        };
        let id = self.next_connection_id;
        self.next_connection_id += 1;
        let info = ConnectionInfo {
            connection_id: id,
            peer,
            local: bound.address,
            listener_name: Arc::from(bound.name.as_str()),
            listener_kind: bound.kind,
            security_protocol: "PLAINTEXT",
            principal: Default::default(),
        };
        let router = self.router.clone();
        let security = self.security[listener].clone();
        let image = self.image.clone();
        let limits = self.config.limits;
        let budget = match bound.kind {
            ListenerKind::Broker => self.broker_budget.clone(),
            ListenerKind::Controller => self.controller_budget.clone(),
        };
        let on_closed = MeteredAddr::new(ctx.address(), self.metrics.clone()).recipient();
        let arbiter = self.pools.next_network();
        let addr = crate::runtime::start_unsupervised(
            &arbiter,
            self.connection_metrics.clone(),
            move |_| {
                ConnectionActor::new(std_stream, info, router, limits, budget, on_closed)
                    .secured(security, image)
            },
        );
        tracing::debug!(connection = id, peer = %peer, listener = %bound.name, "accepted connection");
        self.connections.insert(id, (ip, addr));
        *self.per_ip.entry(ip).or_insert(0) += 1;
    }
}

impl crate::runtime::SupervisedActor for SocketServerActor {
    const MAILBOX_CAPACITY: usize = 1024;
    /// Its listeners are taken once at start: without them the broker serves nothing.
    const ON_PANIC: crate::runtime::OnPanic = crate::runtime::OnPanic::Escalate;
}

crate::supervised_mailbox!(SocketServerActor);

impl Actor for SocketServerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        for (index, (bound, std_listener)) in
            std::mem::take(&mut self.pending).into_iter().enumerate()
        {
            if bound.kind == ListenerKind::Broker && !self.broker_listeners_enabled {
                self.deferred.push((index, std_listener));
            } else {
                self.start_accepting(index, std_listener, ctx);
            }
        }
    }
}

impl StreamHandler<Accepted> for SocketServerActor {
    fn handle(&mut self, msg: Accepted, ctx: &mut Context<Self>) {
        // Stream items do not pass through the mailbox, so they are not in its depth.
        let _m = self.metrics.handle();
        if let Ok((stream, peer)) = msg.result {
            self.on_accept(msg.listener, stream, peer, ctx);
        }
    }

    fn finished(&mut self, _: &mut Context<Self>) {
        // An accept stream never ends on its own; do not stop the actor when one does.
    }
}

impl Handler<ConnectionClosed> for SocketServerActor {
    type Result = ();
    fn handle(&mut self, msg: ConnectionClosed, _: &mut Context<Self>) {
        let _m = self.metrics.handle();
        if let Some((ip, _)) = self.connections.remove(&msg.connection_id) {
            if let Some(n) = self.per_ip.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    self.per_ip.remove(&ip);
                }
            }
        }
    }
}

impl Handler<EnableBrokerListeners> for SocketServerActor {
    type Result = ();
    fn handle(&mut self, _: EnableBrokerListeners, ctx: &mut Context<Self>) {
        let _m = self.metrics.handle();
        self.broker_listeners_enabled = true;
        if !self.accepting {
            return;
        }
        for (index, listener) in std::mem::take(&mut self.deferred) {
            self.start_accepting(index, listener, ctx);
        }
    }
}

impl Handler<StopAccepting> for SocketServerActor {
    type Result = ();
    fn handle(&mut self, _: StopAccepting, ctx: &mut Context<Self>) {
        let _m = self.metrics.handle();
        self.accepting = false;
        self.deferred.clear();
        for (_, conn) in self.connections.values() {
            conn.do_send(CloseConnection);
        }
        // Dropping the accept streams closes the listening sockets.
        for handle in self.accept_streams.drain(..) {
            ctx.cancel_future(handle);
        }
        tracing::info!("stopped accepting connections");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::api_versions::{
        bootstrap_finalized_features, features_channel, supported_features,
    };
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    fn config() -> NetworkConfig {
        let listener = |name: &str, kind| ListenerSpec {
            name: name.into(),
            host: "127.0.0.1".into(),
            port: 0,
            kind,
            security: ListenerSecurity::plaintext(),
        };
        NetworkConfig {
            listeners: vec![
                listener("PLAINTEXT", ListenerKind::Broker),
                listener("CONTROLLER", ListenerKind::Controller),
            ],
            listen_backlog_size: 50,
            socket_send_buffer_bytes: -1,
            socket_receive_buffer_bytes: -1,
            max_connections: 100,
            max_connections_per_ip: 100,
            max_connections_per_ip_overrides: HashMap::new(),
            queued_max_request_bytes: -1,
            limits: ConnectionLimits {
                socket_request_max_bytes: 1 << 20,
                queued_max_requests: 16,
                connections_max_idle_ms: -1,
            },
        }
    }

    /// ApiVersions v0 with the given correlation id, size-prefixed.
    fn api_versions_v0(correlation_id: i32) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&18i16.to_be_bytes());
        m.extend_from_slice(&0i16.to_be_bytes());
        m.extend_from_slice(&correlation_id.to_be_bytes());
        m.extend_from_slice(&(-1i16).to_be_bytes());
        let mut f = (m.len() as i32).to_be_bytes().to_vec();
        f.extend(m);
        f
    }

    #[actix_rt::test]
    async fn deferred_broker_listener_serves_only_after_enable() {
        let (_, features) = features_channel(supported_features(), bootstrap_finalized_features());
        let router = RequestRouter::new().build(features);
        let pools = ArbiterPools::start(1, 1);
        let server = SocketServerActor::bind(config(), router, pools.clone())
            .unwrap()
            .defer_broker_listeners();
        let broker = server.bound_listeners()[0].address;
        let controller = server.bound_listeners()[1].address;
        let addr = SocketServerActor::start_in_arbiter(&pools.next_network(), move |_| server);
        let mut len = [0u8; 4];

        // The controller listener serves at once (the quorum forms before registration).
        let mut c = TcpStream::connect(controller).await.unwrap();
        c.write_all(&api_versions_v0(1)).await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), c.read_exact(&mut len))
            .await
            .expect("controller listener answers")
            .unwrap();

        // The broker listener's socket is bound (the connect lands in the backlog) but nothing
        // is answered until the broker is ready.
        let mut b = TcpStream::connect(broker).await.unwrap();
        b.write_all(&api_versions_v0(2)).await.unwrap();
        assert!(
            tokio::time::timeout(Duration::from_millis(300), b.read_exact(&mut len))
                .await
                .is_err(),
            "answered before EnableBrokerListeners"
        );
        addr.send(EnableBrokerListeners).await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), b.read_exact(&mut len))
            .await
            .expect("broker listener answers after enable")
            .unwrap();
        pools.stop();
    }
}
