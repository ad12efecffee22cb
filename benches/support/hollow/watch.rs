//! WATCH: held open until `timeoutSeconds` (kube-apiserver's default is
//! between 30 and 60 minutes; kube's watcher asks 290 s). Pods and Nodes
//! never change here, so their watches carry only bookmarks (one a
//! minute, as kube-apiserver sends, when `allowWatchBookmarks`); watches of
//! the writable kinds carry each write as it is made.

use super::server::{lock, Asked, Body, Change, State};
use super::store::{partial, Query, Resource};
use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper::Response;
use serde_json::json;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

const BOOKMARK_EVERY: Duration = Duration::from_secs(60);

pub fn open(
    state: &Arc<State>,
    asked: &Asked,
    r: &'static Resource,
    query: Query,
) -> Response<Body> {
    let timeout = asked
        .param("timeoutSeconds")
        .and_then(|t| t.parse().ok())
        .unwrap_or(1800u64);
    let bookmarks = asked.param("allowWatchBookmarks") == Some("true");
    let metadata = asked.metadata_only();
    let key = r.key();
    let mut changes = state.changes.subscribe();
    let (tx, mut rx) = mpsc::channel::<Bytes>(64);
    let state = state.clone();
    let component = lock(&state.component).clone();
    tokio::spawn(async move {
        let end = tokio::time::sleep(Duration::from_secs(timeout));
        tokio::pin!(end);
        let mut tick =
            tokio::time::interval_at(tokio::time::Instant::now() + BOOKMARK_EVERY, BOOKMARK_EVERY);
        loop {
            let (kind, object) = tokio::select! {
                () = &mut end => break,
                _ = tick.tick() => {
                    if !bookmarks { continue; }
                    let revision = lock(&state.objects).revision;
                    ("BOOKMARK".to_owned(), json!({"kind": r.kind, "apiVersion": r.api_version(),
                        "metadata": {"resourceVersion": revision.to_string()}}))
                }
                change = changes.recv() => match change {
                    Ok(Change { key: k, kind, object }) if k == key && query.value(&object) => {
                        let object = if metadata { partial(&object) } else { object };
                        (kind.to_string(), object)
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => break,
                },
            };
            // `type` before `object`, as kube-apiserver writes a WatchEvent
            // (a json! map would sort `object` first).
            let object = serde_json::to_string(&object).unwrap_or_default();
            let bytes = format!("{{\"type\":{},\"object\":{object}}}\n", json!(kind)).into_bytes();
            if let Some(t) = lock(&state.tallies).get_mut(&component) {
                t.bytes += bytes.len() as u64;
            }
            if tx.send(Bytes::from(bytes)).await.is_err() {
                break;
            }
        }
    });
    let stream = futures::stream::poll_fn(move |cx| {
        rx.poll_recv(cx)
            .map(|b| b.map(|b| Ok::<_, Infallible>(Frame::data(b))))
    });
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(StreamBody::new(stream).boxed())
        .unwrap_or_default()
}
