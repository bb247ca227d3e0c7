//! The message types generated from `schemas/*/` by `kactor-codegen` at build time (Kafka's
//! generated `*Data` classes). See schemas/README.md for the API contract.

/// Requests, responses, headers and the API glue (`ApiKey`, `RequestBody`, `ResponseBody`).
#[allow(
    clippy::all,
    unused_imports,
    unused_variables,
    unused_mut,
    unused_parens,
    unused_comparisons,
    dead_code
)]
pub mod messages {
    include!(concat!(env!("OUT_DIR"), "/messages.rs"));
}

/// KRaft metadata records (`__cluster_metadata`).
#[allow(
    clippy::all,
    unused_imports,
    unused_variables,
    unused_mut,
    unused_parens,
    unused_comparisons,
    dead_code
)]
pub mod metadata {
    include!(concat!(env!("OUT_DIR"), "/metadata.rs"));
}

/// `__consumer_offsets` and `__transaction_state` keys and values.
#[allow(
    clippy::all,
    unused_imports,
    unused_variables,
    unused_mut,
    unused_parens,
    unused_comparisons,
    dead_code
)]
pub mod coordinator {
    include!(concat!(env!("OUT_DIR"), "/coordinator.rs"));
}
