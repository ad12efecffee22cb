//! The naive floor: what most webhooks do before any logic. It parses the
//! whole AdmissionReview into a `serde_json::Value` and answers
//! `allowed: true` with the uid, on nodescope's own TLS listener.
//!
//! `naive_floor --listen 127.0.0.1:9443 --tls-cert tls.crt --tls-key tls.key`

mod floor;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

async fn review(request: Request) -> Response {
    let body = match floor::read_body(request).await {
        Ok(body) => body,
        Err(response) => return response,
    };
    let review: Value = match serde_json::from_slice(&body) {
        Ok(review) => review,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let answer = json!({
        "apiVersion": review["apiVersion"],
        "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], "allowed": true}
    });
    floor::json(serde_json::to_vec(&answer).unwrap_or_default())
}

fn main() -> Result<(), String> {
    floor::run(review)
}
