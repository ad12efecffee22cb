//! Which objects keep a feature from turning off: exactly those its gating
//! policies would deny on CREATE if the Feature were `Off`. The rules say
//! what to look at; this module knows no kind.

use super::lifecycle::TransitionTask;
use crate::json::str_at;
use crate::params::PolicyInputs;
use crate::policy::{validate_policy, AdmissionRequestInput, Decision, PolicySet};
use crate::selector::LabelSelector;
use serde::Serialize;
use serde_json::{Map, Value};

/// How many objects a task names before "and N more".
pub const TASK_OBJECTS: usize = 3;

/// The objects of one resource, as listed from the cluster (through
/// discovery) or read from manifests.
#[derive(Debug, Clone, Default)]
pub struct Listed {
    pub group: String,
    pub version: String,
    /// The REST resource, e.g. `verticalpodautoscalers`.
    pub resource: String,
    pub namespaced: bool,
    pub objects: Vec<Value>,
}

/// One object that uses the feature, and the policy's message that says why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Use {
    pub policy: String,
    /// The API group and REST resource it was listed as (not shown: the
    /// kind says it to people; cleanup needs the exact API).
    #[serde(skip)]
    pub group: String,
    #[serde(skip)]
    pub resource: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub message: String,
}

impl Use {
    /// `Kind namespace/name`, or `Kind name` for a cluster-scoped object.
    #[must_use]
    pub fn label(&self) -> String {
        object_label(&self.kind, &self.namespace, &self.name)
    }
}

/// The uses one gating policy finds, sorted by kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicyUses {
    pub policy: String,
    pub uses: Vec<Use>,
}

/// Why uses could not be found.
#[derive(Debug, thiserror::Error)]
pub enum UsesError {
    #[error("Feature has no metadata.name")]
    FeatureWithoutName,
}

/// The user the CREATE requests are evaluated as: no policy of the bundle
/// reads it; a gate that exempts some users would see this one as no one.
const USER: &str = "nodescope:feature-uses";

/// Every use of `feature` (the Feature object, any state) among `listed`,
/// per gating policy, for the policies that find at least one; policies in
/// name order. `inputs` supplies the namespaces (for namespace selectors)
/// and the other params; the Feature itself is seen as `Off`.
///
/// A denial, or an evaluation error under `failurePolicy: Fail`, is a use:
/// either way the apiserver would refuse to create the object.
///
/// # Errors
/// When the Feature has no name.
pub fn find_uses(
    policies: &PolicySet,
    feature: &Value,
    listed: &[Listed],
    inputs: &dyn PolicyInputs,
) -> Result<Vec<PolicyUses>, UsesError> {
    let name = str_at(feature, "/metadata/name");
    if name.is_empty() {
        return Err(UsesError::FeatureWithoutName);
    }
    let namespace = str_at(feature, "/metadata/namespace");
    let off = FeatureOff::new(feature, inputs);
    let mut out = Vec::new();
    for gate in policies.gating_policies(namespace, name) {
        let mut uses = Vec::new();
        for list in listed {
            if !gate
                .resources
                .iter()
                .any(|(g, r)| (g == "*" || *g == list.group) && (r == "*" || *r == list.resource))
            {
                continue;
            }
            for object in &list.objects {
                if let Some(message) = denial(policies, &gate.policy, list, object, &off) {
                    uses.push(Use {
                        policy: gate.policy.clone(),
                        group: list.group.clone(),
                        resource: list.resource.clone(),
                        kind: str_at(object, "/kind").to_owned(),
                        namespace: str_at(object, "/metadata/namespace").to_owned(),
                        name: str_at(object, "/metadata/name").to_owned(),
                        message,
                    });
                }
            }
        }
        if !uses.is_empty() {
            uses.sort_by(|a, b| {
                (&a.kind, &a.namespace, &a.name).cmp(&(&b.kind, &b.namespace, &b.name))
            });
            out.push(PolicyUses {
                policy: gate.policy,
                uses,
            });
        }
    }
    Ok(out)
}

/// One task per gating policy with uses left: its name, the count and the
/// first [`TASK_OBJECTS`] objects.
#[must_use]
pub fn transition_tasks(uses: &[PolicyUses]) -> Vec<TransitionTask> {
    uses.iter()
        .map(|p| {
            let mut description = p
                .uses
                .iter()
                .take(TASK_OBJECTS)
                .map(Use::label)
                .collect::<Vec<_>>()
                .join(", ");
            if p.uses.len() > TASK_OBJECTS {
                description.push_str(&format!(" and {} more", p.uses.len() - TASK_OBJECTS));
            }
            TransitionTask {
                name: p.policy.clone(),
                count: p.uses.len(),
                description,
            }
        })
        .collect()
}

/// The message of `policy`'s denial of creating `object`, if it denies.
fn denial(
    policies: &PolicySet,
    policy: &str,
    list: &Listed,
    object: &Value,
    inputs: &dyn PolicyInputs,
) -> Option<String> {
    let request = create_request(list, object);
    let input = AdmissionRequestInput::from_request(&request).ok()?;
    validate_policy(policies, policy, &input, inputs)
        .results
        .into_iter()
        .find(|r| matches!(r.decision, Decision::Deny | Decision::Error))
        .map(|r| r.message.unwrap_or_default())
}

/// The AdmissionRequest that creating `object` again would send.
fn create_request(list: &Listed, object: &Value) -> Value {
    let gvk = |kind: &str| {
        let mut m = Map::new();
        m.insert("group".to_owned(), Value::from(list.group.as_str()));
        m.insert("version".to_owned(), Value::from(list.version.as_str()));
        m.insert("kind".to_owned(), Value::from(kind));
        Value::Object(m)
    };
    let mut gvr = Map::new();
    gvr.insert("group".to_owned(), Value::from(list.group.as_str()));
    gvr.insert("version".to_owned(), Value::from(list.version.as_str()));
    gvr.insert("resource".to_owned(), Value::from(list.resource.as_str()));
    let gvr = Value::Object(gvr);
    let mut request = Map::new();
    request.insert("uid".to_owned(), Value::from("feature-uses"));
    request.insert("kind".to_owned(), gvk(str_at(object, "/kind")));
    request.insert("resource".to_owned(), gvr.clone());
    request.insert("requestKind".to_owned(), gvk(str_at(object, "/kind")));
    request.insert("requestResource".to_owned(), gvr);
    request.insert(
        "name".to_owned(),
        Value::from(str_at(object, "/metadata/name")),
    );
    let namespace = str_at(object, "/metadata/namespace");
    if list.namespaced && !namespace.is_empty() {
        request.insert("namespace".to_owned(), Value::from(namespace));
    }
    request.insert("operation".to_owned(), Value::from("CREATE"));
    let mut user = Map::new();
    user.insert("username".to_owned(), Value::from(USER));
    request.insert("userInfo".to_owned(), Value::Object(user));
    request.insert("object".to_owned(), object.clone());
    request.insert("oldObject".to_owned(), Value::Null);
    request.insert("dryRun".to_owned(), Value::Bool(true));
    Value::Object(request)
}

/// The cluster's inputs, with the Feature seen as `Off`.
struct FeatureOff<'a> {
    inner: &'a dyn PolicyInputs,
    namespace: &'a str,
    name: &'a str,
    off: Value,
}

impl<'a> FeatureOff<'a> {
    fn new(feature: &'a Value, inner: &'a dyn PolicyInputs) -> Self {
        let mut off = feature.clone();
        if let Value::Object(map) = &mut off {
            let status = map
                .entry("status")
                .or_insert_with(|| Value::Object(Map::new()));
            if !status.is_object() {
                *status = Value::Object(Map::new());
            }
            if let Value::Object(status) = status {
                status.insert("state".to_owned(), Value::from("Off"));
            }
        }
        FeatureOff {
            inner,
            namespace: str_at(feature, "/metadata/namespace"),
            name: str_at(feature, "/metadata/name"),
            off,
        }
    }

    fn is_feature(&self, kind: &str, namespace: Option<&str>, name: &str) -> bool {
        kind == "Feature" && namespace.unwrap_or("") == self.namespace && name == self.name
    }
}

impl PolicyInputs for FeatureOff<'_> {
    fn namespace(&self, name: &str) -> Option<&Value> {
        self.inner.namespace(name)
    }

    fn param(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<&Value> {
        if self.is_feature(kind, namespace, name) {
            return Some(&self.off);
        }
        self.inner.param(api_version, kind, namespace, name)
    }

    fn params_matching(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        selector: &LabelSelector,
    ) -> Vec<&Value> {
        self.inner
            .params_matching(api_version, kind, namespace, selector)
            .into_iter()
            .map(|p| {
                let ns = str_at(p, "/metadata/namespace");
                if self.is_feature(kind, Some(ns), str_at(p, "/metadata/name")) {
                    &self.off
                } else {
                    p
                }
            })
            .collect()
    }
}

#[cfg(test)]
#[path = "uses_tests.rs"]
mod tests;

/// `Kind namespace/name`, or `Kind name` for a cluster-scoped object.
#[must_use]
pub fn object_label(kind: &str, namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        format!("{kind} {name}")
    } else {
        format!("{kind} {namespace}/{name}")
    }
}
