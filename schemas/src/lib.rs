//! kactor-protocol: the Kafka wire protocol (Kafka's `clients/.../common/message` and
//! `common/record` packages): generated message types, primitives, record batch v2.

pub mod records;
