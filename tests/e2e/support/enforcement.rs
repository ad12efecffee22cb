//! The two enforcers of the `enforcers` step, switched on and off as a
//! whole: the bundle's bindings (the apiserver enforces the policies
//! natively) and nodescope's `/validate` registered as the shipped
//! validating webhooks. A sentinel in each tells when the apiserver
//! enforces what was just written.

use super::cluster::{self, dry_run_create};
use super::nodescope as ns;
use crate::common::Server;
use kube::Client;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// Bounds a hang of a switch; never a measure of speed.
const LIMIT: Duration = Duration::from_secs(30);
const SENTINEL: &str = "e2e-enforcers-sentinel";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Native,
    Webhook,
}

/// The policy directory's documents, by what the test does with them.
pub struct Bundle {
    pub crds: Vec<Value>,
    /// The ValidatingAdmissionPolicies, and the sentinel's.
    pub policies: Vec<Value>,
    pub bindings: Vec<Value>,
    /// What else `kubectl apply -f policies/` creates (the resizers
    /// ConfigMap): absent unless a case lists it, as suites are hermetic.
    pub installed: Vec<Value>,
    /// Bindings that keep each paramKind in use for the whole step (see
    /// [`keepers`]).
    pub keepers: Vec<Value>,
}

impl Bundle {
    pub fn read(root: &Path) -> Bundle {
        let mut files: Vec<String> = std::fs::read_dir(root.join("policies"))
            .unwrap_or_else(|e| panic!("policies/: {e}"))
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .filter(|n| n.ends_with(".yaml") || n.ends_with(".yml"))
            .collect();
        files.sort();
        let mut bundle = Bundle {
            crds: vec![],
            policies: vec![],
            bindings: vec![],
            installed: vec![],
            keepers: vec![],
        };
        for file in files {
            for object in cluster::documents(&format!("policies/{file}")) {
                match object["kind"].as_str().unwrap_or_default() {
                    "CustomResourceDefinition" => bundle.crds.push(object),
                    "ValidatingAdmissionPolicy" => bundle.policies.push(object),
                    "ValidatingAdmissionPolicyBinding" => bundle.bindings.push(object),
                    _ => bundle.installed.push(object),
                }
            }
        }
        // A policy that denies one ConfigMap no case uses: once its binding,
        // created after the bundle's, is enforced, so are the bundle's.
        bundle.policies.push(json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": SENTINEL},
            "spec": {"failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["configmaps"]}]},
                "matchConditions": [{"name": "sentinel", "expression": format!("object.metadata.name == '{SENTINEL}'")}],
                "validations": [{"expression": "false", "message": SENTINEL}]},
        }));
        let (policies, bindings) = keepers(&bundle.policies);
        bundle.policies.extend(policies);
        bundle.keepers = bindings;
        bundle
    }
}

/// A policy and binding per paramKind of the bundle, matching nothing,
/// bound for the whole step. kube-apiserver (kubernetes/kubernetes#130887,
/// v1.36.2 included) stops a built-in paramKind's informer for good, per
/// process, once no binding names that paramKind for one refresh: every
/// ConfigMap param lookup then sees the store as it was, and switching the
/// native enforcer off and on again would deny every resize with "no params
/// found". (CRD paramKinds are not affected; they are kept all the same.)
fn keepers(policies: &[Value]) -> (Vec<Value>, Vec<Value>) {
    let mut kinds: Vec<Value> = policies
        .iter()
        .map(|p| p["spec"]["paramKind"].clone())
        .filter(|k| k.is_object())
        .collect();
    kinds.sort_by_key(|k| k.to_string());
    kinds.dedup();
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| {
            let name = format!("e2e-keep-param-kind-{i}");
            let policy = json!({
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": name},
                "spec": {"failurePolicy": "Ignore", "paramKind": kind,
                    "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                        "operations": ["CREATE"], "resources": ["configmaps"]}]},
                    "matchConditions": [{"name": "never", "expression": "false"}],
                    "validations": [{"expression": "true"}]},
            });
            let binding = json!({
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": name},
                "spec": {"policyName": name, "validationActions": ["Deny"],
                    "paramRef": {"name": name, "namespace": "default", "parameterNotFoundAction": "Allow"}},
            });
            (policy, binding)
        })
        .unzip()
}

/// The two enforcers, each switched on and off as a whole.
pub struct Enforcers {
    pub bindings: Vec<Value>,
    webhooks: Value,
}

impl Enforcers {
    pub fn new(bundle: &Bundle, server: &Server) -> Enforcers {
        let mut bindings = bundle.bindings.clone();
        bindings.push(json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": SENTINEL},
            "spec": {"policyName": SENTINEL, "validationActions": ["Deny"]},
        }));
        // The shipped webhooks, and one in the same configuration (so in
        // force at the same moment) that fails for the sentinel ConfigMap:
        // nodescope serves no such path.
        let mut webhooks = ns::webhook_configuration("validating.yaml", "e2e-enforcers", server);
        let mut sentinel = webhooks["webhooks"][0].clone();
        sentinel["name"] = json!("sentinel.e2e.nodescope.dev");
        sentinel["failurePolicy"] = json!("Fail");
        sentinel["clientConfig"]["url"] = json!(format!(
            "https://127.0.0.1:{}/{SENTINEL}",
            server.addr.port()
        ));
        sentinel["rules"] = json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
            "resources": ["configmaps"], "scope": "Namespaced"}]);
        sentinel["matchConditions"] = json!([{"name": "sentinel", "expression": format!("object.metadata.name == '{SENTINEL}'")}]);
        if let Some(list) = webhooks["webhooks"].as_array_mut() {
            list.push(sentinel);
        }
        Enforcers { bindings, webhooks }
    }

    /// Switches `mode`'s enforcer on or off, and waits until the apiserver
    /// enforces accordingly: the sentinel is last on and last off.
    pub async fn switch(&self, client: &Client, mode: Mode, on: bool) {
        let objects = match mode {
            Mode::Native => self.bindings.clone(),
            Mode::Webhook => vec![self.webhooks.clone()],
        };
        for object in &objects {
            if on {
                cluster::apply(client, object).await;
            } else {
                cluster::delete(client, object).await;
            }
        }
        let probe = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": SENTINEL, "namespace": "default"}});
        super::eventually(
            &format!("{mode:?} enforcement {}", if on { "on" } else { "off" }),
            LIMIT,
            || {
                let (client, probe) = (client.clone(), probe.clone());
                async move {
                    let enforced = dry_run_create(&client, &probe).await.is_err();
                    (enforced == on).then_some(())
                }
            },
        )
        .await;
    }
}
