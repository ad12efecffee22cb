//! What the bundle needs from the store: the namespaces whose param objects
//! the bindings name, so the kube store watches exactly those.

use super::PolicySet;

impl PolicySet {
    /// Namespaces named by bindings' `paramRef.namespace`, sorted, unique.
    #[must_use]
    pub fn param_namespaces(&self) -> Vec<String> {
        let mut namespaces: Vec<String> = self
            .policies
            .iter()
            .flat_map(|p| p.bindings.iter())
            .filter_map(|b| b.spec.param_ref.as_ref()?.namespace.clone())
            .filter(|ns| !ns.is_empty())
            .collect();
        namespaces.sort();
        namespaces.dedup();
        namespaces
    }
}
