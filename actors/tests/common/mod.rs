//! Helpers shared by the integration tests (each test binary includes this with `mod common;`
//! and uses what it needs).

pub mod group;
pub mod kraft;
pub mod txn;
