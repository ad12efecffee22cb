//! The pure core of the webhook: request bytes in, response bytes out.
//!
//! `answer` is a function of (body, [`Decider`]) only: no I/O, no locks, no
//! API calls. The HTTP server, the dry-run CLI and the benches all call it.

mod decide;
pub mod response;
pub mod review;

pub use response::{Denial, Verdict};
pub use review::{parse, Review, ReviewError, ReviewVersion};

use crate::metrics::{ReviewResult, Webhook};
use crate::mutate::pod::PodView;
use crate::mutate::{BoostSettings, MissingNodeRecommendation};
use crate::policy::PolicySet;
use crate::store::Snapshot;
use decide::{answer_validation, decide_mutation, unreadable_object};
use std::sync::Arc;

/// Everything a decision may read: immutable snapshots taken once per
/// request, so a reload in the middle of a review cannot tear it.
#[derive(Debug, Clone)]
pub struct Decider {
    pub store: Arc<Snapshot>,
    pub policies: Arc<PolicySet>,
    pub missing_node: MissingNodeRecommendation,
    /// `--feature-gates CPUStartupBoost` and `--max-allowed-cpu-boost`.
    pub boost: BoostSettings,
}

impl Decider {
    /// A decider over `store` and `policies` with default options.
    #[must_use]
    pub fn new(store: Arc<Snapshot>, policies: Arc<PolicySet>) -> Self {
        Self {
            store,
            policies,
            missing_node: MissingNodeRecommendation::default(),
            boost: BoostSettings::default(),
        }
    }
}

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
    /// As [`Verdict::unusable_recommendations`].
    pub unusable_recommendations: usize,
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
            unusable_recommendations: 0,
        }
    }
}

/// Decides one review for `webhook` and encodes the response.
#[must_use]
pub fn answer(webhook: Webhook, body: &[u8], decider: &Decider) -> Answer {
    let answered = match webhook {
        Webhook::Mutate => match review::parse_as::<PodView<'_>>(body) {
            Ok(review) => Ok(finish(&review, decide_mutation(&review, decider))),
            // Not a readable pod: read the envelope alone so the answer still
            // carries the uid and says what was wrong.
            Err(_) => review::parse(body).map(|review| finish(&review, unreadable_object(&review))),
        },
        Webhook::Validate => answer_validation(body, decider),
    };
    answered.unwrap_or_else(|error| Answer::bad_request(&error))
}

/// Encodes `verdict` for `review`; `errored` marks an internal error.
fn finish<O>(review: &Review<'_, O>, (verdict, errored): (Verdict, bool)) -> Answer {
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
        unusable_recommendations: verdict.unusable_recommendations,
    }
}

#[cfg(test)]
mod scope_tests;
#[cfg(test)]
mod tests;
