//! What one controller period reads: every object the gating policies of
//! the Features match, in pages ([`super::pages`]), each page evaluated for
//! every Feature at once ([`evaluate_page`], pure) and dropped before the
//! next. One paged pass per resource serves all Features. What stays per
//! Feature is its [`UseTally`] (counts and the first few uses) and, while it
//! turns off with `spec.cleanup`, the patches it will send (identity,
//! resourceVersion and field; no object).
//!
//! Fail closed: a list that fails (a second `410 Gone` included) fails the
//! period for every Feature whose gates match that resource, with the
//! reason; a list cut short is never taken for "no uses", so no Feature
//! reaches `Off` on it.

use super::cleanup::{self, CleanupPatch, CleanupRule};
use super::cluster::{cluster_policies, discover, inputs, ClusterError, Matched};
use super::pages;
use super::tally::UseTally;
use super::uses::{find_uses, Listed, UsesError};
use crate::json::str_at;
use crate::params::PolicyInputs;
use crate::policy::PolicySet;
use kube::api::{Api, DynamicObject};
use kube::discovery::ApiResource;
use kube::Client;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// What the period asks about one Feature.
#[derive(Debug, Clone)]
pub struct Job<'a> {
    pub feature: &'a Value,
    /// The fields to clear from its uses: empty unless it is turning off
    /// and declares `spec.cleanup`.
    pub cleanup: Vec<CleanupRule>,
}

/// What the period found for one Feature.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    pub uses: UseTally,
    /// In [`cleanup::plan`]'s order once [`Found::finish`]ed.
    pub patches: Vec<CleanupPatch>,
}

impl Found {
    fn merge(&mut self, other: Found) {
        self.uses.merge(other.uses);
        self.patches.extend(other.patches);
    }

    /// Orders the patches as one [`cleanup::plan`] of every page would:
    /// stable, so each object keeps its `/status` fields first.
    fn finish(&mut self) {
        self.patches.sort_by(|a, b| {
            (&a.group, &a.resource, &a.namespace, &a.name).cmp(&(
                &b.group,
                &b.resource,
                &b.namespace,
                &b.name,
            ))
        });
    }
}

/// Evaluates one page of one resource for every job, adding to `found`
/// (one per job, in order): its uses, and the cleanup patches of those uses.
///
/// # Errors
/// When a Feature has no name.
pub fn evaluate_page(
    policies: &PolicySet,
    jobs: &[Job<'_>],
    page: &Listed,
    inputs: &dyn PolicyInputs,
    found: &mut [Found],
) -> Result<(), UsesError> {
    let page = std::slice::from_ref(page);
    for (job, found) in jobs.iter().zip(found.iter_mut()) {
        let uses = find_uses(policies, job.feature, page, inputs)?;
        if uses.is_empty() {
            continue;
        }
        if !job.cleanup.is_empty() {
            found
                .patches
                .extend(cleanup::plan(&job.cleanup, &uses, page));
        }
        found.uses.add(uses);
    }
    Ok(())
}

/// One period's findings: per job (in order) what it found, or why its
/// uses could not be read; and the resources listed, to watch.
pub struct Period {
    pub found: Vec<Result<Found, String>>,
    pub resources: Vec<ApiResource>,
}

/// Reads the policies, the Namespaces and, page by page, every object the
/// jobs' gates match.
///
/// # Errors
/// When the policies, the Namespaces or discovery cannot be read; a
/// failed list of matched objects fails only the jobs that need it
/// ([`Period::found`]).
pub async fn read(client: &Client, jobs: &[Job<'_>]) -> Result<Period, ClusterError> {
    let policies = cluster_policies(client).await?;
    let wanted: Vec<BTreeSet<(String, String)>> = jobs
        .iter()
        .map(|job| {
            policies
                .gating_policies(
                    str_at(job.feature, "/metadata/namespace"),
                    str_at(job.feature, "/metadata/name"),
                )
                .into_iter()
                .flat_map(|gate| gate.resources)
                .collect()
        })
        .collect();
    let all: BTreeSet<(String, String)> = wanted.iter().flatten().cloned().collect();
    let matched = discover(client, &all).await?;
    let inputs = inputs(client, jobs.iter().map(|j| j.feature.clone()).collect()).await?;
    let mut found: Vec<Result<Found, String>> = jobs.iter().map(|_| Ok(Found::default())).collect();
    for m in &matched {
        let what = m.what();
        let result = pages::fold(
            &Api::<DynamicObject>::all_with(client.clone(), &m.resource),
            &what,
            || vec![Found::default(); jobs.len()],
            |acc, items| {
                let page = page(m, &what, items)?;
                Ok(evaluate_page(&policies, jobs, &page, &inputs, acc)?)
            },
        )
        .await;
        match result {
            Ok(acc) => {
                for (slot, more) in found.iter_mut().zip(acc) {
                    if let Ok(slot) = slot {
                        slot.merge(more);
                    }
                }
            }
            Err(error) => {
                let reason = error.to_string();
                for (slot, wanted) in found.iter_mut().zip(&wanted) {
                    if wanted.iter().any(|(g, r)| m.covered_by(g, r)) {
                        *slot = Err(reason.clone());
                    }
                }
            }
        }
    }
    for slot in found.iter_mut().flatten() {
        slot.finish();
    }
    Ok(Period {
        found,
        resources: matched.into_iter().map(|m| m.resource).collect(),
    })
}

/// One page as [`Listed`], each object converted as it is taken (the
/// decoded objects go as their values are made).
fn page(m: &Matched, what: &str, items: Vec<DynamicObject>) -> Result<Listed, ClusterError> {
    let mut objects = Vec::with_capacity(items.len());
    for item in items {
        let mut value = serde_json::to_value(item).map_err(|source| ClusterError::Encode {
            what: what.to_owned(),
            source,
        })?;
        value["apiVersion"] = json!(m.resource.api_version);
        value["kind"] = json!(m.resource.kind);
        objects.push(value);
    }
    Ok(m.listed(objects))
}

#[cfg(test)]
#[path = "period_tests.rs"]
mod tests;
