//! Building a [`PolicySet`] from policy files: parse, check, compile, once.
//!
//! Every expression is compiled here; a broken policy fails the load with the
//! file, the policy, the field path and the position, so nothing fails later
//! on the request path for a reason that was visible at start-up.

use super::build::{check_binding, compile_policy};
use super::compile::{CompiledExpression, Compiler};
use super::k8s_lib::{kubernetes_env, LibraryError};
use super::model::{
    BindingSpec, FailurePolicy, PolicySpec, StatusReason, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
};
use crate::manifest::{self, ManifestError};
use cel::Env;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;

/// Why a set of policies could not be loaded. Every variant names the file.
#[derive(Debug, Error)]
pub enum PolicyLoadError {
    /// A file or directory could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path being read.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file is not valid YAML/JSON.
    #[error("{source_name}: not valid YAML or JSON: {message}")]
    Syntax {
        /// The file (or source name given to `from_documents`).
        source_name: String,
        /// The parser's message, with its position.
        message: String,
    },
    /// A policy or binding does not have the shape of the v1 API.
    #[error("{source_name}: {kind} '{name}': {message}")]
    Invalid {
        /// The file.
        source_name: String,
        /// `ValidatingAdmissionPolicy` or `ValidatingAdmissionPolicyBinding`.
        kind: &'static str,
        /// `metadata.name`.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// An expression does not parse or refers to something undeclared.
    #[error(transparent)]
    Expression(Box<ExpressionError>),
    /// Two objects of the same kind share a name.
    #[error("{kind} '{name}' is defined twice: in {first} and in {second}")]
    Duplicate {
        /// The kind.
        kind: &'static str,
        /// The shared name.
        name: String,
        /// Where it was first defined.
        first: String,
        /// Where it was defined again.
        second: String,
    },
    /// A binding names a policy that is not in the set.
    #[error("{source_name}: ValidatingAdmissionPolicyBinding '{binding}' references policy '{policy}', which is not loaded")]
    UnknownPolicy {
        /// The file of the binding.
        source_name: String,
        /// The binding.
        binding: String,
        /// The missing policy.
        policy: String,
    },
    /// The CEL environment could not be built.
    #[error(transparent)]
    Library(#[from] LibraryError),
}

/// Where and why one policy expression failed to compile.
#[derive(Debug, Error)]
#[error("{source_name}: ValidatingAdmissionPolicy '{policy}': {field}{}: {message} (expression: {expression})",
    position.map(|(l, c)| format!(" at line {l}, column {c}")).unwrap_or_default())]
pub struct ExpressionError {
    /// The file.
    pub source_name: String,
    /// The policy's name.
    pub policy: String,
    /// e.g. `spec.validations[2].expression`.
    pub field: String,
    /// The expression as written.
    pub expression: String,
    /// What is wrong.
    pub message: String,
    /// 1-based line and column within the expression.
    pub position: Option<(usize, usize)>,
}

/// Bounds on one request's evaluation; see [`super::json_val`]'s budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvaluationLimits {
    /// Units one (policy, binding, param) evaluation may spend; one unit is
    /// one read of request data (a field, an array element, a map key).
    pub cost_units: u64,
    /// Wall-clock time all policies together may take for one request.
    pub deadline: Duration,
}

impl Default for EvaluationLimits {
    /// One million data reads per evaluation (a pod has a few hundred
    /// fields) and one second per request, well inside the apiserver's
    /// webhook timeout.
    fn default() -> Self {
        EvaluationLimits {
            cost_units: 1_000_000,
            deadline: Duration::from_secs(1),
        }
    }
}

/// Compiled, immutable policies and bindings; built once by a load and shared
/// by every request (it is `Send + Sync`).
pub struct PolicySet {
    pub(crate) env: Arc<Env>,
    pub(crate) policies: Vec<CompiledPolicy>,
    pub(crate) index: PolicyIndex,
    pub(crate) limits: EvaluationLimits,
}

/// The policies a request may match, by its (group, resource), built at
/// load so that policies for other resources cost a hash lookup, not a
/// matcher run. A superset: the full match still decides.
#[derive(Debug, Default)]
pub(crate) struct PolicyIndex {
    /// group (or `*`) -> resource (or `*`) -> policy indices, ascending.
    by_group: HashMap<String, HashMap<String, Vec<usize>>>,
}

impl PolicyIndex {
    fn build(policies: &[CompiledPolicy]) -> Self {
        let mut index = PolicyIndex::default();
        for (i, policy) in policies.iter().enumerate() {
            let rules = policy
                .spec
                .match_constraints
                .as_ref()
                .map_or(&[][..], |c| c.resource_rules.as_slice());
            if rules.is_empty() {
                // No constraints, or no resource rules: every request.
                index.insert("*", "*", i);
            }
            for rule in rules {
                let any_group = rule.api_groups.iter().any(|g| g == "*");
                for group in &rule.api_groups {
                    if any_group && group != "*" {
                        continue;
                    }
                    for entry in &rule.resources {
                        let resource = entry.split_once('/').map_or(entry.as_str(), |(r, _)| r);
                        index.insert(group, resource, i);
                    }
                }
            }
        }
        index
    }

    fn insert(&mut self, group: &str, resource: &str, policy: usize) {
        let list = self
            .by_group
            .entry(group.to_owned())
            .or_default()
            .entry(resource.to_owned())
            .or_default();
        if list.last() != Some(&policy) {
            list.push(policy);
        }
    }

    /// The indices of the policies a request for `group`/`resource` may
    /// match, ascending.
    pub(crate) fn candidates(&self, group: &str, resource: &str) -> Vec<usize> {
        let mut out = Vec::new();
        for g in [group, "*"] {
            if let Some(by_resource) = self.by_group.get(g) {
                for r in [resource, "*"] {
                    if let Some(list) = by_resource.get(r) {
                        out.extend_from_slice(list);
                    }
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

impl std::fmt::Debug for PolicySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicySet")
            .field("policies", &self.policy_names())
            .field("limits", &self.limits)
            .finish()
    }
}

/// A validation with its compiled expressions.
#[derive(Debug)]
pub(crate) struct CompiledValidation {
    pub(crate) expression: CompiledExpression,
    pub(crate) message_expression: Option<CompiledExpression>,
    pub(crate) message: Option<String>,
    pub(crate) reason: Option<StatusReason>,
}

/// A policy with its expressions compiled and its bindings attached.
#[derive(Debug)]
pub(crate) struct CompiledPolicy {
    pub(crate) name: String,
    pub(crate) spec: PolicySpec,
    pub(crate) failure_policy: FailurePolicy,
    pub(crate) variables: Vec<(String, CompiledExpression)>,
    /// `variables.<name>` for each variable: the name its value is bound to.
    pub(crate) variable_bindings: Vec<String>,
    pub(crate) match_conditions: Vec<(String, CompiledExpression)>,
    pub(crate) validations: Vec<CompiledValidation>,
    pub(crate) audit_annotations: Vec<(String, CompiledExpression)>,
    pub(crate) bindings: Vec<CompiledBinding>,
}

/// A binding, checked at load.
#[derive(Debug)]
pub(crate) struct CompiledBinding {
    pub(crate) name: String,
    pub(crate) spec: BindingSpec,
}

pub(crate) const POLICY: &str = "ValidatingAdmissionPolicy";
pub(crate) const BINDING: &str = "ValidatingAdmissionPolicyBinding";

impl PolicySet {
    /// Loads every `.yaml`, `.yml` and `.json` file under `path`, recursively,
    /// in name order, skipping `tests/` directories. Documents of other kinds
    /// (ConfigMaps, CRDs) are ignored.
    ///
    /// # Errors
    /// On the first unreadable file, invalid document or expression.
    pub fn load_dir(path: &Path) -> Result<Self, PolicyLoadError> {
        // Policy test suites live in `tests/` beside the bundle.
        let files = manifest::collect_files(path, &["tests"]).map_err(from_manifest_error)?;
        Self::load_files(&files)
    }

    /// Loads the given files (YAML, possibly multi-document, or JSON).
    ///
    /// # Errors
    /// As [`PolicySet::load_dir`].
    pub fn load_files(files: &[PathBuf]) -> Result<Self, PolicyLoadError> {
        let documents = files
            .iter()
            .map(|file| {
                std::fs::read_to_string(file)
                    .map(|text| (file.display().to_string(), text))
                    .map_err(|source| PolicyLoadError::Io {
                        path: file.clone(),
                        source,
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::from_documents(documents)
    }

    /// Loads policies from `(source name, text)` pairs; the name is only used
    /// in error messages.
    ///
    /// # Errors
    /// As [`PolicySet::load_dir`].
    pub fn from_documents(documents: Vec<(String, String)>) -> Result<Self, PolicyLoadError> {
        let mut policies: BTreeMap<String, (String, ValidatingAdmissionPolicy)> = BTreeMap::new();
        let mut bindings: BTreeMap<String, (String, ValidatingAdmissionPolicyBinding)> =
            BTreeMap::new();
        for (source_name, text) in documents {
            for document in parse_documents(&source_name, &text)? {
                match document.get("kind").and_then(Value::as_str) {
                    Some(POLICY) => {
                        let policy: ValidatingAdmissionPolicy =
                            typed(&source_name, POLICY, document)?;
                        insert_unique(
                            &mut policies,
                            POLICY,
                            &policy.metadata.name.clone(),
                            source_name.clone(),
                            policy,
                        )?;
                    }
                    Some(BINDING) => {
                        let binding: ValidatingAdmissionPolicyBinding =
                            typed(&source_name, BINDING, document)?;
                        insert_unique(
                            &mut bindings,
                            BINDING,
                            &binding.metadata.name.clone(),
                            source_name.clone(),
                            binding,
                        )?;
                    }
                    _ => {}
                }
            }
        }
        let env = Arc::new(kubernetes_env()?);
        let mut compiler = Compiler::new(Arc::clone(&env));
        let mut compiled = BTreeMap::new();
        for (name, (source_name, policy)) in policies {
            let policy = compile_policy(&mut compiler, &source_name, policy)?;
            compiled.insert(name, policy);
        }
        for (name, (source_name, binding)) in bindings {
            check_binding(&source_name, &binding)?;
            let Some(policy) = compiled.get_mut(&binding.spec.policy_name) else {
                return Err(PolicyLoadError::UnknownPolicy {
                    source_name,
                    binding: name,
                    policy: binding.spec.policy_name,
                });
            };
            policy.bindings.push(CompiledBinding {
                name,
                spec: binding.spec,
            });
        }
        let policies: Vec<CompiledPolicy> = compiled.into_values().collect();
        Ok(PolicySet {
            env: Arc::clone(compiler.env()),
            index: PolicyIndex::build(&policies),
            policies,
            limits: EvaluationLimits::default(),
        })
    }

    /// Replaces the evaluation limits.
    #[must_use]
    pub fn with_limits(mut self, limits: EvaluationLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The names of the loaded policies, in evaluation order.
    #[must_use]
    pub fn policy_names(&self) -> Vec<&str> {
        self.policies.iter().map(|p| p.name.as_str()).collect()
    }

    /// The names of the bindings of `policy`, in evaluation order.
    #[must_use]
    pub fn binding_names(&self, policy: &str) -> Vec<&str> {
        self.policies
            .iter()
            .filter(|p| p.name == policy)
            .flat_map(|p| p.bindings.iter().map(|b| b.name.as_str()))
            .collect()
    }
}

/// Manifest reading is shared with the stores and the CLI; only the error
/// type is the policy loader's own.
fn from_manifest_error(error: ManifestError) -> PolicyLoadError {
    match error {
        ManifestError::Io { path, source } => PolicyLoadError::Io {
            path: PathBuf::from(path),
            source,
        },
        ManifestError::Syntax { path, message } => PolicyLoadError::Syntax {
            source_name: path,
            message,
        },
    }
}

fn parse_documents(source_name: &str, text: &str) -> Result<Vec<Value>, PolicyLoadError> {
    Ok(manifest::parse_documents(source_name, text)
        .map_err(from_manifest_error)?
        .into_iter()
        .map(|d| d.value)
        .collect())
}

fn typed<T: serde::de::DeserializeOwned>(
    source_name: &str,
    kind: &'static str,
    document: Value,
) -> Result<T, PolicyLoadError> {
    let name = document
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let api_version = document.get("apiVersion").and_then(Value::as_str);
    if !matches!(
        api_version,
        Some("admissionregistration.k8s.io/v1" | "admissionregistration.k8s.io/v1beta1")
    ) {
        return Err(invalid(
            source_name,
            kind,
            &name,
            format!("apiVersion must be admissionregistration.k8s.io/v1, not {api_version:?}"),
        ));
    }
    if name.is_empty() {
        return Err(invalid(
            source_name,
            kind,
            &name,
            "metadata.name is required".to_owned(),
        ));
    }
    T::deserialize(&document).map_err(|e| {
        let message = crate::json_object::value_with_path::<T>(&document, &e);
        invalid(source_name, kind, &name, message)
    })
}

pub(crate) fn invalid(
    source_name: &str,
    kind: &'static str,
    name: &str,
    message: String,
) -> PolicyLoadError {
    PolicyLoadError::Invalid {
        source_name: source_name.to_owned(),
        kind,
        name: name.to_owned(),
        message,
    }
}

fn insert_unique<T>(
    map: &mut BTreeMap<String, (String, T)>,
    kind: &'static str,
    name: &str,
    source_name: String,
    value: T,
) -> Result<(), PolicyLoadError> {
    if let Some((first, _)) = map.get(name) {
        return Err(PolicyLoadError::Duplicate {
            kind,
            name: name.to_owned(),
            first: first.clone(),
            second: source_name,
        });
    }
    map.insert(name.to_owned(), (source_name, value));
    Ok(())
}
