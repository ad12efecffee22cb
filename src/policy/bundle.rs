//! The policy bundle (`policies/*.yaml`) compiled into the binary, so
//! `dry-run` and `test` work anywhere without a checkout.
//!
//! The list is explicit; a test checks it against the directory so a new
//! policy file cannot be left out.

use crate::manifest::parse_documents;
use crate::policy::{PolicyLoadError, PolicySet};
use serde_json::Value;

/// `(file name, contents)` of every YAML file directly under `policies/`.
pub const FILES: &[(&str, &str)] = &[
    (
        "balloon-pods.yaml",
        include_str!("../../policies/balloon-pods.yaml"),
    ),
    (
        "balloon-priorityclass.yaml",
        include_str!("../../policies/balloon-priorityclass.yaml"),
    ),
    (
        "balloon-resize.yaml",
        include_str!("../../policies/balloon-resize.yaml"),
    ),
    (
        "feature-crd.yaml",
        include_str!("../../policies/feature-crd.yaml"),
    ),
    (
        "feature-gates.yaml",
        include_str!("../../policies/feature-gates.yaml"),
    ),
    (
        "node-resizer.yaml",
        include_str!("../../policies/node-resizer.yaml"),
    ),
    (
        "vpa-scope-portable.yaml",
        include_str!("../../policies/vpa-scope-portable.yaml"),
    ),
    (
        "vpa-scope.yaml",
        include_str!("../../policies/vpa-scope.yaml"),
    ),
];

/// How bundled files are named in messages.
#[must_use]
pub fn source_name(file: &str) -> String {
    format!("<bundled policies>/{file}")
}

/// Compiles the bundled policies.
///
/// # Errors
/// Only if the bundle itself is broken, which the bundle's tests rule out.
pub fn policy_set() -> Result<PolicySet, PolicyLoadError> {
    PolicySet::from_documents(
        FILES
            .iter()
            .map(|(file, text)| (source_name(file), (*text).to_owned()))
            .collect(),
    )
}

/// The objects the bundle installs besides policies, bindings and CRDs (the
/// resizers ConfigMap): `kubectl apply -f policies/` creates them, so a dry
/// run sees them as params.
#[must_use]
pub fn extra_objects() -> Vec<Value> {
    FILES
        .iter()
        .filter_map(|(file, text)| parse_documents(&source_name(file), text).ok())
        .flatten()
        .map(|document| document.value)
        .filter(is_installed_object)
        .collect()
}

/// Whether a document of a policy directory is an object (not a policy, a
/// binding, a CRD, or the kustomization of a directory such as
/// `manifests/base/policies`) that installing the directory creates.
#[must_use]
pub fn is_installed_object(value: &Value) -> bool {
    !matches!(
        value.get("kind").and_then(Value::as_str),
        Some(
            "ValidatingAdmissionPolicy"
                | "ValidatingAdmissionPolicyBinding"
                | "CustomResourceDefinition"
                | "Kustomization"
                | "Component"
        ) | None
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_list_is_exactly_the_yaml_files_of_policies() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/policies");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .expect("policies/ exists")
            .filter_map(Result::ok)
            .filter(|e| e.path().is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".yaml") || n.ends_with(".yml"))
            .collect();
        on_disk.sort();
        let embedded: Vec<String> = FILES.iter().map(|(n, _)| (*n).to_owned()).collect();
        assert_eq!(embedded, on_disk, "update src/policy/bundle.rs");
        for (name, text) in FILES {
            let path = format!("{dir}/{name}");
            assert_eq!(
                std::fs::read_to_string(&path).expect("readable"),
                *text,
                "{path}"
            );
        }
    }

    #[test]
    fn the_bundle_compiles_and_installs_the_resizers_configmap() {
        let set = policy_set().expect("bundle compiles");
        assert!(set.policy_names().contains(&"nodescope-vpa-scope"));
        let extras = extra_objects();
        assert_eq!(extras.len(), 1);
        assert_eq!(extras[0]["kind"], "ConfigMap");
    }
}
