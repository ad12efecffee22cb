//! `nodescope dry-run`: what the webhook and a kube-apiserver enforcing the
//! policies would say about manifests, offline.
//!
//! Each manifest becomes the AdmissionReview the apiserver would send (after
//! the apiserver's own defaulting), then goes through the webhook's pipeline:
//! [`crate::admission::answer`] for the mutation, [`crate::policy::validate`]
//! for the per-binding verdicts. No rule is restated here.

mod args;
mod discovery;
pub mod expand;
pub mod junit;
pub mod output;
mod requests;
mod run;
pub mod spool;

pub use args::{DryRunArgs, DryRunFormat, Operation};
pub use run::{is_state, run_dry_run, use_colour};

use crate::admission::{self, Decider};
use crate::apiserver::defaulting::{self, PriorityClasses};
use crate::apiserver::kinds::Kinds;
use crate::input::sources;
use crate::input::{check_object, InputError, Location, SourceDocument};
use crate::json::str_at;
use crate::metrics::Webhook;
use crate::policy::{validate, AdmissionRequestInput, Decision, PolicyLoadError, PolicySet};
use crate::store::Snapshot;
use base64::Engine as _;
use output::{ContainerResources, MutationReport, ObjectReport, Row, Status};
pub use requests::{requests, RequestOptions, Written};
use serde_json::Value;
use std::path::Path;
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
    /// A VerticalPodAutoscaler or LimitRange the mutation cannot use (exit
    /// code 2); [`locate`] puts it at its document.
    #[error("{}: {}", .0.object, field_and_reason(.0))]
    State(crate::store::ConvertError),
    /// `--kubeconfig` or `--context` given, and the cluster's discovery
    /// cannot be read (exit code 2: nothing can be checked against it).
    #[error(transparent)]
    Cluster(crate::cli::kubectl::cluster::ClusterError),
    /// A bug in nodescope (exit code 3).
    #[error("internal error: {0}")]
    Internal(String),
}

impl RunError {
    /// The exit code the spec assigns to this kind of failure.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Input(_) | Self::Policies(_) | Self::State(_) | Self::Cluster(_) => 2,
            Self::Internal(_) => 3,
        }
    }
}

/// `field: reason`, or the reason alone when the whole object is meant.
fn field_and_reason(problem: &crate::store::ConvertError) -> String {
    match problem.field.as_str() {
        "" | "(object)" => problem.reason.clone(),
        field => format!("{field}: {}", problem.reason),
    }
}

/// Puts a problem with a state object at the document it was read from.
/// The store names objects `Kind/namespace/name` or `Kind namespace/name`.
#[must_use]
pub fn locate(error: RunError, documents: &[SourceDocument]) -> RunError {
    let RunError::State(problem) = error else {
        return error;
    };
    let found = documents.iter().find(|d| {
        let v = &d.value;
        let spaced = format!(
            "{} {}/{}",
            str_at(v, "/kind"),
            str_at(v, "/metadata/namespace"),
            str_at(v, "/metadata/name")
        );
        problem.object == crate::manifest::object_ref(v) || problem.object == spaced
    });
    match found {
        Some(document) => {
            InputError::document(&document.location, field_and_reason(&problem)).into()
        }
        None => RunError::State(problem),
    }
}

/// Compiled policies and the cluster state they and the mutation read: built
/// once per run, then every request is a pure function of it.
pub struct Engine {
    decider: Decider,
    classes: PriorityClasses,
    kinds: Kinds,
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
    /// The objects as the client sends them, before the apiserver's
    /// defaulting; only with [`RequestOptions::keep_written`], and never
    /// for a replayed review.
    pub written: Option<Written>,
}

/// Loads the policies at `path` (a directory, or one file), or the bundle
/// when `None`, with the objects that installing them creates (the bundle's
/// ConfigMap), which count as params. `name` is how messages call the path
/// (`--policies policies`).
///
/// # Errors
/// A missing path, a path that holds no policy (it would check nothing),
/// an unreadable file, a policy that does not compile.
pub fn load_policies(path: Option<&Path>, name: &str) -> Result<(PolicySet, Vec<Value>), RunError> {
    let Some(path) = path else {
        return Ok((
            crate::policy::bundle::policy_set()?,
            crate::policy::bundle::extra_objects(),
        ));
    };
    let meta = std::fs::metadata(path)
        .map_err(|e| InputError::Usage(format!("{name}: {}", sources::reason(&e))))?;
    let set = if meta.is_file() {
        PolicySet::load_files(&[path.to_path_buf()])
    } else {
        PolicySet::load_dir(path)
    }
    .map_err(|e| match e {
        PolicyLoadError::Io { path, source } => RunError::Input(InputError::File {
            path: path.display().to_string(),
            message: sources::reason(&source),
        }),
        other => RunError::Policies(other),
    })?;
    if set.policy_names().is_empty() {
        return Err(InputError::Usage(format!(
            "{name}: holds no ValidatingAdmissionPolicy, so there is nothing to check against"
        ))
        .into());
    }
    let extras = crate::manifest::read_path(path, &["tests"])
        .map_err(sources::manifest_error)?
        .into_iter()
        .map(|d| d.value)
        .filter(crate::policy::bundle::is_installed_object)
        .collect();
    Ok((set, extras))
}

/// Kinds that, given with `-f`, are also cluster state the rules read.
pub fn is_param_kind(value: &Value) -> bool {
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
    /// `missing_node` and `boost` are the webhook's settings, as `serve`
    /// builds its [`Decider`] from the same flags.
    ///
    /// # Errors
    /// When a VPA or LimitRange among `state` cannot be used.
    pub fn new(
        policies: Arc<PolicySet>,
        mut state: Vec<Value>,
        missing_node: crate::mutate::MissingNodeRecommendation,
        boost: crate::mutate::BoostSettings,
        kinds: Kinds,
    ) -> Result<Self, RunError> {
        let classes = PriorityClasses::from_objects(&state);
        for object in &mut state {
            let namespaced = namespaced(&kinds, object);
            defaulting::apply(object, "CREATE", &classes, namespaced);
        }
        let store = Snapshot::build(state);
        if let Some(problem) = store.problems.first() {
            return Err(RunError::State(problem.clone()));
        }
        Ok(Self {
            decider: Decider {
                missing_node,
                boost,
                ..Decider::new(Arc::new(store), policies)
            },
            classes,
            kinds,
        })
    }

    /// Applies the apiserver's defaulting to a manifest.
    pub fn default(&self, object: &mut Value, operation: &str) {
        let namespaced = namespaced(&self.kinds, object);
        defaulting::apply(object, operation, &self.classes, namespaced);
    }

    /// The kinds this run knows.
    #[must_use]
    pub fn kinds(&self) -> &Kinds {
        &self.kinds
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
            written: _,
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
        if let Some(message) = crate::apiserver::validation::invalid_pod_request(&input) {
            // Refused by the apiserver between the two webhook phases: no
            // policy sees it.
            let mut report = ObjectReport::invalid(label, location, message, mutation);
            report.node = node;
            report.operation = input.operation().to_owned();
            report.resource = input.resource().to_owned();
            return Ok(report);
        }
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

    /// Evaluates `requests` on every core; the reports keep their order.
    ///
    /// # Errors
    /// The first error of [`Engine::evaluate`], in request order.
    pub fn evaluate_all(&self, requests: Vec<Request>) -> Result<Vec<ObjectReport>, RunError> {
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        if threads < 2 || requests.len() < 64 {
            return requests.into_iter().map(|r| self.evaluate(r)).collect();
        }
        let per_thread = requests.len().div_ceil(threads);
        let mut batches: Vec<Vec<Request>> = Vec::new();
        let mut requests = requests.into_iter();
        loop {
            let batch: Vec<Request> = requests.by_ref().take(per_thread).collect();
            if batch.is_empty() {
                break;
            }
            batches.push(batch);
        }
        let results: Vec<Result<Vec<ObjectReport>, RunError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = batches
                .into_iter()
                .map(|batch| {
                    scope.spawn(move || {
                        batch
                            .into_iter()
                            .map(|r| self.evaluate(r))
                            .collect::<Result<Vec<_>, _>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| {
                    handle.join().unwrap_or_else(|_| {
                        Err(RunError::Internal(
                            "an evaluation thread panicked".to_owned(),
                        ))
                    })
                })
                .collect()
        });
        let mut reports = Vec::new();
        for batch in results {
            reports.extend(batch?);
        }
        Ok(reports)
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

/// Whether `object`'s kind lives in a namespace; an object of a kind
/// nobody checked (one a policy directory installs) is taken to.
fn namespaced(kinds: &Kinds, object: &Value) -> bool {
    kinds
        .lookup(str_at(object, "/apiVersion"), str_at(object, "/kind"))
        .map_or(true, |served| served.namespaced)
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

/// Checks an object of `--params`, `--recommendations` or `--old`: it must
/// be a Kubernetes object of a known kind, or a misspelt Feature would
/// silently turn a policy off.
///
/// # Errors
/// What is wrong, at the document's location.
pub fn check_state(kinds: &Kinds, document: &SourceDocument) -> Result<(), InputError> {
    check_object(document)?;
    kinds
        .lookup(
            str_at(&document.value, "/apiVersion"),
            str_at(&document.value, "/kind"),
        )
        .map(|_| ())
        .map_err(|why| InputError::document(&document.location, why))?;
    unparsable_target(&document.value).map_or(Ok(()), |why| {
        Err(InputError::document(&document.location, why))
    })
}

/// A recommendation target in a VPA of the user's files that does not
/// parse, as `field: why`. In a cluster such a target is only that
/// container's missing recommendation (the webhook warns); in a file given
/// to dry-run it is a typo to name, not a run to pass.
fn unparsable_target(object: &Value) -> Option<String> {
    if str_at(object, "/kind") != "VerticalPodAutoscaler" {
        return None;
    }
    let status = object.get("status")?;
    let rows = status
        .pointer("/recommendation/containerRecommendations")
        .map(|r| ("status.recommendation".to_owned(), r))
        .into_iter()
        .chain(
            status
                .get("recommendationGroups")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
                .filter_map(|(g, group)| {
                    let recs = group.get("containerRecommendations")?;
                    Some((format!("status.recommendationGroups[{g}]"), recs))
                }),
        );
    for (row, containers) in rows {
        for (i, c) in containers.as_array().into_iter().flatten().enumerate() {
            for (resource, text) in c
                .get("target")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                let text = text.as_str().unwrap_or_default();
                if let Err(e) = crate::quantity::Quantity::parse(text) {
                    return Some(format!(
                        "{row}.containerRecommendations[{i}].target.{resource}: {e}"
                    ));
                }
            }
        }
    }
    None
}
