//! The transaction coordinator side (Kafka's `TransactionCoordinator`, `ProducerIdManager`):
//! producer ids handed out by InitProducerId from blocks the controller allocates, and one
//! `TransactionCoordinatorActor` shard per `__transaction_state` partition led.
//!
//! Wiring (topology): [`actor::start_producer_id_manager`]; a
//! [`manager::TransactionCoordinatorManagerActor`] over the partition table (its
//! `shard_table()` goes into [`apis::TxnCoordinatorApis`]); [`apis::register_coordinator`],
//! [`apis::register_admin`], [`apis::register_write_txn_markers`] and, after the group
//! APIs, [`apis::wrap_find_coordinator`] (creates `__transaction_state` on demand), and
//! [`leader_verify::wrap_produce`] / [`leader_verify::wrap_txn_offset_commit`] (KIP-890: the
//! leader adds or verifies a transactional append's partition with the coordinator).

pub mod actor;
pub mod apis;
pub mod coordinator;
pub mod core;
pub mod leader_verify;
pub mod log;
pub mod manager;
pub mod markers;
pub mod messages;
pub mod metrics;
pub mod producer_ids;
