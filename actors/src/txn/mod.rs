//! The transaction coordinator side (Kafka's `TransactionCoordinator`, `ProducerIdManager`):
//! producer ids handed out by InitProducerId from blocks the controller allocates.
//!
//! Wiring (topology): start [`actor::ProducerIdManagerActor::new(node_id, controller
//! recipient of AllocateProducerIds, metadata image watch)`](actor::ProducerIdManagerActor),
//! then [`apis::register`] with its address.

pub mod actor;
pub mod apis;
pub mod coordinator;
pub mod core;
pub mod log;
pub mod messages;
pub mod producer_ids;
