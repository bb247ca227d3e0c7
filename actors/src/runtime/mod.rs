//! The actix facade (Kafka has no counterpart: its thread pools and `KafkaRequestHandlerPool`
//! play this role): arbiter pools mirroring Kafka's thread pools, the metered and supervised
//! mailbox every actor is reached through, supervision, fatal faults, fault injection, and
//! per-actor metrics. Only this module, `actor.rs` and `messages.rs` files import actix.

pub mod arbiters;
pub mod events;
pub mod fault;
pub mod fault_injection;
pub mod mailbox;
pub mod metrics;
pub mod supervision;
pub mod watchdog;

pub use arbiters::ArbiterPools;
pub use events::follow_watch;
pub use mailbox::{
    run_caught, Envelope, MailboxFull, MeteredAddr, MeteredRecipient, OnPanic, SupervisedActor,
};
pub use metrics::{ActorMetrics, HandleGuard};
pub use supervision::{start_here, start_supervised, start_supervised_here, start_unsupervised};
