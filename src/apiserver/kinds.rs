//! Which kinds exist, and their REST resource and scope.
//!
//! A dry run that guessed the resource of a kind it did not know (`Pods`
//! becoming `podses`) matched no policy and reported "allowed": a CI gate
//! passing what it never checked. So a manifest's kind must be one the
//! apiserver would serve: a Kubernetes built-in (what a default v1.36
//! apiserver's discovery lists, [`super::builtin`], so the plurals and
//! scopes are the API's own, not an English guess), or, with
//! [`Kinds::served_by`], what a cluster's own discovery lists; a kind
//! nodescope itself reads (the VerticalPodAutoscaler, the bundle's
//! `Feature`); or a kind defined by a CustomResourceDefinition among the
//! inputs.

use super::builtin::{self, SERVED};
use super::review::group_version;
use crate::json::str_at;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock};

/// How the apiserver serves one kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindInfo {
    /// The REST resource, e.g. `priorityclasses`.
    pub resource: String,
    pub namespaced: bool,
    /// The versions served, in the order they were learnt.
    pub versions: Vec<String>,
}

/// `(group, kind)` to how it is served.
type Table = HashMap<(String, String), KindInfo>;

/// The kinds a run knows: the built-ins (or a cluster's) plus the CRDs
/// among its inputs.
#[derive(Debug, Clone, Default)]
pub struct Kinds {
    /// CRD-defined kinds; they may also redefine a built-in one.
    defined: Table,
    /// What a cluster's discovery listed; the built-in table when `None`.
    cluster: Option<Arc<Cluster>>,
}

/// A cluster's kinds.
#[derive(Debug)]
struct Cluster {
    /// What its discovery listed, with nodescope's own kinds where it
    /// lists none of them.
    table: Table,
    /// Group versions whose discovery failed, and why.
    unreadable: HashMap<String, String>,
}

/// One kind at one version a cluster's discovery lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// `v1`, `apps/v1`.
    pub api_version: String,
    pub kind: String,
    pub resource: String,
    pub namespaced: bool,
}

/// `(group, version, kind, resource, namespaced)`.
type Own = (&'static str, &'static str, &'static str, &'static str, bool);

/// The VerticalPodAutoscaler is installed by the VPA project, not by the
/// bundle, but nodescope's webhook is about it, so it is always known.
const NODESCOPE: &[Own] = &[
    (
        "autoscaling.k8s.io",
        "v1",
        "VerticalPodAutoscaler",
        "verticalpodautoscalers",
        true,
    ),
    (
        "autoscaling.k8s.io",
        "v1beta2",
        "VerticalPodAutoscaler",
        "verticalpodautoscalers",
        true,
    ),
];

/// nodescope's own kinds: the VerticalPodAutoscaler and the CRDs of the
/// bundle.
static OWN: LazyLock<Table> = LazyLock::new(|| {
    let mut table = Table::new();
    for &(group, version, kind, resource, namespaced) in NODESCOPE {
        insert(&mut table, group, version, kind, resource, namespaced);
    }
    for (file, text) in crate::policy::bundle::FILES {
        let source = crate::policy::bundle::source_name(file);
        for document in crate::manifest::parse_documents(&source, text).unwrap_or_default() {
            // The bundle's CRDs are checked by its tests; a broken one
            // would only be missing here.
            let _ = add_crd(&mut table, &document.value);
        }
    }
    table
});

/// The built-ins a default apiserver serves, then nodescope's own kinds.
static KNOWN: LazyLock<Table> = LazyLock::new(|| {
    let mut table = Table::new();
    for row in SERVED.iter().filter(|row| row.by_default) {
        let (group, version) = group_version(row.api_version);
        insert(
            &mut table,
            group,
            version,
            row.kind,
            row.resource,
            row.namespaced,
        );
    }
    merge(&mut table, &OWN);
    table
});

/// `(group, version, kind)` that only `--runtime-config` turns on.
static OPT_IN: LazyLock<HashSet<(&'static str, &'static str, &'static str)>> =
    LazyLock::new(|| {
        SERVED
            .iter()
            .filter(|row| !row.by_default)
            .map(|row| {
                let (group, version) = group_version(row.api_version);
                (group, version, row.kind)
            })
            .collect()
    });

/// Adds the kinds of `from` that `table` does not have.
fn merge(table: &mut Table, from: &Table) {
    for (key, info) in from {
        table.entry(key.clone()).or_insert_with(|| info.clone());
    }
}

fn insert(
    table: &mut Table,
    group: &str,
    version: &str,
    kind: &str,
    resource: &str,
    namespaced: bool,
) {
    let info = table
        .entry((group.to_owned(), kind.to_owned()))
        .or_insert_with(|| KindInfo {
            resource: resource.to_owned(),
            namespaced,
            versions: Vec::new(),
        });
    info.resource = resource.to_owned();
    info.namespaced = namespaced;
    if !info.versions.iter().any(|v| v == version) {
        info.versions.push(version.to_owned());
    }
}

/// Whether `value` is a CustomResourceDefinition.
#[must_use]
pub fn is_crd(value: &Value) -> bool {
    str_at(value, "/kind") == "CustomResourceDefinition"
        && str_at(value, "/apiVersion").starts_with("apiextensions.k8s.io/")
}

/// Learns the kind a CRD defines; nothing for other objects.
fn add_crd(table: &mut Table, crd: &Value) -> Result<(), String> {
    if !is_crd(crd) {
        return Ok(());
    }
    let group = str_at(crd, "/spec/group");
    let kind = str_at(crd, "/spec/names/kind");
    let plural = str_at(crd, "/spec/names/plural");
    for (field, value) in [
        ("spec.group", group),
        ("spec.names.kind", kind),
        ("spec.names.plural", plural),
    ] {
        if value.is_empty() {
            return Err(format!(
                "CustomResourceDefinition has no `{field}`, so the kind it defines is unknown"
            ));
        }
    }
    let namespaced = match str_at(crd, "/spec/scope") {
        "Namespaced" => true,
        "Cluster" => false,
        other => {
            return Err(format!(
                "CustomResourceDefinition `spec.scope` must be Namespaced or Cluster, not {other:?}"
            ))
        }
    };
    let versions: Vec<&str> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter(|v| v.get("served").and_then(Value::as_bool) != Some(false))
                .map(|v| str_at(v, "/name"))
                .filter(|name| !name.is_empty())
                .collect()
        })
        .unwrap_or_default();
    if versions.is_empty() {
        return Err(
            "CustomResourceDefinition serves no version (`spec.versions[].name`)".to_owned(),
        );
    }
    for version in versions {
        insert(table, group, version, kind, plural, namespaced);
    }
    Ok(())
}

impl Kinds {
    /// Learns the kind `crd` defines when it is a CustomResourceDefinition.
    ///
    /// # Errors
    /// A CRD without a group, kind, plural, scope or served version: why.
    pub fn learn(&mut self, crd: &Value) -> Result<(), String> {
        add_crd(&mut self.defined, crd)
    }

    /// The kinds a cluster's discovery lists, instead of the built-in
    /// table; nodescope's own kinds stay known where the cluster lists
    /// none of them (a preview before they are installed).
    /// `unreadable` are the group versions whose discovery failed, with
    /// why: a manifest of one is refused with that reason.
    #[must_use]
    pub fn served_by(discovered: &[Discovered], unreadable: Vec<(String, String)>) -> Self {
        let mut table = Table::new();
        for row in discovered {
            let (group, version) = group_version(&row.api_version);
            insert(
                &mut table,
                group,
                version,
                &row.kind,
                &row.resource,
                row.namespaced,
            );
        }
        merge(&mut table, &OWN);
        Self {
            defined: Table::new(),
            cluster: Some(Arc::new(Cluster {
                table,
                unreadable: unreadable.into_iter().collect(),
            })),
        }
    }

    /// The built-in part of the default table, for the test that holds it
    /// to the captured discovery.
    #[cfg(test)]
    pub(crate) fn builtin_table() -> Vec<((String, String), KindInfo)> {
        KNOWN
            .iter()
            .filter(|(key, _)| !OWN.contains_key(*key))
            .map(|(key, info)| (key.clone(), info.clone()))
            .collect()
    }

    fn known(&self) -> &Table {
        self.cluster.as_ref().map_or(&KNOWN, |c| &c.table)
    }

    fn info(&self, group: &str, kind: &str) -> Option<&KindInfo> {
        let key = (group.to_owned(), kind.to_owned());
        self.defined.get(&key).or_else(|| self.known().get(&key))
    }

    /// Why `group/version` `kind` is not served by the built-in table
    /// though Kubernetes has it: only `--runtime-config` or
    /// `--feature-gates` turn it on.
    fn opt_in(&self, group: &str, version: &str, kind: &str) -> Option<String> {
        (self.cluster.is_none() && OPT_IN.contains(&(group, version, kind))).then(|| {
            format!(
                "a default Kubernetes {} apiserver does not serve {} (off unless its --runtime-config or \
                 --feature-gates turn it on; --kubeconfig checks against a cluster's own kinds)",
                builtin::VERSION,
                join(group, version)
            )
        })
    }

    /// How `apiVersion`/`kind` is served.
    ///
    /// # Errors
    /// Why it is unknown, with a suggestion when one is close:
    /// `unknown kind "Pods" (apiVersion v1): did you mean "Pod"?`.
    pub fn lookup(&self, api_version: &str, kind: &str) -> Result<&KindInfo, String> {
        let (group, version) = group_version(api_version);
        let unknown = format!("unknown kind {kind:?} (apiVersion {api_version})");
        let opt_in = self.opt_in(group, version, kind);
        let unreadable = self
            .cluster
            .as_ref()
            .and_then(|c| c.unreadable.get(api_version));
        if let (Some(why), None) = (
            unreadable,
            self.defined.get(&(group.to_owned(), kind.to_owned())),
        ) {
            return Err(format!(
                "{unknown}: the cluster's discovery of {api_version} failed: {why}"
            ));
        }
        match self.info(group, kind) {
            Some(info) if info.versions.iter().any(|v| v == version) => return Ok(info),
            Some(info) => {
                let served = format!(
                    "{kind} is served as {}",
                    or_list(info.versions.iter().map(|v| join(group, v)))
                );
                return Err(match opt_in {
                    Some(why) => format!("{unknown}: {served}; {why}"),
                    None => format!("{unknown}: {served}"),
                });
            }
            None => {}
        }
        if let Some(why) = opt_in {
            return Err(format!("{unknown}: {why}"));
        }
        let all = || self.defined.iter().chain(self.known().iter());
        let mut elsewhere: Vec<String> = all()
            .filter(|((_, k), _)| k == kind)
            .flat_map(|((g, _), info)| info.versions.iter().map(|v| join(g, v)))
            .collect();
        if !elsewhere.is_empty() {
            elsewhere.sort();
            elsewhere.dedup();
            return Err(format!(
                "{unknown}: {kind} is served as {}",
                or_list(elsewhere.into_iter())
            ));
        }
        let wanted = kind.to_lowercase();
        let suggestion = all()
            .map(|((g, k), _)| (distance(&wanted, &k.to_lowercase()), g != group, k))
            .filter(|(d, _, _)| *d <= 2)
            .min();
        match (suggestion, &self.cluster) {
            (Some((_, _, close)), _) => Err(format!("{unknown}: did you mean {close:?}?")),
            (None, None) => Err(format!(
                "{unknown}: it is not built into Kubernetes and no CustomResourceDefinition among the inputs defines it"
            )),
            (None, Some(_)) => Err(format!(
                "{unknown}: the cluster does not serve it and no CustomResourceDefinition among the inputs defines it"
            )),
        }
    }
}

fn join(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    }
}

/// `a`, `a or b`, `a, b or c`.
fn or_list(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    match items.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// Levenshtein distance, for "did you mean".
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = if ca == *cb {
                previous
            } else {
                1 + previous.min(row[j]).min(current)
            };
            previous = current;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests;
