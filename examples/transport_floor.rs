//! The transport floor: TLS, HTTP and reading the body, plus the least
//! parsing an answer needs: the uid, borrowed from the body (the rest is
//! skipped, not built). Served on nodescope's own TLS listener.
//!
//! `transport_floor --listen 127.0.0.1:9444 --tls-cert tls.crt --tls-key tls.key`

mod floor;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

#[derive(Deserialize)]
struct Review<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'a str,
    #[serde(borrow)]
    request: Uid<'a>,
}

#[derive(Deserialize)]
struct Uid<'a> {
    uid: &'a str,
}

async fn review(request: Request) -> Response {
    let body = match floor::read_body(request).await {
        Ok(body) => body,
        Err(response) => return response,
    };
    let review: Review<'_> = match serde_json::from_slice(&body) {
        Ok(review) => review,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    // A uid is a UUID and the version a plain API version: no escaping needed.
    let answer = format!(
        r#"{{"apiVersion":"{}","kind":"AdmissionReview","response":{{"uid":"{}","allowed":true}}}}"#,
        review.api_version, review.request.uid
    );
    floor::json(answer.into_bytes())
}

fn main() -> Result<(), String> {
    floor::run(review)
}
