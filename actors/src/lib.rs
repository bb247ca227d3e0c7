//! kactor-actors: Kafka's broker components as supervised actix actors around pure cores.
//!
//! `log` is the storage engine (no actix); `runtime` is the actix facade (supervision, per-actor
//! metrics); the other modules are one component each (actor.rs + messages.rs + core/).

pub mod authorization;
pub mod controller;
pub mod group;
pub mod log;
pub mod loggers;
pub mod metadata;
pub mod metrics;
pub mod network;
pub mod partition;
pub mod producer;
pub mod purgatory;
pub mod quota;
pub mod raft;
pub mod runtime;
pub mod security;
pub mod share;
pub mod txn;
