//! Runs the schema generator (Kafka's `MessageGenerator` step) into `OUT_DIR`.
//!
//! `KACTOR_SCHEMA_ROOT` (dev only) points the generator at another root holding
//! `messages/`, `metadata/` and `coordinator/`, e.g. to exercise it on a larger schema set.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=KACTOR_SCHEMA_ROOT");
    let root = std::env::var_os("KACTOR_SCHEMA_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()));
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    match kactor_codegen::generate_all(&root, &out) {
        Ok(inputs) => {
            for p in inputs {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
        Err(e) => {
            eprintln!("schema generation failed: {e}");
            std::process::exit(1);
        }
    }
}
