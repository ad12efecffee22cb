//! `nodescope dry-run`: what the webhook and a kube-apiserver enforcing the
//! policies would say about manifests, offline.
//!
//! Each manifest becomes the AdmissionReview the apiserver would send (after
//! the apiserver's own defaulting), then goes through the webhook's pipeline:
//! [`crate::admission::answer`] for the mutation, [`crate::policy::validate`]
//! for the per-binding verdicts. No rule is restated here.

pub mod defaulting;
pub mod expand;
pub mod input;
pub mod output;
pub mod review;

use crate::admission::{self, Decider};
use crate::cli::{DryRunArgs, DryRunFormat};
use crate::metrics::Webhook;
use crate::policy::{validate, AdmissionRequestInput, Decision, PolicyLoadError, PolicySet};
use crate::store::Snapshot;
use base64::Engine as _;
use defaulting::PriorityClasses;
use input::{check_object, is_review, str_at, InputError, Location, SourceDocument};
use output::{ContainerResources, MutationReport, ObjectReport, Report, Row, Status};
use review::User;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// Why a dry run (or a test run) stopped without a verdict.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The user's input or command line (exit code 2).
    #[error(transparent)]
    Input(#[from] InputError),
    /// The policies do not load (exit code 2).
    #[error(transparent)]
    Policies(#[from] PolicyLoadError),
    /// A bug in nodescope (exit code 3).
    #[error("internal error: {0}")]
    Internal(String),
}

impl RunError {
    /// The exit code the spec assigns to this kind of failure.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Input(_) | Self::Policies(_) => 2,
            Self::Internal(_) => 3,
        }
    }
}

/// Compiled policies and the cluster state they and the mutation read: built
/// once per run, then every request is a pure function of it.
pub struct Engine {
    decider: Decider,
    classes: PriorityClasses,
}

/// One request to evaluate, with what the report says about its origin.
#[derive(Debug, Clone)]
pub struct Request {
    /// The OBJECT column: `kind/namespace/name`.
    pub label: String,
    pub location: Option<Location>,
    /// The node, for a pod expanded from a DaemonSet.
    pub node: Option<String>,
    /// A whole AdmissionReview.
    pub review: Value,
}

/// Loads the policies in `dir`, or the bundle when `None`, with the objects
/// that installing them creates (the bundle's ConfigMap), which count as
/// params.
///
/// # Errors
/// When a policy file cannot be read or a policy does not compile.
pub fn load_policies(dir: Option<&Path>) -> Result<(PolicySet, Vec<Value>), RunError> {
    match dir {
        None => Ok((
            crate::cli::bundle::policy_set()?,
            crate::cli::bundle::extra_objects(),
        )),
        Some(dir) => {
            let set = PolicySet::load_dir(dir)?;
            let extras = crate::manifest::read_path(dir, &["tests"])
                .map_err(InputError::from)?
                .into_iter()
                .map(|d| d.value)
                .filter(crate::cli::bundle::is_installed_object)
                .collect();
            Ok((set, extras))
        }
    }
}

/// Kinds that, given with `-f`, are also cluster state the rules read.
fn is_param_kind(value: &Value) -> bool {
    matches!(
        (str_at(value, "/apiVersion"), str_at(value, "/kind")),
        ("featureflags.nodescope.dev/v1alpha1", "Feature")
            | ("v1", "ConfigMap" | "Namespace")
            | ("scheduling.k8s.io/v1", "PriorityClass")
    )
}

impl Engine {
    /// Builds the engine from policies and cluster state: params and
    /// recommendations, in order of precedence (later wins). State objects
    /// are defaulted as the apiserver did when they were created.
    ///
    /// # Errors
    /// When a VPA or LimitRange among `state` cannot be used.
    pub fn new(
        policies: Arc<PolicySet>,
        mut state: Vec<Value>,
        missing_node: crate::mutate::MissingNodeRecommendation,
    ) -> Result<Self, RunError> {
        let classes = PriorityClasses::from_objects(&state);
        for object in &mut state {
            defaulting::apply(object, "CREATE", &classes);
        }
        let store = Snapshot::build(state);
        if let Some(problem) = store.problems.first() {
            return Err(InputError::Usage(format!("cannot use recommendations: {problem}")).into());
        }
        Ok(Self {
            decider: Decider {
                store: Arc::new(store),
                policies,
                missing_node,
            },
            classes,
        })
    }

    /// Applies the apiserver's defaulting to a manifest.
    pub fn default(&self, object: &mut Value, operation: &str) {
        defaulting::apply(object, operation, &self.classes);
    }

    /// Runs the mutation (pods with a VPA) and the validation of one request.
    ///
    /// # Errors
    /// `Input` when a replayed review is not one the webhook can read;
    /// `Internal` when the webhook's own answer cannot be used.
    pub fn evaluate(&self, request: Request) -> Result<ObjectReport, RunError> {
        let Request {
            label,
            location,
            node,
            mut review,
        } = request;
        let bad_review = |message: String| match &location {
            Some(at) => RunError::Input(InputError::document(at, message)),
            None => RunError::Input(InputError::Usage(message)),
        };
        let mutation = self.mutate(&mut review).map_err(|e| match e {
            MutateError::Review(message) => bad_review(message),
            MutateError::Internal(message) => RunError::Internal(message),
        })?;
        let input = AdmissionRequestInput::from_review(&review)
            .map_err(|e| bad_review(format!("not an AdmissionReview nodescope can read: {e}")))?;
        let outcome = validate(&self.decider.policies, &input, self.decider.store.as_ref());
        let mut warnings = mutation
            .as_ref()
            .map(|m| m.warnings.clone())
            .unwrap_or_default();
        warnings.extend(outcome.warnings);
        let results = outcome
            .results
            .into_iter()
            .map(|r| Row {
                policy: r.policy,
                binding: r.binding,
                param: r.param,
                result: result_name(r.decision),
                message: r.message,
            })
            .collect();
        let status = (!outcome.allowed).then(|| Status {
            code: outcome.status_code,
            reason: outcome.reason.unwrap_or_default(),
            message: outcome.message.unwrap_or_default(),
        });
        Ok(ObjectReport {
            object: label,
            source: location,
            node,
            operation: input.operation().to_owned(),
            resource: match input.sub_resource() {
                "" => input.resource().to_owned(),
                sub => format!("{}/{sub}", input.resource()),
            },
            allowed: outcome.allowed,
            status,
            warnings,
            audit_annotations: outcome.audit_annotations,
            results,
            mutation,
        })
    }

    /// Sends a pod CREATE through the mutating webhook and, when it patches,
    /// replaces the review's object with the patched pod: validation runs
    /// after mutation in the apiserver.
    fn mutate(&self, review: &mut Value) -> Result<Option<MutationReport>, MutateError> {
        let request = &review["request"];
        let is_pod_create = str_at(request, "/operation") == "CREATE"
            && str_at(request, "/resource/group").is_empty()
            && str_at(request, "/resource/resource") == "pods"
            && str_at(request, "/subResource").is_empty();
        if !is_pod_create || self.decider.store.vpa_count() == 0 {
            return Ok(None);
        }
        let body =
            serde_json::to_vec(&*review).map_err(|e| MutateError::Internal(e.to_string()))?;
        let answer = admission::answer(Webhook::Mutate, &body, &self.decider);
        if answer.http_status != 200 {
            return Err(MutateError::Review(
                String::from_utf8_lossy(&answer.body).trim().to_owned(),
            ));
        }
        let response: Value = serde_json::from_slice(&answer.body)
            .map_err(|e| MutateError::Internal(format!("the webhook's response: {e}")))?;
        let warnings: Vec<String> = response
            .pointer("/response/warnings")
            .and_then(Value::as_array)
            .map(|w| {
                w.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let patch: Vec<json_patch::PatchOperation> =
            match response.pointer("/response/patch").and_then(Value::as_str) {
                None => Vec::new(),
                Some(encoded) => {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(encoded)
                        .map_err(|e| MutateError::Internal(format!("the webhook's patch: {e}")))?;
                    serde_json::from_slice(&bytes)
                        .map_err(|e| MutateError::Internal(format!("the webhook's patch: {e}")))?
                }
            };
        if patch.is_empty() && warnings.is_empty() {
            return Ok(None);
        }
        let object = &mut review["request"]["object"];
        json_patch::patch(object, &patch).map_err(|e| {
            MutateError::Internal(format!("the webhook's patch does not apply: {e}"))
        })?;
        let containers = object
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .map(|list| list.iter().map(ContainerResources::of).collect())
            .unwrap_or_default();
        Ok(Some(MutationReport {
            patch,
            warnings,
            containers,
        }))
    }
}

enum MutateError {
    Review(String),
    Internal(String),
}

fn result_name(decision: Decision) -> &'static str {
    match decision {
        Decision::Allow => "allow",
        Decision::Deny => "deny",
        Decision::Warn => "warn",
        Decision::Audit => "audit",
        Decision::Error => "error",
        Decision::Skip => "skip",
    }
}

/// What the requests are made of, besides the objects.
#[derive(Debug, Clone)]
pub struct RequestOptions<'a> {
    pub operation: &'a str,
    /// For UPDATE: the subresource (`resize`, `status`), if any.
    pub sub_resource: Option<&'a str>,
    pub user: &'a User,
    pub nodes: &'a [String],
}

/// Turns documents from `-f` into requests: reviews are replayed as they
/// are; manifests are defaulted and wrapped in a review, DaemonSets are
/// followed by their per-node pods. `old` are the previous versions for
/// UPDATE, matched by kind, namespace and name.
///
/// # Errors
/// A document that is not an object, or an UPDATE without its old object.
pub fn requests(
    engine: &Engine,
    documents: Vec<SourceDocument>,
    old: &[Value],
    options: &RequestOptions<'_>,
    first_uid: usize,
) -> Result<Vec<Request>, RunError> {
    let mut out = Vec::with_capacity(documents.len());
    let mut uid = first_uid;
    let mut next_uid = || {
        uid += 1;
        format!("nodescope-dry-run-{uid}")
    };
    for document in documents {
        if is_review(&document.value) {
            let request = document.value.get("request").unwrap_or(&Value::Null);
            let subject = [request.get("object"), request.get("oldObject")]
                .into_iter()
                .flatten()
                .find(|v| v.is_object());
            let label = review_label(request, subject);
            out.push(Request {
                label,
                location: Some(document.location),
                node: None,
                review: document.value,
            });
            continue;
        }
        check_object(&document)?;
        let mut object = document.value;
        engine.default(&mut object, options.operation);
        let label = crate::manifest::object_ref(&object);
        let review = match options.operation {
            "DELETE" => review::build(&next_uid(), "DELETE", None, Some(&object), options.user),
            "UPDATE" if options.sub_resource.is_some() => {
                // A subresource write carries the whole object on both sides.
                let old = old
                    .iter()
                    .find(|o| same_object(o, &object))
                    .unwrap_or(&object);
                let mut review = review::build(
                    &next_uid(),
                    "UPDATE",
                    Some(&object),
                    Some(old),
                    options.user,
                );
                review["request"]["subResource"] = Value::from(options.sub_resource);
                review["request"]["requestSubResource"] = Value::from(options.sub_resource);
                review
            }
            "UPDATE" => {
                let Some(previous) = old.iter().find(|o| same_object(o, &object)) else {
                    return Err(InputError::document(
                        &document.location,
                        format!("--operation UPDATE: no old version of {label} in --old"),
                    )
                    .into());
                };
                review::build(
                    &next_uid(),
                    "UPDATE",
                    Some(&object),
                    Some(previous),
                    options.user,
                )
            }
            op => review::build(&next_uid(), op, Some(&object), None, options.user),
        };
        out.push(Request {
            label: label.clone(),
            location: Some(document.location.clone()),
            node: None,
            review,
        });
        if options.operation != "CREATE" {
            continue;
        }
        for node in options.nodes {
            let Some(mut pod) = expand::daemonset_pod(&object, node) else {
                break;
            };
            engine.default(&mut pod, "CREATE");
            let label = format!(
                "Pod/{}/{}[{node}]",
                str_at(&pod, "/metadata/namespace"),
                str_at(&pod, "/metadata/generateName")
            );
            let review = review::build(
                &next_uid(),
                "CREATE",
                Some(&pod),
                None,
                &User::daemonset_controller(),
            );
            out.push(Request {
                label,
                location: Some(document.location.clone()),
                node: Some(node.clone()),
                review,
            });
        }
    }
    Ok(out)
}

fn same_object(a: &Value, b: &Value) -> bool {
    ["/kind", "/metadata/namespace", "/metadata/name"]
        .iter()
        .all(|p| str_at(a, p) == str_at(b, p))
}

fn review_label(request: &Value, subject: Option<&Value>) -> String {
    let kind = str_at(request, "/kind/kind");
    let name = match str_at(request, "/name") {
        "" => subject.map_or("", |s| str_at(s, "/metadata/generateName")),
        name => name,
    };
    let name = if name.is_empty() { "<no name>" } else { name };
    let sub = match str_at(request, "/subResource") {
        "" => String::new(),
        sub => format!(" ({sub})"),
    };
    match str_at(request, "/namespace") {
        "" => format!("{kind}/{name}{sub}"),
        ns => format!("{kind}/{ns}/{name}{sub}"),
    }
}

/// `nodescope dry-run`: prints the report and returns the exit code (0 all
/// admitted, 1 any denied).
///
/// # Errors
/// Input and policy errors (exit 2), internal errors (exit 3).
pub fn run_dry_run(args: &DryRunArgs) -> Result<ExitCode, RunError> {
    use std::io::IsTerminal;
    let terminal = std::io::stdout().is_terminal();
    let format = args.output.unwrap_or(if terminal {
        DryRunFormat::Table
    } else {
        DryRunFormat::Json
    });
    let colour = use_colour(terminal, std::env::var_os("NO_COLOR").as_deref());
    if args.operation != crate::cli::Operation::Update && !args.old.is_empty() {
        return Err(InputError::Usage("--old is only used with --operation UPDATE".into()).into());
    }
    let (policies, mut state) = load_policies(args.policies.as_deref())?;
    state.extend(read_objects(&args.params)?);
    state.extend(read_objects(&args.recommendations)?);
    let documents = input::read_all(&args.files)?;
    state.extend(
        documents
            .iter()
            .filter(|d| !is_review(&d.value) && is_param_kind(&d.value))
            .map(|d| d.value.clone()),
    );
    let engine = Engine::new(
        Arc::new(policies),
        state,
        args.missing_node_recommendation.into(),
    )?;
    let mut old = read_objects(&args.old)?;
    for object in &mut old {
        engine.default(object, "CREATE");
    }
    let user = User {
        username: args.as_user.clone().unwrap_or_default(),
        groups: args.as_groups.clone(),
    };
    let options = RequestOptions {
        operation: args.operation.as_str(),
        sub_resource: None,
        user: &user,
        nodes: &args.nodes,
    };
    let requests = requests(&engine, documents, &old, &options, 0)?;
    let objects = requests
        .into_iter()
        .map(|r| engine.evaluate(r))
        .collect::<Result<Vec<_>, _>>()?;
    let report = Report::new(objects);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    output::write(&mut out, &report, format, colour)
        .and_then(|()| out.flush().map_err(|e| e.to_string()))
        .map_err(RunError::Internal)?;
    Ok(if report.summary.denied > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Colour only on a terminal, and never when `NO_COLOR` is set (to
/// anything, even empty).
#[must_use]
pub fn use_colour(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none()
}

/// Reads objects for `--params`, `--recommendations` and `--old`; each must
/// be a Kubernetes object.
fn read_objects(paths: &[PathBuf]) -> Result<Vec<Value>, RunError> {
    let documents = input::read_all(paths)?;
    documents
        .into_iter()
        .map(|d| check_object(&d).map(|()| d.value).map_err(RunError::from))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_is_only_for_terminals_without_no_color() {
        assert!(use_colour(true, None));
        assert!(!use_colour(false, None));
        assert!(!use_colour(true, Some(std::ffi::OsStr::new(""))));
        assert!(!use_colour(true, Some(std::ffi::OsStr::new("1"))));
    }
}
