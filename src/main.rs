//! The `kactor` binary (Kafka's `kafka-server-start` + `kafka-storage`): command line,
//! configuration loading and process assembly.

mod config;
mod storage_format;

fn main() {
    println!("kactor {}", env!("CARGO_PKG_VERSION"));
}
