//! What policies read from the cluster besides the request: namespaces and
//! param objects. The policy engine asks through [`PolicyInputs`]; the store
//! snapshot answers, so the two meet here instead of importing each other.

use crate::selector::LabelSelector;

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
