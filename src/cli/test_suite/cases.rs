//! The cases of policy test suites as concrete admission requests, each
//! with the dry-run engine's decision.
//!
//! For comparing enforcers: another one (tests/e2e/enforcers.rs sends these
//! to a real kube-apiserver, enforcing the policies natively and through
//! the webhook) gets exactly the requests the engine judged. Built by the
//! code `nodescope test` runs (the same reading of the suite, defaulting and
//! DaemonSet expansion), so a case cannot mean one thing here and another
//! there.

use super::{open_suite, prepare_case, suite_files, PolicyCache, PolicyChoice};
use crate::apiserver::review::User;
use crate::cli::dry_run::{is_param_kind, RunError};
use crate::input::sources::Inputs;
use crate::json::str_at;
use serde_json::Value;
use std::path::Path;

/// One case of a suite.
#[derive(Debug, Clone)]
pub struct SuiteCase {
    pub suite: String,
    pub name: String,
    /// The cluster state the rules read, as written: the suite's and the
    /// case's params of the kinds that are params (Features, ConfigMaps,
    /// Namespaces, PriorityClasses), later ones winning.
    pub params: Vec<Value>,
    /// The rest of the case's state (VPAs and LimitRanges for the mutating
    /// webhook, and whatever else a params file holds): no validation
    /// reads it.
    pub other_state: Vec<Value>,
    /// Every request the engine evaluated for the case, in order (with
    /// `nodes`, the DaemonSet's and then its pods').
    pub requests: Vec<CaseRequest>,
}

/// One admission request, as a client sends it, and the engine's answer.
#[derive(Debug, Clone)]
pub struct CaseRequest {
    /// `Kind/namespace/name`; `Pod/<namespace>/<generateName>[<node>]` for a
    /// pod expanded from a DaemonSet.
    pub label: String,
    /// `CREATE`, `UPDATE` or `DELETE`.
    pub operation: String,
    /// `resize`, `status`, ...
    pub sub_resource: Option<String>,
    /// `(group, version, resource)`, the resource's plural as the apiserver
    /// serves it.
    pub resource: (String, String, String),
    /// For a namespaced object.
    pub namespace: Option<String>,
    /// The object of a CREATE or UPDATE as written, before the apiserver's
    /// defaulting (which a real apiserver does itself).
    pub object: Option<Value>,
    /// The object that must be stored before an UPDATE or DELETE, as it was
    /// created: for a subresource write without `oldObject`, the object.
    pub old_object: Option<Value>,
    /// `request.userInfo`; the DaemonSet controller for an expanded pod.
    pub user: User,
    /// The node, for a pod expanded from a DaemonSet.
    pub node: Option<String>,
    /// What the engine decided.
    pub verdict: Verdict,
    /// The AdmissionReview the engine evaluated (objects defaulted).
    pub review: Value,
}

/// The engine's answer to a request, as the apiserver would give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    /// The status code of a denial (403, 422, ...); 200 when allowed.
    pub code: u16,
    /// The denial's message (`ValidatingAdmissionPolicy '<policy>' with
    /// binding '<binding>' denied request: ...`); empty when allowed.
    pub message: String,
    /// Policy and mutating-webhook warnings.
    pub warnings: Vec<String>,
}

/// The cases of the suites under `path` (a suite file, or a directory as
/// `nodescope test` takes it), each as requests with the engine's verdicts.
/// `policies` replaces every suite's own `policies:` (and the bundle), for
/// a comparison with an enforcer that has all of them installed at once; a
/// suite alone sees only its own file's policies.
///
/// # Errors
/// What `nodescope test` would report: an unreadable or malformed suite,
/// params or policies.
pub fn load(path: &Path, policies: Option<&Path>) -> Result<Vec<SuiteCase>, RunError> {
    let choice = policies.map_or(PolicyChoice::SuiteFirst(None), PolicyChoice::Everywhere);
    let mut cache = PolicyCache::new();
    let mut out = Vec::new();
    for file in suite_files(path)? {
        let mut inputs = Inputs::default();
        let open = open_suite(&file, choice, &mut cache, &mut inputs)?;
        for case in &open.suite.cases {
            let prepared = prepare_case(&open, case, &mut inputs, true)?;
            let (params, other_state) = prepared
                .state
                .into_iter()
                .map(|d| d.value)
                .partition(is_param_kind);
            let shells: Vec<CaseRequest> = prepared.requests.iter().map(shell).collect();
            let reports = prepared.engine.evaluate_all(prepared.requests)?;
            let requests = shells
                .into_iter()
                .zip(reports)
                .map(|(mut request, report)| {
                    let status = report.status.as_ref();
                    request.verdict = Verdict {
                        allowed: report.allowed,
                        code: status.map_or(200, |s| s.code),
                        message: status.map(|s| s.message.clone()).unwrap_or_default(),
                        warnings: report.warnings,
                    };
                    request
                })
                .collect();
            out.push(SuiteCase {
                suite: open.name.clone(),
                name: case.name.clone(),
                params,
                other_state,
                requests,
            });
        }
    }
    Ok(out)
}

/// A request's description, before the engine's verdict is known.
fn shell(request: &crate::cli::dry_run::Request) -> CaseRequest {
    let review = &request.review;
    let at = |pointer: &str| str_at(review, &format!("/request{pointer}")).to_owned();
    let non_empty = |text: String| (!text.is_empty()).then_some(text);
    let user = &review["request"]["userInfo"];
    let written = request.written.clone().unwrap_or_default();
    CaseRequest {
        label: request.label.clone(),
        operation: at("/operation"),
        sub_resource: non_empty(at("/subResource")),
        resource: (
            at("/resource/group"),
            at("/resource/version"),
            at("/resource/resource"),
        ),
        namespace: non_empty(at("/namespace")),
        object: written.object,
        old_object: written.old_object,
        user: User {
            username: str_at(user, "/username").to_owned(),
            groups: user["groups"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
        },
        node: request.node.clone(),
        verdict: Verdict {
            allowed: true,
            code: 200,
            message: String::new(),
            warnings: Vec::new(),
        },
        review: review.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const POLICY: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: small}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [scheduling.k8s.io], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [priorityclasses]}
  validations:
  - expression: object.value >= MIN
    messageExpression: \"'value ' + string(object.value) + ' is too small'\"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: small}
spec: {policyName: small, validationActions: [Deny]}
";

    const SUITE: &str = "policies: strict.yaml
params:
- {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: low}, value: 5}
- {apiVersion: apps/v1, kind: Deployment, metadata: {name: other, namespace: ops}}
cases:
- name: update
  operation: UPDATE
  oldObject: {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: pc}, value: 1}
  object: {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: pc}, value: 2}
  expect: {result: deny}
- name: resize
  operation: UPDATE
  subResource: resize
  object: {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: ops}, spec: {containers: [{name: c, image: i}]}}
  user: {username: alice, groups: [g]}
  expect: {result: allow}
- name: daemonset
  object: {apiVersion: apps/v1, kind: DaemonSet, metadata: {name: agent, namespace: ops},
    spec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i}]}}}}
  nodes: [n1]
  expect: {result: allow}
- name: delete
  operation: DELETE
  object: {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: pc}, value: 1}
  expect: {result: allow}
";

    /// The suite, its own policy (`strict.yaml`: value >= 10) and another
    /// directory (`lenient/`: value >= 0).
    fn suite_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("a temp dir");
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("a dir");
            std::fs::write(path, text).expect("writable");
        };
        write("suite.yaml", SUITE);
        write("strict.yaml", &POLICY.replace("MIN", "10"));
        write("lenient/lenient.yaml", &POLICY.replace("MIN", "0"));
        dir
    }

    #[test]
    fn each_request_is_as_the_client_sends_it_with_the_engine_verdict() {
        let dir = suite_dir();
        let cases = load(&dir.path().join("suite.yaml"), None).expect("loads");
        assert_eq!(cases.len(), 4);
        let update = &cases[0];
        assert_eq!(
            (update.suite.as_str(), update.name.as_str()),
            ("suite", "update")
        );
        assert_eq!(update.params.len(), 1, "only the param kinds");
        assert_eq!(update.params[0]["metadata"]["name"], "low");
        assert_eq!(update.other_state[0]["kind"], "Deployment");
        let request = &update.requests[0];
        assert_eq!(request.operation, "UPDATE");
        let resource = ("scheduling.k8s.io", "v1", "priorityclasses");
        let got = &request.resource;
        assert_eq!((got.0.as_str(), got.1.as_str(), got.2.as_str()), resource);
        assert_eq!(request.namespace, None);
        // As written; the engine's own copy is defaulted.
        assert!(request
            .old_object
            .as_ref()
            .is_some_and(|o| o.get("preemptionPolicy").is_none()));
        assert_eq!(
            request.review["request"]["oldObject"]["preemptionPolicy"],
            "PreemptLowerPriority"
        );
        assert_eq!(
            request.verdict,
            Verdict {
                allowed: false,
                code: 422,
                message: "ValidatingAdmissionPolicy 'small' with binding 'small' denied request: value 2 is too small".to_owned(),
                warnings: Vec::new(),
            }
        );

        let resize = &cases[1].requests[0];
        assert_eq!(resize.sub_resource.as_deref(), Some("resize"));
        assert_eq!(resize.old_object, resize.object);
        assert_eq!(resize.namespace.as_deref(), Some("ops"));
        assert_eq!(
            (resize.user.username.as_str(), resize.user.groups.clone()),
            ("alice", vec!["g".to_owned()])
        );
        assert!(resize.verdict.allowed && resize.verdict.code == 200);

        let daemonset = &cases[2].requests;
        assert_eq!(daemonset.len(), 2, "the DaemonSet, then its pod");
        let pod = &daemonset[1];
        assert_eq!(pod.node.as_deref(), Some("n1"));
        assert_eq!(pod.resource.2, "pods");
        assert_eq!(pod.user, User::daemonset_controller());
        assert_eq!(
            pod.object
                .as_ref()
                .map(|o| o["metadata"]["generateName"].clone()),
            Some(json!("agent-"))
        );

        let delete = &cases[3].requests[0];
        assert_eq!(
            (delete.object.is_none(), delete.old_object.is_some()),
            (true, true)
        );
    }

    #[test]
    fn policies_replace_what_every_suite_names() {
        let dir = suite_dir();
        let lenient = dir.path().join("lenient");
        let cases = load(&dir.path().join("suite.yaml"), Some(&lenient)).expect("loads");
        assert!(cases[0].requests[0].verdict.allowed);
    }
}
