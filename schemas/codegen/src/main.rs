//! `cargo run -p kactor-codegen -- <schema.json>...`: prints the Rust generated for each schema
//! (formatted with rustfmt when it is installed), for review.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        eprintln!("usage: kactor-codegen <schema.json>...");
        std::process::exit(2);
    }
    let mut code = String::new();
    for a in &args {
        match kactor_codegen::load_schema(Path::new(a)) {
            Ok(s) => code.push_str(&kactor_codegen::generate_schema(&s, None)),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
    }
    print!("{}", rustfmt(&code).unwrap_or(code));
}

fn rustfmt(code: &str) -> Option<String> {
    let mut child = Command::new("rustfmt")
        .args(["--edition", "2021", "--emit", "stdout"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(code.as_bytes()).ok()?;
    let out = child.wait_with_output().ok()?;
    if out.status.success() {
        String::from_utf8(out.stdout).ok()
    } else {
        None
    }
}
