//! ValidatingAdmissionPolicy engine: loads `admissionregistration.k8s.io/v1`
//! policies and bindings, compiles their CEL once, and evaluates admission
//! requests with the apiserver's semantics and messages.
//!
//! Owns: policy loading, matching, CEL evaluation, the combined decision.
//! Must not: do I/O on the request path. Everything a request needs beyond
//! the request itself (namespaces, params) comes from [`crate::params::PolicyInputs`],
//! implemented by the store snapshot.

mod build;
pub mod bundle;
mod compile;
mod crd_rules;
mod dispatch;
mod evaluate;
mod json_val;
pub mod k8s_lib;
mod load;
mod matching;
pub mod model;
mod params;
mod request;
pub mod routed;

pub use crd_rules::{CrdRules, CrdRulesError, FieldError};
pub use dispatch::{
    validate, validate_policy, BindingResult, Decision, ValidationOutcome,
    VALIDATION_FAILURE_ANNOTATION,
};
pub use load::{EvaluationLimits, ExpressionError, PolicyLoadError, PolicySet};
pub use params::GatingPolicy;
pub use request::{AdmissionRequestInput, LazyReview, RequestInputError};
pub(crate) use request::{Json, Shape};

/// The set is shared across request threads.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<PolicySet>();
};

#[cfg(test)]
mod engine_tests;
