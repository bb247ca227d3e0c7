//! Request routing (Kafka's `KafkaApis.handle` dispatch + `ApiVersionManager`): a function
//! table from API key to async handler. Not an actor: handlers run as futures inside the
//! ConnectionActor that read the request, on its network arbiter, and reach other components
//! through the `Recipient`s / `MeteredRecipient`s their closure captured when the topology
//! registered them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use futures_util::future::LocalBoxFuture;
use kactor_protocol::messages::RequestHeader;
use kactor_protocol::{versions, ApiKey, RequestBody, ResponseBody};

/// Which kind of listener a connection arrived on; decides which APIs it may use (the
/// schemas' `listeners`: `broker`, `controller`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ListenerKind {
    Broker,
    Controller,
}

impl ListenerKind {
    pub fn schema_name(self) -> &'static str {
        match self {
            ListenerKind::Broker => "broker",
            ListenerKind::Controller => "controller",
        }
    }
}

/// The connection a request came from.
#[derive(Debug, Clone)]
pub struct ConnectionInfo {
    /// Unique per process, for logs.
    pub connection_id: u64,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub listener_name: Arc<str>,
    pub listener_kind: ListenerKind,
    /// `PLAINTEXT` for now; decides zero-copy sends and (later) authentication.
    pub security_protocol: &'static str,
    /// The authenticated principal; `User:ANONYMOUS` until a SASL exchange or a client
    /// certificate names someone.
    pub principal: crate::security::KafkaPrincipal,
}

/// Everything a handler knows about a request besides its body.
#[derive(Debug, Clone)]
pub struct RequestContext {
    pub api_key: ApiKey,
    pub api_version: i16,
    pub header: RequestHeader,
    pub connection: ConnectionInfo,
    /// When the frame was read, for request timeouts and latency metrics.
    pub received_at: Instant,
    /// Size of the request frame (header and body, without the size prefix): what a produce
    /// costs against its client's quota.
    pub request_bytes: usize,
}

impl RequestContext {
    pub fn client_id(&self) -> &str {
        self.header.client_id.as_deref().unwrap_or("")
    }

    /// Counts a top-level error in `kactor_network_request_errors_total` (handlers call this
    /// for the error code they put in the response; the router does it for its own errors).
    pub fn record_error(&self, error_code: i16) {
        record_error(self.api_key, error_code);
    }
}

pub(crate) fn record_error(api_key: ApiKey, error_code: i16) {
    if error_code != 0 {
        crate::metrics::broker()
            .request_errors_total
            .with_label_values(&[api_key.name(), &error_code.to_string()])
            .inc();
    }
}

/// What a handler asks the connection to do.
#[derive(Debug)]
pub enum HandlerOutcome {
    /// Send this response (at the request's version, after every earlier response).
    Respond(ResponseBody),
    /// Send nothing (Produce with acks=0), but keep the connection.
    NoResponse,
    /// Send this response if any, then read nothing more from the connection for `mute`
    /// (KIP-219: a client over its quota is told the throttle time and its channel is muted
    /// for that long, `quota`).
    Throttled {
        response: Option<ResponseBody>,
        mute: std::time::Duration,
    },
    /// Close the connection without a response, as Kafka does for requests it cannot parse
    /// or must not answer; the reason is logged.
    Close(String),
}

pub type HandlerFuture = LocalBoxFuture<'static, HandlerOutcome>;

/// An API handler. `Send + Sync` because one router is shared by every network arbiter; the
/// future it returns runs on the connection's arbiter and need not be `Send`.
pub type Handler = Arc<dyn Fn(RequestContext, RequestBody) -> HandlerFuture + Send + Sync>;

/// Builds the response an API gives when the request's version is outside what we serve,
/// with this error code (UNSUPPORTED_VERSION). `None` = close the connection instead.
pub type ErrorResponder = fn(version: i16, error_code: i16) -> Option<ResponseBody>;

#[derive(Clone)]
pub struct Route {
    pub handler: Handler,
    pub on_unsupported_version: Option<ErrorResponder>,
}

/// An ApiVersions table: (api key, min, max), ascending by key.
pub type AdvertisedTable = Arc<Vec<(ApiKey, i16, i16)>>;

/// API key → handler. Build one in the topology with [`RequestRouter::register`], then
/// [`RequestRouter::build`] it (which adds ApiVersions) and share the `Arc`.
#[derive(Clone, Default)]
pub struct RequestRouter {
    routes: BTreeMap<ApiKey, Route>,
    /// Per listener kind: (api key, min, max) advertised in ApiVersions, ascending by key.
    advertised: BTreeMap<ListenerKind, AdvertisedTable>,
    /// This node's (cluster id, node id), which ApiVersions v5+ requests may name.
    identity: Option<(String, i32)>,
}

impl RequestRouter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Tells the ApiVersions handler which cluster and node this is: a v5+ request on a broker
    /// listener naming another one is answered REBOOTSTRAP_REQUIRED (KIP-1102).
    pub fn set_identity(&mut self, cluster_id: String, node_id: i32) -> &mut Self {
        self.identity = Some((cluster_id, node_id));
        self
    }

    /// Registers `handler` for `api_key`, replacing an earlier one. The API is advertised in
    /// ApiVersions only if `kactor_protocol::versions` also lists it as implemented.
    pub fn register<F>(&mut self, api_key: ApiKey, handler: F) -> &mut Self
    where
        F: Fn(RequestContext, RequestBody) -> HandlerFuture + Send + Sync + 'static,
    {
        self.routes.insert(
            api_key,
            Route {
                handler: Arc::new(handler),
                on_unsupported_version: None,
            },
        );
        self
    }

    /// Lets `api_key` answer out-of-range versions with an UNSUPPORTED_VERSION body instead of
    /// a closed connection.
    pub fn on_unsupported_version(
        &mut self,
        api_key: ApiKey,
        responder: ErrorResponder,
    ) -> &mut Self {
        if let Some(r) = self.routes.get_mut(&api_key) {
            r.on_unsupported_version = Some(responder);
        }
        self
    }

    /// The API keys with a handler, ascending.
    pub fn api_keys(&self) -> Vec<ApiKey> {
        self.routes.keys().copied().collect()
    }

    /// Replaces the handler of `api_key` by `handler`, keeping its unsupported-version
    /// responder (for layers that wrap a handler, such as authorization).
    pub fn wrap<F>(&mut self, api_key: ApiKey, handler: F) -> &mut Self
    where
        F: Fn(RequestContext, RequestBody) -> HandlerFuture + Send + Sync + 'static,
    {
        if let Some(r) = self.routes.get_mut(&api_key) {
            r.handler = Arc::new(handler);
        }
        self
    }

    pub fn route(&self, api_key: ApiKey) -> Option<&Route> {
        self.routes.get(&api_key)
    }

    /// The ApiVersions table for a listener kind.
    pub fn advertised(&self, kind: ListenerKind) -> AdvertisedTable {
        self.advertised.get(&kind).cloned().unwrap_or_default()
    }

    /// Whether `api_key` at `version` may be served on `kind` listeners.
    pub fn is_served(&self, kind: ListenerKind, api_key: ApiKey, version: i16) -> bool {
        self.advertised(kind).iter().any(|&(k, _, _)| k == api_key)
            && versions::is_supported(api_key, version)
    }

    /// Whether `api_key` may be used on `kind` listeners at all (the schema's `listeners`).
    pub fn allowed_on(kind: ListenerKind, api_key: ApiKey) -> bool {
        api_key.listeners().contains(&kind.schema_name())
    }

    /// Adds the ApiVersions handler (it needs the final table) and freezes the router.
    pub fn build(mut self, features: super::api_versions::FeaturesHandle) -> Arc<RequestRouter> {
        // Served on every listener, as Kafka does: a SASL listener's connections answer them
        // in their authenticator while authenticating; these are the answers anywhere else
        // (a listener without SASL, or a client that has authenticated).
        for api in [ApiKey::SaslHandshake, ApiKey::SaslAuthenticate] {
            self.register(api, move |_, _| {
                let body = super::authenticator::after_authentication_answer(api)
                    .expect("an answer for both SASL APIs");
                Box::pin(async move { HandlerOutcome::Respond(body) })
            });
        }
        for kind in [ListenerKind::Broker, ListenerKind::Controller] {
            let table: Vec<(ApiKey, i16, i16)> = versions::supported_versions()
                .filter(|(k, _, _)| {
                    (*k == ApiKey::ApiVersions || self.routes.contains_key(k))
                        && Self::allowed_on(kind, *k)
                })
                .collect();
            self.advertised.insert(kind, Arc::new(table));
        }
        let handler =
            super::api_versions::handler(self.advertised.clone(), features, self.identity.clone());
        self.routes.insert(
            ApiKey::ApiVersions,
            Route {
                handler,
                on_unsupported_version: None,
            },
        );
        // Pre-create the per-API series so /metrics shows every served API from the start.
        let m = crate::metrics::broker();
        for k in self.routes.keys() {
            m.requests_total.with_label_values(&[k.name()]);
            m.request_duration_seconds.with_label_values(&[k.name()]);
        }
        Arc::new(self)
    }
}

#[cfg(test)]
impl RequestRouter {
    /// Replaces a route after `build` (tests that need a handler with controllable timing).
    pub(crate) fn replace_route_for_test(&mut self, api_key: ApiKey, handler: Handler) {
        self.routes.insert(
            api_key,
            Route {
                handler,
                on_unsupported_version: None,
            },
        );
    }
}
