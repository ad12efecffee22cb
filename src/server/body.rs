//! Reading a review body under `--max-body-bytes`, and refusing a larger one
//! so that the client actually reads the refusal.
//!
//! A client may write its whole body before it reads anything (curl and Go
//! do for small-enough bodies, and an HTTP/2 client blocked on flow control
//! does in effect). Answering 413 and closing with the rest unread makes the
//! kernel reset the connection, or hyper reset the stream, and the client
//! sees a broken pipe or `Stream error in the HTTP/2 framing layer` instead
//! of the answer. So the rest is read and thrown away first, within bounds,
//! as nginx's lingering close does.

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap};
use http_body_util::BodyExt;
use std::time::Duration;

/// The most of an oversized body read and discarded: enough for any client
/// that merely misjudged the limit, small enough that reading it is cheap.
const DISCARD_BYTES: u64 = 64 * 1024 * 1024;

/// The longest time spent discarding: a client that trickles its body is
/// not waited for, and a drain on shutdown is not held up for long.
const DISCARD_TIME: Duration = Duration::from_secs(10);

/// Why a body was not read.
pub(super) enum BodyError {
    /// Over the limit: the caller answers 413.
    TooLarge,
    /// The connection failed mid-body; the message says how.
    Read(String),
}

/// The declared `Content-Length`, if any and well formed.
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// Whether the client waits for `100 Continue` before sending the body: it
/// then has sent nothing yet, and nothing needs to be discarded.
fn expects_continue(headers: &HeaderMap) -> bool {
    headers
        .get(header::EXPECT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
}

/// Reads the whole body if it is at most `limit` bytes.
pub(super) async fn read(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Bytes, BodyError> {
    let limit = limit as u64;
    if let Some(declared) = declared_length(headers) {
        if declared > limit {
            // Polling the body would make hyper send `100 Continue`,
            // inviting the very bytes that are to be thrown away.
            if !expects_continue(headers) && declared <= limit + DISCARD_BYTES {
                discard(body).await;
            }
            return Err(BodyError::TooLarge);
        }
    }
    let mut body = body;
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut length = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyError::Read(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        length += data.len() as u64;
        if length > limit {
            discard(body).await;
            return Err(BodyError::TooLarge);
        }
        chunks.push(data);
    }
    Ok(match chunks.len() {
        0 => Bytes::new(),
        1 => chunks.swap_remove(0),
        _ => {
            let mut whole = Vec::with_capacity(usize::try_from(length).unwrap_or(0));
            for chunk in &chunks {
                whole.extend_from_slice(chunk);
            }
            Bytes::from(whole)
        }
    })
}

/// Reads and drops the body of a request refused before its body was
/// looked at (no route, wrong method, wrong Content-Type), within the same
/// bounds as an oversized one, so the refusal reaches a client that writes
/// its whole body before reading: over HTTP/2 an unread body makes hyper
/// reset the stream, and the client sees the reset instead of the answer.
pub(super) async fn discard_unread(headers: &HeaderMap, body: Body) {
    let too_long = declared_length(headers).is_some_and(|declared| declared > DISCARD_BYTES);
    if !expects_continue(headers) && !too_long {
        discard(body).await;
    }
}

/// Reads and drops the rest of `body`, up to [`DISCARD_BYTES`] and
/// [`DISCARD_TIME`]. Past either bound the answer goes out anyway and hyper
/// closes the connection (HTTP/1.1) or resets the stream (HTTP/2).
async fn discard(mut body: Body) {
    let drain = async {
        let mut read = 0u64;
        while let Some(Ok(frame)) = body.frame().await {
            if let Some(data) = frame.data_ref() {
                read += data.len() as u64;
                if read > DISCARD_BYTES {
                    return;
                }
            }
        }
    };
    let _ = tokio::time::timeout(DISCARD_TIME, drain).await;
}
