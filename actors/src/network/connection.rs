//! One client connection (Kafka's `Processor` + `KafkaChannel`): reads frames, decodes the
//! request header, dispatches to the [`RequestRouter`], and writes responses strictly in
//! request order, whatever order the handlers finish in.
//!
//! Reading and writing are futures spawned in the actor's context that own the socket halves
//! while they run and hand them back when done, so the actor state is only touched between
//! awaits. Reading pauses, which pushes back on the client through TCP, while the broker-wide
//! request queue is full (`queued.max.requests` requests read and not yet handled over every
//! connection, Kafka's RequestChannel), while this connection has `queued.max.requests`
//! responses not yet written, and, with `queued.max.request.bytes` set, while the broker-wide
//! [`MemoryPool`] cannot give a request's bytes (Kafka's memory mute).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use bytes::Bytes;
use kactor_protocol::errors::UNSUPPORTED_VERSION;
use kactor_protocol::messages::{RequestHeader, ResponseHeader};
use kactor_protocol::{
    request_header_version, response_header_version, versions, ApiKey, Decode, Encode, Records,
    RequestBody, ResponseBody, Writer,
};
use tokio::io::BufReader;
use tokio::net::TcpStream;

use super::api_versions;
use super::authenticator::{Authenticator, Gate};
use super::frame::{read_frame, FrameError, RequestPrefix};
use super::request_queue::{RequestBudget, RequestHold};
use super::router::{record_error, ConnectionInfo, HandlerOutcome, RequestContext, RequestRouter};
use super::transport::{split_plain, split_tls, SocketReader, SocketWriter};
use super::writer::{with_size_prefix, write_chunks};
use crate::metadata::MetadataImageWatch;
use crate::metrics;
use crate::runtime::{run_caught, ActorMetrics, MeteredRecipient};
use crate::security::{KafkaPrincipal, ListenerSecurity};

/// Per-connection limits from the broker config.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// `socket.request.max.bytes`
    pub socket_request_max_bytes: usize,
    /// `queued.max.requests`: the broker-wide request queue's size, and the most responses one
    /// connection may have pending (read and not yet written).
    pub queued_max_requests: usize,
    /// `connections.max.idle.ms`; negative = never.
    pub connections_max_idle_ms: i64,
}

/// Sent by a ConnectionActor to the SocketServerActor when it stops; losing it would leave
/// the `max.connections` count too high forever.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ConnectionClosed {
    pub connection_id: u64,
}

/// Sent by the SocketServerActor on shutdown: finish nothing, close now.
#[derive(Message)]
#[rtype(result = "()")]
pub struct CloseConnection;

/// The request an answer belongs to: its place in the connection's order, and what its
/// response header and body are encoded for.
#[derive(Debug, Clone, Copy)]
struct ReplyTo {
    seq: u64,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    received_at: Instant,
}

struct OutFrame {
    chunks: Vec<Records>,
    bytes: usize,
    /// Close the connection this long after the frame is written (a failed authentication's
    /// answer), with this reason.
    close_after: Option<(Duration, String)>,
    /// Read nothing for this long once the frame is written (a quota throttle, KIP-219).
    mute: Duration,
}

pub struct ConnectionActor {
    info: ConnectionInfo,
    router: Arc<RequestRouter>,
    limits: ConnectionLimits,
    /// Shared with every connection of the same listener kind.
    budget: RequestBudget,
    on_closed: MeteredRecipient<ConnectionClosed>,
    metrics: ActorMetrics,
    stream: Option<std::net::TcpStream>,
    reader: Option<BufReader<SocketReader>>,
    writer: Option<SocketWriter>,
    security: ListenerSecurity,
    /// The SASL exchange's state on SASL listeners.
    authenticator: Option<Authenticator>,
    /// Frames read before authentication take a place in this connection's own queue of one,
    /// not in the broker-wide one: unauthenticated peers stalling mid-frame must not hold the
    /// places authenticated clients and other brokers need (Kafka reads them outside its
    /// request queue and memory pool too).
    unauthenticated_budget: Option<RequestBudget>,
    /// The metadata image, for SCRAM credentials.
    image: Option<MetadataImageWatch>,
    /// A failed authentication was answered: read nothing more, close once it is written.
    closing: bool,
    /// The request whose answer is the last one: its sequence number, how long to wait after
    /// writing it, and why.
    close_at: Option<(u64, Duration, String)>,
    reading: bool,
    writing: bool,
    /// Sequence number the next frame read gets.
    next_seq: u64,
    /// Sequence number whose response goes out next.
    next_to_send: u64,
    /// Finished responses waiting for earlier ones; `None` = no response (acks=0).
    finished: BTreeMap<u64, Option<OutFrame>>,
    write_queue: VecDeque<OutFrame>,
    in_flight: usize,
    last_active: Instant,
    /// Reading resumes at this instant (a quota throttle, `crate::quota`).
    muted_until: Option<Instant>,
    /// A response of this connection was throttled: from then on it reads one request at a
    /// time, as Kafka does for every connection, so that a client at its quota cannot slip a
    /// pipeline of requests in between two throttles (the pipeline is read before the first
    /// of them is measured).
    throttled: bool,
}

impl ConnectionActor {
    /// `stream` is a std socket (non-blocking) so it can be registered with the runtime of
    /// the arbiter the actor runs on.
    pub fn new(
        stream: std::net::TcpStream,
        info: ConnectionInfo,
        router: Arc<RequestRouter>,
        limits: ConnectionLimits,
        budget: RequestBudget,
        on_closed: MeteredRecipient<ConnectionClosed>,
    ) -> Self {
        ConnectionActor {
            info,
            router,
            limits,
            budget,
            on_closed,
            metrics: ActorMetrics::new("ConnectionActor"),
            stream: Some(stream),
            reader: None,
            writer: None,
            security: ListenerSecurity::plaintext(),
            authenticator: None,
            unauthenticated_budget: None,
            image: None,
            closing: false,
            close_at: None,
            reading: false,
            writing: false,
            next_seq: 0,
            next_to_send: 0,
            finished: BTreeMap::new(),
            write_queue: VecDeque::new(),
            in_flight: 0,
            last_active: Instant::now(),
            muted_until: None,
            throttled: false,
        }
    }

    /// Secures the connection as its listener says: TLS before the first frame, and a SASL
    /// exchange before any other request (SCRAM credentials come from `image`).
    pub fn secured(
        mut self,
        security: ListenerSecurity,
        image: Option<MetadataImageWatch>,
    ) -> Self {
        self.authenticator = security
            .sasl
            .as_ref()
            .map(|s| Authenticator::new(s.clone()));
        if self.authenticator.is_some() {
            self.unauthenticated_budget = Some(RequestBudget::new(1, -1, "authenticating"));
        }
        self.info.security_protocol = security.protocol.name();
        self.security = security;
        self.image = image;
        self
    }

    fn attach(&mut self, (r, w): (SocketReader, SocketWriter)) {
        self.reader = Some(BufReader::with_capacity(16 * 1024, r));
        self.writer = Some(w);
    }

    fn on_tls_handshake(
        &mut self,
        result: std::io::Result<tokio_rustls::server::TlsStream<TcpStream>>,
        ctx: &mut Context<Self>,
    ) {
        let stream = match result {
            Ok(s) => s,
            Err(e) => {
                metrics::broker()
                    .tls_handshakes_total
                    .with_label_values(&[&self.info.listener_name, "failure"])
                    .inc();
                // At info, not warn: load-balancer probes and port scans fail here routinely.
                tracing::info!(
                    connection = self.info.connection_id,
                    peer = %self.info.peer,
                    listener = %self.info.listener_name,
                    "closing connection: TLS handshake failed: {e}"
                );
                metrics::broker()
                    .connections_closed_total
                    .with_label_values(&["tls_handshake"])
                    .inc();
                return ctx.stop();
            }
        };
        metrics::broker()
            .tls_handshakes_total
            .with_label_values(&[&self.info.listener_name, "success"])
            .inc();
        if self.authenticator.is_none() {
            // SSL: the principal is the client certificate's subject, mapped by
            // ssl.principal.mapping.rules; without a certificate it stays ANONYMOUS. On
            // SASL_SSL the SASL exchange names the principal instead, as in Kafka.
            let tls = self.security.tls.as_ref().expect("TLS listener");
            let certs = stream.get_ref().1.peer_certificates();
            if let Some(cert) = certs.and_then(|c| c.first()) {
                let name = crate::security::tls::subject_rfc2253(cert)
                    .map_err(|e| format!("unreadable client certificate: {e}"))
                    .and_then(|subject| {
                        tls.principal_mapper.name(&subject).ok_or_else(|| {
                            format!("no ssl.principal.mapping.rules rule applies to {subject}")
                        })
                    });
                match name {
                    Ok(name) => self.info.principal = KafkaPrincipal::user(&name),
                    Err(reason) => return self.close(ctx, "authentication", reason),
                }
            }
        }
        self.last_active = Instant::now();
        self.attach(split_tls(stream));
        self.maybe_read(ctx);
    }

    /// Carries out the authenticator's decision on a request it did not let through.
    fn apply_gate(&mut self, reply: ReplyTo, gate: Gate, ctx: &mut Context<Self>) {
        let ReplyTo {
            seq,
            api_key,
            version,
            ..
        } = reply;
        let failure_delay = Duration::from_millis(self.security.failed_authentication_delay_ms);
        let (outcome, close) = match gate {
            Gate::Pass => unreachable!("routed by the caller"),
            Gate::Answer(body) => (HandlerOutcome::Respond(body), None),
            Gate::Authenticated {
                body,
                principal,
                mechanism,
            } => {
                self.on_authenticated(principal, &mechanism);
                (HandlerOutcome::Respond(body), None)
            }
            Gate::Fail {
                body,
                reason,
                delayed,
            } => {
                self.on_authentication_failed(&reason);
                let outcome = body.map_or(HandlerOutcome::NoResponse, HandlerOutcome::Respond);
                let delay = if delayed {
                    failure_delay
                } else {
                    Duration::ZERO
                };
                (outcome, Some((delay, reason)))
            }
            Gate::IllegalState { reason } => {
                self.on_authentication_failed(&reason);
                // ILLEGAL_SASL_STATE in the request's own format where the router can build
                // one (Kafka's getErrorResponse), else just the close.
                let body = self
                    .router
                    .route(api_key)
                    .and_then(|r| r.on_unsupported_version)
                    .filter(|_| versions::is_supported(api_key, version))
                    .and_then(|responder| {
                        responder(version, kactor_protocol::errors::ILLEGAL_SASL_STATE)
                    });
                let outcome = body.map_or(HandlerOutcome::NoResponse, HandlerOutcome::Respond);
                (outcome, Some((failure_delay, reason)))
            }
        };
        if let Some((delay, reason)) = close {
            self.closing = true;
            self.close_at = Some((seq, delay, reason));
        }
        self.finish(reply, outcome, ctx);
    }

    fn authenticate(&mut self, api_key: ApiKey, version: i16, body: &RequestBody) -> Gate {
        // The image is read only when a SCRAM exchange asks for a credential, not for every
        // request of an authenticated client.
        let image = &self.image;
        let lookup = |user: &str, mechanism: i8| {
            image
                .as_ref()?
                .borrow()
                .scram_credentials
                .get(user)?
                .get(&mechanism)
                .cloned()
        };
        let authenticator = self.authenticator.as_mut().expect("SASL listener");
        authenticator.on_request(api_key, version, body, Instant::now(), &lookup)
    }

    fn on_authenticated(&mut self, principal: KafkaPrincipal, mechanism: &str) {
        tracing::debug!(
            connection = self.info.connection_id,
            peer = %self.info.peer,
            %principal,
            mechanism,
            "authenticated"
        );
        metrics::broker()
            .authentications_total
            .with_label_values(&[&self.info.listener_name, "success"])
            .inc();
        self.info.principal = principal;
    }

    fn on_authentication_failed(&mut self, reason: &str) {
        // The reason never holds a password: the SASL servers word their failures without
        // the client's secret.
        tracing::info!(
            connection = self.info.connection_id,
            peer = %self.info.peer,
            listener = %self.info.listener_name,
            "authentication failed: {reason}"
        );
        metrics::broker()
            .authentications_total
            .with_label_values(&[&self.info.listener_name, "failure"])
            .inc();
    }

    /// Closes the connection with a log line naming the peer and the reason.
    fn close(
        &mut self,
        ctx: &mut Context<Self>,
        reason_label: &'static str,
        detail: impl std::fmt::Display,
    ) {
        tracing::warn!(
            connection = self.info.connection_id,
            peer = %self.info.peer,
            listener = %self.info.listener_name,
            "closing connection: {detail}"
        );
        metrics::broker()
            .connections_closed_total
            .with_label_values(&[reason_label])
            .inc();
        ctx.stop();
    }

    fn maybe_read(&mut self, ctx: &mut Context<Self>) {
        if self.reading || self.closing || self.in_flight >= self.limits.queued_max_requests {
            return;
        }
        if self.muted_until.is_some_and(|t| t > Instant::now())
            || (self.throttled && self.in_flight > 0)
        {
            return;
        }
        let Some(mut reader) = self.reader.take() else {
            return;
        };
        self.reading = true;
        let max = match self
            .authenticator
            .as_ref()
            .and_then(Authenticator::max_frame)
        {
            Some(sasl_max) => sasl_max.min(self.limits.socket_request_max_bytes),
            None => self.limits.socket_request_max_bytes,
        };
        let budget = match &self.unauthenticated_budget {
            Some(own)
                if !self
                    .authenticator
                    .as_ref()
                    .is_some_and(|a| a.is_authenticated()) =>
            {
                own.clone()
            }
            _ => self.budget.clone(),
        };
        let fut = async move {
            let r = read_frame(&mut reader, max, &budget).await;
            (reader, r)
        };
        ctx.spawn(fut.into_actor(self).map(|(reader, result), act, ctx| {
            act.reader = Some(reader);
            act.reading = false;
            // Decoding and routing run in this callback, not in a message handler: caught
            // the same way, a panic closes this connection alone (the client reconnects).
            let metrics = act.metrics.clone();
            run_caught(act, ctx, &metrics, "a request frame", |act, ctx| {
                act.on_frame(result, ctx)
            });
        }));
    }

    fn on_frame(
        &mut self,
        result: Result<(Bytes, RequestHold), FrameError>,
        ctx: &mut Context<Self>,
    ) {
        let (frame, hold) = match result {
            Ok(f) => f,
            Err(FrameError::Closed) => {
                tracing::debug!(connection = self.info.connection_id, peer = %self.info.peer, "peer closed");
                ctx.stop();
                return;
            }
            Err(e @ FrameError::InvalidSize { .. }) => return self.close(ctx, "invalid_size", e),
            Err(e @ FrameError::Truncated { .. }) => return self.close(ctx, "truncated", e),
            Err(FrameError::Io(e)) => {
                tracing::debug!(connection = self.info.connection_id, peer = %self.info.peer, error = %e, "read failed");
                ctx.stop();
                return;
            }
        };
        metrics::broker()
            .network_bytes_in_total
            .inc_by(frame.len() as u64 + 4);
        self.last_active = Instant::now();
        let seq = self.next_seq;
        self.next_seq += 1;
        self.in_flight += 1;
        self.dispatch(seq, frame, hold, ctx);
        self.maybe_read(ctx);
    }

    /// Decodes and routes one request; the response (or closing) happens in [`Self::finish`].
    ///
    /// `hold` is the request's place in the broker-wide queue and its pool bytes (bounded pool
    /// only); both go back when the handler has finished. The bytes may go back earlier, once
    /// nothing points into the frame any more: a request whose decoded body does not refer to
    /// its buffer frees its bytes when this returns, as Kafka releases a parsed request's
    /// buffer at once; Produce's records are referred to until the partitions have appended
    /// them (Kafka releases them when `KafkaApis.handle` returns, before an acks=all produce
    /// waits for replicas); and a handler that keeps a slice of its request (a group's member
    /// metadata) cannot pin the bytes past its end. Every early return below (refused,
    /// malformed, closing) drops the hold, releasing it.
    fn dispatch(&mut self, seq: u64, frame: Bytes, hold: RequestHold, ctx: &mut Context<Self>) {
        let received_at = Instant::now();
        let Some(prefix) = RequestPrefix::peek(&frame) else {
            return self.close(ctx, "malformed", "request shorter than a header");
        };
        let api_key = match ApiKey::try_from(prefix.api_key) {
            Ok(k) => k,
            Err(_) => {
                return self.close(
                    ctx,
                    "unknown_api",
                    format_args!(
                        "unknown API key {} (correlation id {})",
                        prefix.api_key, prefix.correlation_id
                    ),
                )
            }
        };
        let kind = self.info.listener_kind;
        if self.router.route(api_key).is_none() || !RequestRouter::allowed_on(kind, api_key) {
            return self.close(
                ctx,
                "unknown_api",
                format_args!(
                    "API {} (key {}) is not served on this listener",
                    api_key.name(),
                    prefix.api_key
                ),
            );
        }
        let version = prefix.api_version;
        let reply = ReplyTo {
            seq,
            api_key,
            version,
            correlation_id: prefix.correlation_id,
            received_at,
        };
        if let Some(a) = self.authenticator.as_ref().filter(|a| !a.admits(api_key)) {
            // Refused by api key before anything is decoded, whatever its version.
            let gate = a.refuse(api_key);
            drop(hold);
            return self.apply_gate(reply, gate, ctx);
        }
        if !versions::is_supported(api_key, version) {
            return self.unsupported_version(reply, &frame, ctx);
        }
        let frame_len = frame.len();
        let mut buf = frame;
        let header = match RequestHeader::decode(&mut buf, request_header_version(api_key, version))
        {
            Ok(h) => h,
            Err(e) => {
                return self.close(
                    ctx,
                    "malformed",
                    format_args!("bad {} request header: {e}", api_key.name()),
                )
            }
        };
        let body = match RequestBody::decode(api_key, version, &mut buf) {
            Ok(b) => b,
            Err(e) => {
                return self.close(
                    ctx,
                    "malformed",
                    format_args!(
                        "bad {} v{version} request (correlation id {}): {e}",
                        api_key.name(),
                        prefix.correlation_id
                    ),
                )
            }
        };
        if self.authenticator.is_some() {
            let gate = self.authenticate(api_key, version, &body);
            if !matches!(gate, Gate::Pass) {
                drop(hold);
                return self.apply_gate(reply, gate, ctx);
            }
        }
        let route = self.router.route(api_key).expect("checked above").clone();
        let rctx = RequestContext {
            api_key,
            api_version: version,
            header,
            connection: self.info.clone(),
            received_at,
            request_bytes: frame_len,
        };
        // The handler runs as its own task on this arbiter, not in the actor's context: a
        // request the broker has read is carried out even if the peer closes before its
        // answer (an acks=0 produce followed by a close must still append, as in Kafka), and
        // only the response is dropped. A future spawned in the context would be dropped with
        // the actor, and actix skips messages whose reply receiver is gone, so the partition
        // would never see the records.
        let handler = (route.handler)(rctx, body);
        // The hold's end is tied to the handler task, not to this actor's context, so it is
        // released even if the connection closes while the handler runs.
        let task = actix_rt::spawn(async move {
            let outcome = handler.await;
            drop(hold);
            outcome
        });
        ctx.spawn(task.into_actor(self).map(move |joined, act, ctx| {
            let outcome = match joined {
                Ok(outcome) => outcome,
                Err(e) => {
                    tracing::error!(api = api_key.name(), version, error = %e, "request handler failed (a bug)");
                    return act.close(
                        ctx,
                        "handler",
                        format_args!("{} handler failed", api_key.name()),
                    );
                }
            };
            act.finish(reply, outcome, ctx);
        }));
    }

    fn unsupported_version(&mut self, reply: ReplyTo, frame: &Bytes, ctx: &mut Context<Self>) {
        let ReplyTo {
            api_key,
            version,
            correlation_id,
            ..
        } = reply;
        record_error(api_key, UNSUPPORTED_VERSION);
        if api_key == ApiKey::ApiVersions {
            // KIP-511: answer in a v0 body (header v0) the client can always parse.
            let table = self.router.advertised(self.info.listener_kind);
            let body =
                ResponseBody::ApiVersions(api_versions::unsupported_version_response(&table));
            tracing::info!(
                connection = self.info.connection_id,
                peer = %self.info.peer,
                "ApiVersions v{version} is newer than this broker; answering UNSUPPORTED_VERSION at v0"
            );
            let at_v0 = ReplyTo {
                version: 0,
                ..reply
            };
            return self.finish(at_v0, HandlerOutcome::Respond(body), ctx);
        }
        let (min, max) = api_key.valid_versions();
        let responder = self
            .router
            .route(api_key)
            .and_then(|r| r.on_unsupported_version);
        if let (Some(responder), true) = (responder, version >= min && version <= max) {
            // The schema knows this version, we just do not serve it: the header decodes and
            // the error body can be encoded at the request's version.
            let mut buf = frame.clone();
            if RequestHeader::decode(&mut buf, request_header_version(api_key, version)).is_ok() {
                if let Some(body) = responder(version, UNSUPPORTED_VERSION) {
                    return self.finish(reply, HandlerOutcome::Respond(body), ctx);
                }
            }
        }
        self.close(
            ctx,
            "unsupported_version",
            format_args!(
                "unsupported {} version {version} (correlation id {correlation_id})",
                api_key.name(),
            ),
        );
    }

    fn finish(&mut self, reply: ReplyTo, outcome: HandlerOutcome, ctx: &mut Context<Self>) {
        let ReplyTo {
            seq,
            api_key,
            version,
            correlation_id,
            received_at,
        } = reply;
        let m = metrics::broker();
        m.requests_total.with_label_values(&[api_key.name()]).inc();
        m.request_duration_seconds
            .with_label_values(&[api_key.name()])
            .observe(received_at.elapsed().as_secs_f64());
        let (response, mute) = match outcome {
            HandlerOutcome::Respond(body) => (Some(body), Duration::ZERO),
            HandlerOutcome::Throttled { response, mute } => (response, mute),
            HandlerOutcome::NoResponse => (None, Duration::ZERO),
            HandlerOutcome::Close(reason) => return self.close(ctx, "handler", reason),
        };
        self.throttled |= !mute.is_zero();
        if response.is_none() {
            // No response to wait for (acks=0): the throttle starts now.
            self.mute(mute, ctx);
        }
        let out = match response {
            Some(body) => match encode_response(api_key, version, correlation_id, &body) {
                Ok(chunks) => {
                    let (chunks, bytes) = with_size_prefix(chunks);
                    Some(OutFrame {
                        chunks,
                        bytes,
                        close_after: None,
                        mute,
                    })
                }
                Err(e) => {
                    tracing::error!(api = api_key.name(), version, error = %e, "response encoding failed (a bug)");
                    return self.close(
                        ctx,
                        "encode_error",
                        format_args!("cannot encode {} response: {e}", api_key.name()),
                    );
                }
            },
            None => None,
        };
        let out = match self.close_at.take() {
            Some((at, delay, reason)) if at == seq => {
                // The last answer (or, without one, an empty write in its place) closes the
                // connection once it is out.
                let mut frame = out.unwrap_or(OutFrame {
                    chunks: Vec::new(),
                    bytes: 0,
                    close_after: None,
                    mute: Duration::ZERO,
                });
                frame.close_after = Some((delay, reason));
                Some(frame)
            }
            other => {
                self.close_at = other;
                out
            }
        };
        self.finished.insert(seq, out);
        while let Some(out) = self.finished.remove(&self.next_to_send) {
            self.next_to_send += 1;
            match out {
                Some(frame) => self.write_queue.push_back(frame),
                None => self.in_flight -= 1,
            }
        }
        self.maybe_write(ctx);
        self.maybe_read(ctx);
    }

    /// Stops reading for `mute` (from now, or longer if already muted past that), then
    /// resumes (Kafka's throttled channel, muted once its response is sent).
    fn mute(&mut self, mute: Duration, ctx: &mut Context<Self>) {
        if mute.is_zero() {
            return;
        }
        let until = Instant::now() + mute;
        if self.muted_until.is_some_and(|t| t >= until) {
            return;
        }
        if self.muted_until.is_none() {
            crate::quota::channel_throttled(1);
        }
        self.muted_until = Some(until);
        ctx.run_later(mute, move |act, ctx| {
            if act.muted_until == Some(until) {
                act.muted_until = None;
                crate::quota::channel_throttled(-1);
                act.maybe_read(ctx);
            }
        });
    }

    fn maybe_write(&mut self, ctx: &mut Context<Self>) {
        if self.writing {
            return;
        }
        let Some(mut frame) = self.write_queue.pop_front() else {
            return;
        };
        let Some(mut writer) = self.writer.take() else {
            return;
        };
        self.writing = true;
        let close_after = frame.close_after.take();
        // Kafka holds back a failed authentication's answer, not only the close, for
        // connection.failed.authentication.delay.ms (its Selector sends the failure response
        // when the delayed close fires), so a password guesser waiting for the verdict cannot
        // retry at full speed on new connections. Nothing is read meanwhile: the connection
        // is closing.
        let delay = close_after.as_ref().map_or(Duration::ZERO, |(d, _)| *d);
        let fut = async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let r = write_chunks(&mut writer, &frame.chunks).await;
            (writer, frame.bytes, frame.mute, r)
        };
        ctx.spawn(fut.into_actor(self).map(move |(writer, bytes, mute, result), act, ctx| {
            act.writer = Some(writer);
            act.writing = false;
            act.in_flight -= 1;
            if let Err(e) = result {
                tracing::debug!(connection = act.info.connection_id, peer = %act.info.peer, error = %e, "write failed");
                ctx.stop();
                return;
            }
            metrics::broker().network_bytes_out_total.inc_by(bytes as u64);
            act.last_active = Instant::now();
            if close_after.is_some() {
                // The (delayed) answer is out: close now, as Kafka does. The reason was
                // logged when the authentication failed.
                metrics::broker()
                    .connections_closed_total
                    .with_label_values(&["authentication"])
                    .inc();
                return ctx.stop();
            }
            act.mute(mute, ctx);
            act.maybe_write(ctx);
            act.maybe_read(ctx);
        }));
    }
}

/// Response header + body as chunks (without the size prefix).
pub fn encode_response(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseBody,
) -> Result<Vec<Records>, kactor_protocol::EncodeError> {
    let mut w = Writer::with_capacity(256);
    let header = ResponseHeader {
        correlation_id,
        ..Default::default()
    };
    header.encode(&mut w, response_header_version(api_key, version))?;
    body.encode(&mut w, version)?;
    Ok(w.into_chunks())
}

impl crate::runtime::SupervisedActor for ConnectionActor {
    /// Control messages only (the socket is read and written by the actor's own futures).
    const MAILBOX_CAPACITY: usize = 16;
    /// A connection's state is its socket: a panic closes it.
    const ON_PANIC: crate::runtime::OnPanic = crate::runtime::OnPanic::Stop;
}

crate::supervised_mailbox!(ConnectionActor);

impl Actor for ConnectionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let m = metrics::broker();
        m.connections
            .with_label_values(&[&self.info.listener_name])
            .inc();
        let std_stream = self.stream.take().expect("started once");
        match TcpStream::from_std(std_stream) {
            Ok(stream) => {
                // Kafka sets TCP_NODELAY: responses are whole frames, Nagle only adds latency.
                let _ = stream.set_nodelay(true);
                match self.security.tls.clone() {
                    None => self.attach(split_plain(stream)),
                    Some(tls) => {
                        // The idle check below also ends a handshake that never completes.
                        let handshake = async move { tls.acceptor.accept(stream).await };
                        ctx.spawn(
                            handshake
                                .into_actor(self)
                                .map(|result, act, ctx| act.on_tls_handshake(result, ctx)),
                        );
                    }
                }
            }
            Err(e) => {
                tracing::warn!(peer = %self.info.peer, error = %e, "cannot register accepted socket");
                ctx.stop();
                return;
            }
        }
        if self.limits.connections_max_idle_ms >= 0 {
            let idle = Duration::from_millis(self.limits.connections_max_idle_ms as u64);
            let period = (idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(10));
            ctx.run_interval(period, move |act, ctx| {
                if act.in_flight == 0 && act.last_active.elapsed() >= idle {
                    tracing::info!(
                        connection = act.info.connection_id,
                        peer = %act.info.peer,
                        "closing idle connection (connections.max.idle.ms={})",
                        idle.as_millis()
                    );
                    metrics::broker()
                        .connections_closed_total
                        .with_label_values(&["idle"])
                        .inc();
                    ctx.stop();
                }
            });
        }
        self.maybe_read(ctx);
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        if self.muted_until.take().is_some() {
            crate::quota::channel_throttled(-1);
        }
        metrics::broker()
            .connections
            .with_label_values(&[&self.info.listener_name])
            .dec();
        self.on_closed.do_send(ConnectionClosed {
            connection_id: self.info.connection_id,
        });
    }
}

impl Handler<CloseConnection> for ConnectionActor {
    type Result = ();
    fn handle(&mut self, _: CloseConnection, ctx: &mut Context<Self>) {
        let _m = self.metrics.handle();
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::api_versions::{
        bootstrap_finalized_features, features_channel, supported_features,
    };
    use crate::network::memory_pool::MemoryPool;
    use kactor_protocol::messages::ApiVersionsResponse;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    struct Sink;
    impl Actor for Sink {
        type Context = Context<Self>;
    }
    impl crate::runtime::SupervisedActor for Sink {
        const MAILBOX_CAPACITY: usize = 16;
    }
    crate::supervised_mailbox!(Sink);
    impl Handler<ConnectionClosed> for Sink {
        type Result = ();
        fn handle(&mut self, _: ConnectionClosed, _: &mut Context<Self>) {}
    }

    fn request(correlation_id: i32) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&18i16.to_be_bytes());
        m.extend_from_slice(&0i16.to_be_bytes());
        m.extend_from_slice(&correlation_id.to_be_bytes());
        m.extend_from_slice(&(-1i16).to_be_bytes());
        let mut f = (m.len() as i32).to_be_bytes().to_vec();
        f.extend(m);
        f
    }

    /// A connection whose ApiVersions handler sleeps longer for earlier requests, so handlers
    /// finish in reverse order, and counts how many run at once.
    async fn connection(
        queued_max_requests: usize,
        peak: Arc<AtomicUsize>,
    ) -> tokio::net::TcpStream {
        connect(slow_router(peak), queued_max_requests).await
    }

    /// A router whose ApiVersions handler takes 10 * (10 - correlation id) ms and records the
    /// most handlers running at once in `peak`.
    fn slow_router(peak: Arc<AtomicUsize>) -> Arc<RequestRouter> {
        let (_, features) = features_channel(supported_features(), bootstrap_finalized_features());
        let mut router = RequestRouter::new().build(features);
        let running = Arc::new(AtomicUsize::new(0));
        Arc::get_mut(&mut router).unwrap().replace_route_for_test(
            ApiKey::ApiVersions,
            Arc::new(move |ctx: RequestContext, _| {
                let (running, peak) = (running.clone(), peak.clone());
                Box::pin(async move {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    let delay = 10 * (10 - ctx.header.correlation_id.min(10)) as u64;
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                    HandlerOutcome::Respond(ResponseBody::ApiVersions(
                        ApiVersionsResponse::default(),
                    ))
                })
            }),
        );
        router
    }

    /// A ConnectionActor serving `router` on a fresh socket; returns the client end.
    async fn connect(
        router: Arc<RequestRouter>,
        queued_max_requests: usize,
    ) -> tokio::net::TcpStream {
        let budget = RequestBudget::new(queued_max_requests, -1, "test");
        connect_with(router, queued_max_requests, budget).await
    }

    /// [`connect`] with the request memory pool the connection shares (its own queue).
    async fn connect_pooled(
        router: Arc<RequestRouter>,
        queued_max_requests: usize,
        pool: MemoryPool,
    ) -> tokio::net::TcpStream {
        let budget = RequestBudget {
            queue: super::super::request_queue::RequestQueue::new(queued_max_requests, "test"),
            pool,
        };
        connect_with(router, queued_max_requests, budget).await
    }

    /// [`connect`] with the request budget the connection shares with others.
    async fn connect_with(
        router: Arc<RequestRouter>,
        queued_max_requests: usize,
        budget: RequestBudget,
    ) -> tokio::net::TcpStream {
        connect_secured(
            router,
            queued_max_requests,
            budget,
            ListenerSecurity::plaintext(),
        )
        .await
    }

    /// [`connect_with`] on a listener secured by `security` (SASL without TLS in these tests).
    async fn connect_secured(
        router: Arc<RequestRouter>,
        queued_max_requests: usize,
        budget: RequestBudget,
        security: ListenerSecurity,
    ) -> tokio::net::TcpStream {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, peer) = listener.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        let info = ConnectionInfo {
            connection_id: 1,
            peer,
            local: server.local_addr().unwrap(),
            listener_name: Arc::from("PLAINTEXT"),
            listener_kind: super::super::router::ListenerKind::Broker,
            security_protocol: "PLAINTEXT",
            principal: Default::default(),
        };
        let limits = ConnectionLimits {
            socket_request_max_bytes: 1024,
            queued_max_requests,
            connections_max_idle_ms: -1,
        };
        let metrics = ActorMetrics::new("SinkTestActor");
        let sink = crate::runtime::MeteredAddr::new(Sink.start(), metrics);
        ConnectionActor::new(server, info, router, limits, budget, sink.recipient())
            .secured(security, None)
            .start();
        client
    }

    async fn read_correlation_ids(client: &mut tokio::net::TcpStream, n: usize) -> Vec<i32> {
        let mut ids = Vec::new();
        for _ in 0..n {
            let len = client.read_i32().await.unwrap() as usize;
            let mut body = vec![0u8; len];
            client.read_exact(&mut body).await.unwrap();
            ids.push(i32::from_be_bytes(body[..4].try_into().unwrap()));
        }
        ids
    }

    #[actix_rt::test]
    async fn responses_keep_request_order_when_handlers_finish_out_of_order() {
        let peak = Arc::new(AtomicUsize::new(0));
        let mut client = connection(500, peak.clone()).await;
        let all: Vec<u8> = (0..10).flat_map(request).collect();
        client.write_all(&all).await.unwrap();
        assert_eq!(
            read_correlation_ids(&mut client, 10).await,
            (0..10).collect::<Vec<_>>()
        );
        // They really ran concurrently (and so finished out of order).
        assert!(peak.load(Ordering::SeqCst) > 1);
    }

    #[actix_rt::test]
    async fn queued_max_requests_bounds_requests_in_flight() {
        let peak = Arc::new(AtomicUsize::new(0));
        let mut client = connection(2, peak.clone()).await;
        let all: Vec<u8> = (0..10).flat_map(request).collect();
        client.write_all(&all).await.unwrap();
        assert_eq!(
            read_correlation_ids(&mut client, 10).await,
            (0..10).collect::<Vec<_>>()
        );
        assert_eq!(peak.load(Ordering::SeqCst), 2);
    }

    #[actix_rt::test]
    async fn a_request_read_before_the_peer_closes_still_runs() {
        // Regression: a client that sends an acks=0 produce and closes at once lost its
        // records, because the handler was dropped with the connection.
        let done = Arc::new(AtomicUsize::new(0));
        let (_, features) = features_channel(supported_features(), bootstrap_finalized_features());
        let mut router = RequestRouter::new().build(features);
        let d = done.clone();
        Arc::get_mut(&mut router).unwrap().replace_route_for_test(
            ApiKey::ApiVersions,
            Arc::new(move |_, _| {
                let d = d.clone();
                Box::pin(async move {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    d.fetch_add(1, Ordering::SeqCst);
                    HandlerOutcome::NoResponse
                })
            }),
        );
        let mut client = connect(router, 10).await;
        client.write_all(&request(1)).await.unwrap();
        client.shutdown().await.unwrap();
        drop(client);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(done.load(Ordering::SeqCst), 1);
    }

    #[actix_rt::test]
    async fn oversize_prefix_closes_the_connection() {
        let mut client = connection(10, Arc::new(AtomicUsize::new(0))).await;
        client.write_all(&1025i32.to_be_bytes()).await.unwrap();
        let mut buf = [0u8; 1];
        assert_eq!(client.read(&mut buf).await.unwrap_or(0), 0);
    }

    /// ApiVersions v0 whose frame body is `size` bytes (the v0 body is empty; the rest is
    /// padding the decoder leaves unread).
    fn padded_request(correlation_id: i32, size: usize) -> Vec<u8> {
        let mut f = request(correlation_id);
        f[..4].copy_from_slice(&(size as i32).to_be_bytes());
        f.resize(4 + size, 0);
        f
    }

    async fn wait_for_available(pool: &MemoryPool, bytes: i64) {
        for _ in 0..500 {
            if pool.available_bytes() == Some(bytes) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("pool never reached {bytes} available: {pool:?}");
    }

    /// `queued.max.requests` bounds requests read and not yet handled over every connection:
    /// with one place, a quick request on B waits for A's slow one to be handled.
    #[actix_rt::test]
    async fn the_request_queue_is_shared_by_connections() {
        let router = slow_router(Arc::new(AtomicUsize::new(0)));
        let budget = RequestBudget::new(1, -1, "test");
        let mut a = connect_with(router.clone(), 10, budget.clone()).await;
        let mut b = connect_with(router, 10, budget.clone()).await;
        a.write_all(&request(0)).await.unwrap(); // 100 ms
        while budget.queue.available() != 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        b.write_all(&request(5)).await.unwrap(); // 50 ms, once it gets the place
        let b_answered = tokio::spawn(async move {
            read_correlation_ids(&mut b, 1).await;
            Instant::now()
        });
        assert_eq!(read_correlation_ids(&mut a, 1).await, vec![0]);
        let a_answered = Instant::now();
        assert!(b_answered.await.unwrap() >= a_answered);
        assert_eq!(budget.queue.available(), 1);
    }

    #[actix_rt::test]
    async fn an_empty_memory_pool_stops_other_connections_reading_until_bytes_come_back() {
        let (_, features) = features_channel(supported_features(), bootstrap_finalized_features());
        let router = RequestRouter::new().build(features);
        // The pool holds exactly one largest request (socket.request.max.bytes = 1024).
        let pool = MemoryPool::new(1024, "test");
        let mut a = connect_pooled(router.clone(), 10, pool.clone()).await;
        let mut b = connect_pooled(router, 10, pool.clone()).await;

        // A announces a 1024-byte request and stalls half-way: the pool is empty.
        let big = padded_request(7, 1024);
        a.write_all(&big[..600]).await.unwrap();
        wait_for_available(&pool, 0).await;

        // B's small request is not read (no bytes left for it), so it is not answered.
        b.write_all(&request(8)).await.unwrap();
        assert!(
            tokio::time::timeout(Duration::from_secs(1), b.read_i32())
                .await
                .is_err(),
            "answered while the pool was empty"
        );

        // A's request completes and is handled; its bytes come back and B is read.
        a.write_all(&big[600..]).await.unwrap();
        let deadline = Duration::from_secs(5);
        let got_a = tokio::time::timeout(deadline, read_correlation_ids(&mut a, 1));
        assert_eq!(got_a.await.expect("A answered"), vec![7]);
        let got_b = tokio::time::timeout(deadline, read_correlation_ids(&mut b, 1));
        assert_eq!(got_b.await.expect("B answered"), vec![8]);
        wait_for_available(&pool, 1024).await;
    }

    #[actix_rt::test]
    async fn pool_bytes_come_back_when_the_peer_closes_mid_frame_or_sends_a_bad_request() {
        let (_, features) = features_channel(supported_features(), bootstrap_finalized_features());
        let router = RequestRouter::new().build(features);
        let pool = MemoryPool::new(1024, "test");

        // Closed mid-frame.
        let mut a = connect_pooled(router.clone(), 10, pool.clone()).await;
        a.write_all(&padded_request(1, 1000)[..500]).await.unwrap();
        wait_for_available(&pool, 24).await;
        drop(a);
        wait_for_available(&pool, 1024).await;

        // An unknown API key closes the connection after the whole frame was read.
        let mut b = connect_pooled(router, 10, pool.clone()).await;
        let mut bad = padded_request(2, 1000);
        bad[4..6].copy_from_slice(&999i16.to_be_bytes());
        b.write_all(&bad).await.unwrap();
        let mut buf = [0u8; 1];
        assert_eq!(b.read(&mut buf).await.unwrap_or(0), 0, "closed");
        wait_for_available(&pool, 1024).await;
    }

    /// A v1 request frame: size, api key, version, correlation id, null client id, `body`.
    fn frame_v1(api_key: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&api_key.to_be_bytes());
        m.extend_from_slice(&1i16.to_be_bytes());
        m.extend_from_slice(&correlation_id.to_be_bytes());
        m.extend_from_slice(&(-1i16).to_be_bytes());
        m.extend_from_slice(body);
        let mut f = (m.len() as i32).to_be_bytes().to_vec();
        f.extend(m);
        f
    }

    /// Response frame: (correlation id, error code).
    async fn read_error(client: &mut tokio::net::TcpStream) -> (i32, i16) {
        let len = client.read_i32().await.unwrap() as usize;
        let mut body = vec![0u8; len];
        client.read_exact(&mut body).await.unwrap();
        (
            i32::from_be_bytes(body[..4].try_into().unwrap()),
            i16::from_be_bytes(body[4..6].try_into().unwrap()),
        )
    }

    #[actix_rt::test]
    async fn a_failed_authentication_is_answered_after_the_delay_then_closed() {
        use crate::security::sasl::SaslSettings;
        use crate::security::SecurityProtocol;
        let (_, features) = features_channel(supported_features(), bootstrap_finalized_features());
        let router = RequestRouter::new().build(features);
        let security = ListenerSecurity {
            protocol: SecurityProtocol::SaslPlaintext,
            tls: None,
            sasl: Some(Arc::new(SaslSettings {
                enabled_mechanisms: vec!["PLAIN".into()],
                plain_users: [("alice".to_string(), "right".to_string())].into(),
                max_reauth_ms: Default::default(),
                max_receive_size: 524288,
                ..Default::default()
            })),
            failed_authentication_delay_ms: 400,
        };
        let budget = RequestBudget::new(10, -1, "test");
        let mut client = connect_secured(router, 10, budget, security).await;
        // SaslHandshake v1 (key 17) for PLAIN: answered at once.
        let mut hs = 5i16.to_be_bytes().to_vec();
        hs.extend_from_slice(b"PLAIN");
        client.write_all(&frame_v1(17, 1, &hs)).await.unwrap();
        assert_eq!(read_error(&mut client).await, (1, 0));
        // SaslAuthenticate v1 (key 36) with a wrong password: SASL_AUTHENTICATION_FAILED (58),
        // held back for the delay (as Kafka does), then the connection closes.
        let token = b"\0alice\0wrong";
        let mut auth = (token.len() as i32).to_be_bytes().to_vec();
        auth.extend_from_slice(token);
        let sent = Instant::now();
        client.write_all(&frame_v1(36, 2, &auth)).await.unwrap();
        assert_eq!(read_error(&mut client).await, (2, 58));
        let answered = sent.elapsed();
        assert!(
            answered >= Duration::from_millis(400),
            "answered after {answered:?}"
        );
        let mut buf = [0u8; 1];
        let eof = tokio::time::timeout(Duration::from_secs(2), client.read(&mut buf)).await;
        assert_eq!(eof.expect("closed right after the answer").unwrap_or(0), 0);
    }
}
