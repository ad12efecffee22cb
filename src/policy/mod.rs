//! ValidatingAdmissionPolicy engine: loads `admissionregistration.k8s.io/v1`
//! policies and bindings, compiles their CEL once, and evaluates admission
//! requests with the apiserver's semantics and messages.
//!
//! Owns: policy loading, matching, CEL evaluation, the combined decision.
//! Must not: do I/O on the request path. Everything a request needs beyond
//! the request itself (namespaces, params) comes from [`PolicyInputs`],
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

pub use crd_rules::{CrdRules, CrdRulesError, FieldError};
pub use dispatch::{
    validate, validate_policy, BindingResult, Decision, ValidationOutcome,
    VALIDATION_FAILURE_ANNOTATION,
};
pub use load::{EvaluationLimits, ExpressionError, PolicyLoadError, PolicySet};
pub use model::LabelSelector;
pub use params::GatingPolicy;
pub use request::{AdmissionRequestInput, LazyReview, RequestInputError};
pub(crate) use request::{Json, Shape};

/// The cluster state policies read: namespaces and param objects.
///
/// Implemented by the store snapshot. Called on the request path, so every
/// method must be a cheap in-memory lookup; the answers may be slightly stale
/// (they come from a watch), exactly as the apiserver's informers are.
pub trait PolicyInputs {
    /// The Namespace object called `name`, if known.
    fn namespace(&self, name: &str) -> Option<&serde_json::Value>;

    /// One param object by name. `namespace` is `None` for a cluster-scoped
    /// lookup (a paramRef without namespace on a cluster-scoped request).
    fn param(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<&serde_json::Value>;

    /// Every param object whose labels match `selector` (see
    /// [`LabelSelector::matches_object`]); the policy runs once per param.
    fn params_matching(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        selector: &LabelSelector,
    ) -> Vec<&serde_json::Value>;
}

/// Inputs with no namespaces and no params, for requests and tests that need
/// none.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoInputs;

impl PolicyInputs for NoInputs {
    fn namespace(&self, _name: &str) -> Option<&serde_json::Value> {
        None
    }

    fn param(&self, _: &str, _: &str, _: Option<&str>, _: &str) -> Option<&serde_json::Value> {
        None
    }

    fn params_matching(
        &self,
        _: &str,
        _: &str,
        _: Option<&str>,
        _: &LabelSelector,
    ) -> Vec<&serde_json::Value> {
        Vec::new()
    }
}

/// The set is shared across request threads.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<PolicySet>();
};

#[cfg(test)]
mod engine_tests;
