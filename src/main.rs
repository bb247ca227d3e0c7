//! The `kactor` binary: command line, configuration loading and process assembly.

fn main() {
    println!("kactor {}", env!("CARGO_PKG_VERSION"));
}
