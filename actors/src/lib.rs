//! kactor-actors: Kafka's broker components as supervised actix actors around pure cores.
