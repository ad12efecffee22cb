//! The pure core of the webhook: request bytes in, response bytes out.
//!
//! `answer` is a function of (body, [`Decider`]) only: no I/O, no locks, no
//! API calls. The HTTP server, the dry-run CLI and the benches all call it.

pub mod response;
pub mod review;

pub use response::{Denial, Verdict};
pub use review::{parse, Review, ReviewError, ReviewVersion};

use crate::metrics::{ReviewResult, Webhook};

/// Everything a decision may read: immutable snapshots taken once per
/// request, so a reload in the middle of a review cannot tear it.
#[derive(Debug, Default, Clone)]
pub struct Decider {}

/// A finished answer for the HTTP layer, with the labels its metrics need.
#[derive(Debug)]
pub struct Answer {
    /// 200 for any AdmissionReview response, 400 when the body is not a review.
    pub http_status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub operation: String,
    pub resource: String,
    pub result: ReviewResult,
}

impl Answer {
    fn bad_request(error: &ReviewError) -> Self {
        Self {
            http_status: 400,
            content_type: "text/plain; charset=utf-8",
            body: format!("{error}\n").into_bytes(),
            operation: String::new(),
            resource: String::new(),
            result: ReviewResult::Error,
        }
    }
}

/// Decides one review for `webhook` and encodes the response.
#[must_use]
pub fn answer(webhook: Webhook, body: &[u8], decider: &Decider) -> Answer {
    let review = match review::parse(body) {
        Ok(review) => review,
        Err(error) => return Answer::bad_request(&error),
    };
    let (verdict, errored) = match webhook {
        Webhook::Mutate => decide_mutation(&review, decider),
        Webhook::Validate => decide_validation(&review, decider),
    };
    let result = if errored {
        ReviewResult::Error
    } else if verdict.denial.is_some() {
        ReviewResult::Denied
    } else if verdict.patch.is_some() {
        ReviewResult::Patched
    } else {
        ReviewResult::Allowed
    };
    Answer {
        http_status: 200,
        content_type: "application/json",
        body: response::encode(review.version, &review.uid, &verdict),
        operation: review.operation.clone().into_owned(),
        resource: review.resource_path().into_owned(),
        result,
    }
}

/// The mutating webhook's decision; the bool says an internal error was
/// turned into an unchanged, allowed pod.
fn decide_mutation(_review: &Review<'_>, _decider: &Decider) -> (Verdict, bool) {
    (Verdict::allow(), false)
}

/// The validating webhook's decision; the bool says evaluation failed.
fn decide_validation(_review: &Review<'_>, _decider: &Decider) -> (Verdict, bool) {
    (Verdict::allow(), false)
}
