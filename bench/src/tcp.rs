//! The machine's loopback TCP ceiling: one connection on 127.0.0.1, a writer thread doing
//! `write_size`-byte writes and a reader draining them, the same socket path a broker's
//! produce traffic takes (Kafka has no counterpart; this bounds what any broker could do).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

use anyhow::{anyhow, Result};
use serde_json::{json, Value};

use crate::secs;

#[derive(clap::Args)]
pub struct Args {
    /// Bytes per write(2).
    #[arg(long, default_value_t = 1024)]
    pub write_size: usize,
    #[arg(long, default_value_t = 3.0)]
    pub duration_s: f64,
    /// Bound on the total bytes written.
    #[arg(long, default_value_t = 64 << 30)]
    pub max_bytes: u64,
    /// Disable Nagle, as Kafka clients and brokers do.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub nodelay: bool,
}

pub fn run(a: &Args) -> Result<Value> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let reader = std::thread::spawn(move || -> Result<u64> {
        let (mut s, _) = listener.accept()?;
        let mut buf = vec![0u8; 256 * 1024];
        let mut total = 0u64;
        loop {
            match s.read(&mut buf)? {
                0 => return Ok(total),
                n => total += n as u64,
            }
        }
    });
    let mut w = TcpStream::connect(addr)?;
    w.set_nodelay(a.nodelay)?;
    let buf = vec![b'x'; a.write_size.max(1)];
    let start = Instant::now();
    let end = start + secs(a.duration_s);
    let (mut written, mut writes) = (0u64, 0u64);
    while written < a.max_bytes && Instant::now() < end {
        // A batch of writes between clock reads keeps the clock out of the measurement.
        for _ in 0..64 {
            w.write_all(&buf)?;
        }
        written += 64 * buf.len() as u64;
        writes += 64;
    }
    drop(w);
    let read = reader
        .join()
        .map_err(|_| anyhow!("reader thread panicked"))??;
    let el = start.elapsed().as_secs_f64().max(1e-9);
    Ok(json!({
        "kind": "tcp", "write_size": a.write_size, "nodelay": a.nodelay,
        "bytes": read, "writes": writes, "elapsed_s": (el * 1000.0).round() / 1000.0,
        "mib_per_s": ((read as f64 / el / 1048576.0) * 100.0).round() / 100.0,
        "writes_per_s": (writes as f64 / el).round(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_written_byte_is_read_back() {
        let v = run(&Args {
            write_size: 1000,
            duration_s: 0.05,
            max_bytes: 640_000,
            nodelay: true,
        })
        .unwrap();
        assert_eq!(v["bytes"], v["writes"].as_u64().unwrap() * 1000);
        assert!(v["bytes"].as_u64().unwrap() <= 640_000);
    }
}
