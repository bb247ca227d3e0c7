//! Runs the schema generator (Kafka's `MessageGenerator` step) into `OUT_DIR`, and the error
//! table generator (`errors/errors.tsv` -> `errors.rs`).
//!
//! `KACTOR_SCHEMA_ROOT` (dev only) points the generator at another root holding
//! `messages/`, `metadata/` and `coordinator/`, e.g. to exercise it on a larger schema set.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=KACTOR_SCHEMA_ROOT");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = std::env::var_os("KACTOR_SCHEMA_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.clone());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    // The error table is ours alone (no schema root overrides it).
    let errors = manifest.join("errors").join("errors.tsv");
    println!("cargo:rerun-if-changed={}", errors.display());
    if let Err(e) = kactor_codegen::generate_errors_file(&errors, &out) {
        eprintln!("error table generation failed: {e}");
        std::process::exit(1);
    }
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
