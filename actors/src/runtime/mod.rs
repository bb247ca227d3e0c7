//! The actix facade (Kafka has no counterpart: its thread pools and `KafkaRequestHandlerPool`
//! play this role): arbiter pools mirroring Kafka's thread pools, supervision helpers, and
//! per-actor metrics. Only this module, `actor.rs` and `messages.rs` files import actix.

pub mod arbiters;
pub mod fault;
pub mod metrics;
pub mod supervision;

pub use arbiters::ArbiterPools;
pub use metrics::{ActorMetrics, HandleGuard, MeteredAddr, MeteredRecipient};
pub use supervision::{start_supervised, SupervisedActor};
