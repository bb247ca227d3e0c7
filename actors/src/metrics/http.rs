//! The observability endpoint on `kactor.http.address` (what Kafka delegates to a JMX exporter
//! agent): `GET /metrics`, `/healthz`, `/readyz`.
//!
//! A deliberately small HTTP/1.1 server on the actix (tokio) runtime: Prometheus and Kubernetes
//! probes send one short GET per connection, so a request line plus headers capped at
//! [`MAX_REQUEST_HEAD_BYTES`] and `Connection: close` responses are all it takes, without
//! pulling a web framework into the broker.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Requests with a longer head than this are answered 431 and closed.
pub const MAX_REQUEST_HEAD_BYTES: usize = 8192;
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Binds `addr` now (so a taken port fails start-up) and serves on the current runtime.
/// Returns the bound address (useful with port 0).
pub async fn serve(addr: SocketAddr) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tracing::info!(address = %local, "metrics and health endpoint listening");
    actix_rt::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    actix_rt::spawn(handle(stream));
                }
                Err(e) => {
                    // Typically EMFILE: back off instead of spinning.
                    tracing::warn!(error = %e, "metrics endpoint accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });
    Ok(local)
}

async fn handle(mut stream: TcpStream) {
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    let complete = tokio::time::timeout(READ_TIMEOUT, async {
        loop {
            if head.windows(4).any(|w| w == b"\r\n\r\n") {
                return true;
            }
            if head.len() >= MAX_REQUEST_HEAD_BYTES {
                return false;
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => head.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await
    .unwrap_or(false);
    let response = if complete {
        respond(&head)
    } else if head.len() >= MAX_REQUEST_HEAD_BYTES {
        reply(431, "text/plain", "request header too large\n".into())
    } else {
        return;
    };
    let _ = stream.write_all(&response).await;
    let _ = stream.shutdown().await;
}

/// Routes one request head to a response (status line, headers, body).
pub fn respond(head: &[u8]) -> Vec<u8> {
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if path == "/debug/panic" && crate::runtime::fault_injection::enabled() {
        // Only a POST arms anything.
        if method != "POST" {
            return reply(405, "text/plain", "use POST\n".into());
        }
        if let Some(outcome) = crate::runtime::fault_injection::arm_from_query(query) {
            return match outcome {
                Ok(text) => reply(200, "text/plain", text + "\n"),
                Err(e) => reply(400, "text/plain", e + "\n"),
            };
        }
    }
    if method != "GET" && method != "HEAD" {
        return reply(405, "text/plain", "only GET is served\n".into());
    }
    let mut resp = match path {
        "/metrics" => reply(
            200,
            "text/plain; version=0.0.4; charset=utf-8",
            super::render(),
        ),
        "/healthz" => reply(200, "text/plain", "ok\n".into()),
        "/readyz" => match super::readiness().check() {
            Ok(()) => reply(200, "text/plain", "ready\n".into()),
            Err(unmet) => reply(
                503,
                "text/plain",
                format!("not ready: {}\n", unmet.join(", ")),
            ),
        },
        _ => reply(
            404,
            "text/plain",
            "not found; try /metrics, /healthz, /readyz\n".into(),
        ),
    };
    if method == "HEAD" {
        if let Some(end) = resp.windows(4).position(|w| w == b"\r\n\r\n") {
            resp.truncate(end + 4);
        }
    }
    resp
}

fn reply(status: u16, content_type: &str, body: String) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Error",
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(b: Vec<u8>) -> String {
        String::from_utf8(b).unwrap()
    }

    #[test]
    fn routes() {
        assert!(text(respond(b"GET /healthz HTTP/1.1\r\n\r\n")).starts_with("HTTP/1.1 200 OK"));
        assert!(text(respond(b"GET /nope HTTP/1.1\r\n\r\n")).starts_with("HTTP/1.1 404"));
        assert!(text(respond(b"POST /metrics HTTP/1.1\r\n\r\n")).starts_with("HTTP/1.1 405"));
        let m = text(respond(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"));
        assert!(m.starts_with("HTTP/1.1 200 OK") && m.contains("text/plain; version=0.0.4"));
    }
}
