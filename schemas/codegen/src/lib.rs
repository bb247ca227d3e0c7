//! Code generator for the Kafka message schemas in `schemas/` (Kafka's `MessageGenerator`).
