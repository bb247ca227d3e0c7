//! The transaction coordinator side (Kafka's `TransactionCoordinator`, `ProducerIdManager`):
//! producer ids handed out by InitProducerId from blocks the controller allocates.

pub mod producer_ids;
