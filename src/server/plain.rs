//! Plain HTTP sent to the TLS port gets a plain-HTTP answer saying so, as
//! Go's servers give, instead of TLS alert bytes that no HTTP client can
//! show (`curl http://…:8443` would print "Received HTTP/0.9 when not
//! allowed" or nothing useful).
//!
//! The first byte decides: every TLS connection opens with a handshake
//! record (content type 22, 0x16), and every HTTP/1.x request with a method
//! in capital letters. It is peeked, not read, so a TLS connection reaches
//! rustls untouched.

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The answer: Go's words, in HTTP/1.1 with a length, so any client shows it.
const BODY: &str = "Client sent an HTTP request to an HTTPS server.\n";

fn response() -> String {
    format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{BODY}",
        BODY.len()
    )
}

/// Bytes of the request read and dropped before and after answering.
const LINGER_BYTES: usize = 64 * 1024;

/// How long the client gets to close its end after the answer.
const LINGER_TIME: Duration = Duration::from_secs(2);

/// Whether the connection opens with what can only be an HTTP request.
/// Anything else, TLS or not, is left to rustls to accept or refuse.
pub(super) async fn is_plain_http(stream: &TcpStream) -> bool {
    let mut first = [0u8; 1];
    matches!(stream.peek(&mut first).await, Ok(1) if first[0].is_ascii_uppercase())
}

/// Answers 400 and closes. The request is read first, and whatever follows
/// until the client closes (within bounds), because closing a socket with
/// unread data makes the kernel send a reset, which can destroy the answer
/// before the client reads it.
pub(super) async fn refuse(mut stream: TcpStream) {
    let mut buf = vec![0u8; 8 * 1024];
    let mut head = Vec::new();
    // The request head: until its blank line, the size bound, or a pause.
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < LINGER_BYTES {
        match tokio::time::timeout(Duration::from_millis(500), stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    if stream.write_all(response().as_bytes()).await.is_err() || stream.shutdown().await.is_err() {
        return;
    }
    let linger = async {
        let mut read = 0;
        while read < LINGER_BYTES {
            match stream.read(&mut buf).await {
                Ok(n) if n > 0 => read += n,
                _ => break,
            }
        }
    };
    let _ = tokio::time::timeout(LINGER_TIME, linger).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_is_a_complete_http_response() {
        let text = response();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or_default();
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
        assert!(
            head.contains(&format!("Content-Length: {}", body.len())),
            "{head}"
        );
        assert_eq!(body, "Client sent an HTTP request to an HTTPS server.\n");
    }
}
