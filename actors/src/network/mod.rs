//! The network layer (Kafka's `SocketServer`, `Processor`, `RequestChannel` and the dispatch
//! half of `KafkaApis`): [`SocketServerActor`] accepts, [`ConnectionActor`] frames and orders,
//! [`RequestRouter`] maps API keys to handlers, [`api_versions`] answers ApiVersions,
//! [`RequestQueue`] and [`MemoryPool`] bound the requests and request bytes read and not yet
//! handled across connections.
//!
//! Plugging an API in (in the topology, before `build`):
//!
//! ```ignore
//! let mut router = RequestRouter::new();
//! let partitions = partition_registry.recipient::<AppendRecords>(); // captured, cloned per call
//! router.register(ApiKey::Produce, move |ctx, body| {
//!     let partitions = partitions.clone();
//!     Box::pin(async move {
//!         let RequestBody::Produce(req) = body else { unreachable!("router dispatches by key") };
//!         let resp = /* send AppendRecords per partition, await, build ProduceResponse */;
//!         HandlerOutcome::Respond(ResponseBody::Produce(resp))
//!     })
//! });
//! let router = router.build(features_handle);
//! ```

pub mod api_versions;
pub mod authenticator;
pub mod client;
pub mod connection;
pub mod frame;
pub mod inter_broker;
pub mod memory_pool;
pub mod request_queue;
pub mod router;
pub mod socket_server;
pub mod transport;
pub mod writer;

pub use api_versions::{features_channel, FeaturesHandle, FinalizedFeatures, SupportedFeature};
pub use connection::{ConnectionActor, ConnectionLimits};
pub use memory_pool::MemoryPool;
pub use request_queue::{RequestBudget, RequestQueue};
pub use router::{
    ConnectionInfo, Handler, HandlerFuture, HandlerOutcome, ListenerKind, RequestContext,
    RequestRouter,
};
pub use socket_server::{
    BoundListener, EnableBrokerListeners, ListenerSpec, NetworkConfig, SocketServerActor,
    StopAccepting,
};
