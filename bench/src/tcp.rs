//! The machine's loopback TCP ceiling: one connection on 127.0.0.1, a writer thread doing
//! `write_size`-byte writes and a reader draining them, the same socket path a broker's
//! produce traffic takes (Kafka has no counterpart; this bounds what any broker could do).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

use anyhow::{anyhow, bail, Result};
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

#[derive(clap::Args)]
pub struct FetchArgs {
    /// Bytes of each response (records; a 4-byte length prefix goes before them).
    #[arg(long, default_value_t = 1 << 20)]
    pub response_size: usize,
    /// SO_SNDBUF of the serving socket: Kafka's `socket.send.buffer.bytes` default, which
    /// both brokers run with; -1 leaves the kernel's autotuning.
    #[arg(long, default_value_t = 102_400, allow_hyphen_values = true)]
    pub send_buffer: i32,
    #[arg(long, default_value_t = 2.0)]
    pub duration_s: f64,
    /// Bound on the number of request/response cycles.
    #[arg(long, default_value_t = 100_000)]
    pub max_cycles: u64,
}

/// The loopback floor of a fetch round trip: a server that does nothing but answer each small
/// request with `response_size` bytes from a file in the page cache, by `sendfile(2)` through
/// a socket with the brokers' send buffer, blocking (the kernel wakes it as the reader makes
/// room, with no event loop in between), and a client that writes a request and reads the
/// whole response, one at a time as librdkafka does. Whatever a broker does, its fetch round
/// trip for a response of this size cannot be shorter.
pub fn fetch_floor(a: &FetchArgs) -> Result<Value> {
    use std::os::fd::AsRawFd;
    let size = a.response_size.max(1);
    let mut file = tempfile()?;
    file.write_all(&vec![b'r'; size])?;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let send_buffer = a.send_buffer;
    let server = std::thread::spawn(move || -> Result<()> {
        let (mut s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        if send_buffer > 0 {
            // SAFETY: a valid socket descriptor and a pointer to an int of the size given.
            let rc = unsafe {
                libc::setsockopt(
                    s.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_SNDBUF,
                    (&send_buffer as *const i32).cast(),
                    std::mem::size_of::<i32>() as libc::socklen_t,
                )
            };
            if rc != 0 {
                return Err(std::io::Error::last_os_error().into());
            }
        }
        let mut req = [0u8; REQUEST_SIZE];
        loop {
            if s.read_exact(&mut req).is_err() {
                return Ok(()); // the client is done
            }
            s.write_all(&(size as u32).to_be_bytes())?;
            let mut offset: libc::off_t = 0;
            while (offset as usize) < size {
                // SAFETY: both descriptors are open; `offset` is ours and the kernel advances it.
                let n = unsafe {
                    libc::sendfile(
                        s.as_raw_fd(),
                        file.as_raw_fd(),
                        &mut offset,
                        size - offset as usize,
                    )
                };
                if n < 0 {
                    return Err(anyhow!("sendfile: {}", std::io::Error::last_os_error()));
                }
                if n == 0 {
                    bail!("sendfile: the file is shorter than the response");
                }
            }
        }
    });
    let mut c = TcpStream::connect(addr)?;
    c.set_nodelay(true)?;
    let req = [b'q'; REQUEST_SIZE];
    let mut resp = vec![0u8; size];
    let mut hist = crate::stats::new_histogram();
    let start = Instant::now();
    let end = start + secs(a.duration_s);
    let mut cycles = 0u64;
    while cycles < a.max_cycles && Instant::now() < end {
        let t = Instant::now();
        c.write_all(&req)?;
        let mut len = [0u8; 4];
        c.read_exact(&mut len)?;
        if u32::from_be_bytes(len) as usize != size {
            bail!("response length {} != {size}", u32::from_be_bytes(len));
        }
        c.read_exact(&mut resp)?;
        crate::stats::record(&mut hist, t.elapsed().as_micros() as u64);
        cycles += 1;
    }
    let el = start.elapsed().as_secs_f64().max(1e-9);
    drop(c);
    server
        .join()
        .map_err(|_| anyhow!("server thread panicked"))??;
    Ok(json!({
        "kind": "fetch-floor", "response_size": size, "send_buffer": a.send_buffer,
        "cycles": cycles, "elapsed_s": (el * 1000.0).round() / 1000.0,
        "rtt": crate::stats::summary(&hist),
        "mib_per_s": ((cycles as f64 * size as f64 / el / 1048576.0) * 100.0).round() / 100.0,
    }))
}

/// About a consumer's Fetch request for a few partitions.
const REQUEST_SIZE: usize = 100;

/// An unnamed file (unlinked at once) whose pages stay in the page cache while it is open.
fn tempfile() -> Result<std::fs::File> {
    let dir = std::env::temp_dir();
    for i in 0..100u32 {
        let path = dir.join(format!("kactor-bench-fetch-{}-{i}", std::process::id()));
        if let Ok(f) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
        {
            std::fs::remove_file(&path)?;
            return Ok(f);
        }
    }
    bail!("no temporary file in {}", dir.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_fetch_cycle_reads_the_whole_response() {
        let v = fetch_floor(&FetchArgs {
            response_size: 300_000,
            send_buffer: 102_400,
            duration_s: 5.0,
            max_cycles: 20,
        })
        .unwrap();
        assert_eq!(v["cycles"], 20);
        assert_eq!(v["rtt"]["count"], 20);
        assert!(v["rtt"]["p50_us"].as_u64().unwrap() > 0);
    }

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
