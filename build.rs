//! Lists the module paths of the crates that log (kactor, kactor-actors): they are the tracing
//! targets `kafka-configs --entity-type broker-loggers` names as loggers (OUT_DIR/loggers.rs).

use std::path::Path;

/// Module paths of the source files under `dir`, the crate root being `krate`. Modules are
/// files (`a/b.rs`) or directories (`a/b/mod.rs`); inline modules are not loggers of their own.
fn modules(dir: &Path, krate: &str, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            let module = format!("{krate}::{name}");
            if path.join("mod.rs").exists() {
                out.push(module.clone());
            }
            modules(&path, &module, out);
        } else if let Some(stem) = name.strip_suffix(".rs") {
            // `tests` files are `#[cfg(test)]` modules: not in the binary.
            if !matches!(stem, "mod" | "lib" | "main" | "tests") {
                out.push(format!("{krate}::{stem}"));
            }
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut targets = Vec::new();
    for (dir, krate) in [("src", "kactor"), ("actors/src", "kactor_actors")] {
        println!("cargo:rerun-if-changed={dir}");
        targets.push(krate.to_string());
        modules(&root.join(dir), krate, &mut targets);
    }
    targets.sort();
    let body: String = targets.iter().map(|t| format!("    {t:?},\n")).collect();
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("loggers.rs");
    std::fs::write(
        out,
        format!("/// kactor's module paths (tracing targets).\npub const LOGGER_TARGETS: &[&str] = &[\n{body}];\n"),
    )
    .expect("write loggers.rs");
}
