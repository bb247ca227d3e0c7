//! The acceptor (Kafka's `SocketServer` + `Acceptor`): binds every listener with
//! `socket.listen.backlog.size`, enforces `max.connections`, and starts one
//! [`ConnectionActor`] per accepted socket on the network arbiters, round-robin.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use futures_util::stream::{self, StreamExt};
use tokio::net::{TcpListener, TcpSocket};

use super::connection::{CloseConnection, ConnectionActor, ConnectionClosed, ConnectionLimits};
use super::router::{ConnectionInfo, ListenerKind, RequestRouter};
use crate::metrics;
use crate::runtime::{ActorMetrics, ArbiterPools, MeteredAddr, MeteredRecipient};

/// One listener to bind, from `listeners` (+ `controller.listener.names` for the kind).
#[derive(Debug, Clone)]
pub struct ListenerSpec {
    pub name: String,
    /// Empty = all interfaces.
    pub host: String,
    /// 0 = any free port (tests).
    pub port: u16,
    pub kind: ListenerKind,
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
    pub limits: ConnectionLimits,
}

/// A bound listener: what a client (or test) connects to.
#[derive(Debug, Clone)]
pub struct BoundListener {
    pub name: String,
    pub kind: ListenerKind,
    pub address: SocketAddr,
}

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
    bound: Vec<BoundListener>,
    connections: HashMap<u64, (IpAddr, MeteredAddr<ConnectionActor>)>,
    per_ip: HashMap<IpAddr, usize>,
    next_connection_id: u64,
    accepting: bool,
    accept_streams: Vec<SpawnHandle>,
    metrics: ActorMetrics,
    connection_metrics: ActorMetrics,
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
            let bound = BoundListener {
                name: spec.name.clone(),
                kind: spec.kind,
                address: listener.local_addr()?,
            };
            pending.push((bound, listener));
        }
        let bound = pending.iter().map(|(b, _)| b.clone()).collect();
        Ok(SocketServerActor {
            config,
            router,
            pools,
            pending,
            bound,
            connections: HashMap::new(),
            per_ip: HashMap::new(),
            next_connection_id: 0,
            accepting: true,
            accept_streams: Vec::new(),
            metrics: ActorMetrics::new("SocketServerActor"),
            connection_metrics: ActorMetrics::new("ConnectionActor"),
        })
    }

    pub fn bound_listeners(&self) -> &[BoundListener] {
        &self.bound
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
        };
        let router = self.router.clone();
        let limits = self.config.limits;
        let on_closed = MeteredRecipient::new(ctx.address().recipient(), self.metrics.clone());
        let arbiter = self.pools.next_network();
        let addr = ConnectionActor::start_in_arbiter(&arbiter, move |_| {
            ConnectionActor::new(std_stream, info, router, limits, on_closed)
        });
        tracing::debug!(connection = id, peer = %peer, listener = %bound.name, "accepted connection");
        let addr = MeteredAddr::new(addr, self.connection_metrics.clone());
        self.connections.insert(id, (ip, addr));
        *self.per_ip.entry(ip).or_insert(0) += 1;
    }
}

impl Actor for SocketServerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        for (index, (bound, std_listener)) in
            std::mem::take(&mut self.pending).into_iter().enumerate()
        {
            let listener = match TcpListener::from_std(std_listener) {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!(listener = %bound.name, error = %e, "cannot register listener");
                    continue;
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
    }
}

impl StreamHandler<Accepted> for SocketServerActor {
    fn handle(&mut self, msg: Accepted, ctx: &mut Context<Self>) {
        // Stream items do not pass through a mailbox; keep the depth gauge balanced.
        self.metrics.sent();
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

impl Handler<StopAccepting> for SocketServerActor {
    type Result = ();
    fn handle(&mut self, _: StopAccepting, ctx: &mut Context<Self>) {
        let _m = self.metrics.handle();
        self.accepting = false;
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
