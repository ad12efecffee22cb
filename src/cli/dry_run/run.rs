//! `nodescope dry-run` itself: two passes over `-f` (the kinds and the
//! cluster state first, then the requests in batches), each report spooled
//! as it comes, so memory does not grow with the number of objects.

use super::{
    check_state, is_param_kind, load_policies, locate, requests, spool, DryRunArgs, Engine,
    Operation, RequestOptions, RunError,
};
use crate::apiserver::kinds::Kinds;
use crate::apiserver::review::User;
use crate::input::objects::Unique;
use crate::input::sources::{self, Inputs};
use crate::input::{is_review, InputError, SourceDocument};
use crate::policy::PolicySet;
use serde_json::Value;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

/// Documents turned into requests and evaluated at a time: enough to keep
/// every core busy, few enough that their reviews and reports stay small.
const BATCH: usize = 2048;

/// Learns the kind a document defines (a CRD), or fails at the document.
fn learn(kinds: &mut Kinds, document: &SourceDocument) -> Result<(), RunError> {
    kinds
        .learn(&document.value)
        .map_err(|why| InputError::document(&document.location, why).into())
}

/// Documents on their way to the report, a batch at a time.
struct Batches<'a> {
    engine: &'a Engine,
    old: &'a [Value],
    options: &'a RequestOptions<'a>,
    uid: usize,
    batch: Vec<SourceDocument>,
    spool: spool::ReportSpool,
}

impl Batches<'_> {
    fn add(&mut self, documents: Vec<SourceDocument>) -> Result<(), RunError> {
        for document in documents {
            self.batch.push(document);
            if self.batch.len() >= BATCH {
                self.flush()?;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), RunError> {
        let batch = std::mem::take(&mut self.batch);
        let requests = requests(self.engine, batch, self.old, self.options, &mut self.uid)?;
        for report in self.engine.evaluate_all(requests)? {
            self.spool.push(&report).map_err(RunError::Internal)?;
        }
        Ok(())
    }
}

/// `nodescope dry-run`: prints the report and returns the exit code (0 all
/// admitted, 1 any denied).
///
/// # Errors
/// Input and policy errors (exit 2), internal errors (exit 3).
pub fn run_dry_run(args: &DryRunArgs) -> Result<ExitCode, RunError> {
    use std::io::IsTerminal;
    let colour = use_colour(
        std::io::stdout().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    if let Some(node) = crate::cli::flags::node_name::repeated(&args.nodes) {
        return Err(InputError::Usage(format!(
            "--nodes: {node:?} is given twice: a DaemonSet runs one pod per node"
        ))
        .into());
    }
    if args.operation != Operation::Update && !args.old.is_empty() {
        return Err(InputError::Usage("--old is only used with --operation UPDATE".into()).into());
    }
    let policies_name = args
        .policies
        .as_ref()
        .map(|p| format!("--policies {}", p.display()))
        .unwrap_or_default();
    let (policies, mut state) = load_policies(args.policies.as_deref(), &policies_name)?;
    let mut inputs = Inputs::excluding(&args.exclude)?;
    let params = inputs.read("--params", &args.params)?;
    let recommendations = inputs.read("--recommendations", &args.recommendations)?;
    // State is given once within a flag (across flags, later wins); -f is
    // requests, where two versions of an object are two questions.
    for documents in [&params, &recommendations] {
        let mut unique = Unique::default();
        for document in documents {
            unique.check(&document.value, &document.location)?;
        }
    }
    // The cluster's kinds are read before any manifest is (once, not per
    // object); without --kubeconfig or --context, v1.36's.
    let mut kinds = super::discovery::kinds(&args.cluster)?;
    for document in params.iter().chain(&recommendations) {
        learn(&mut kinds, document)?;
    }
    // First pass over -f, a file or a piece at a time: the kinds the
    // documents define, and the cluster state among them. The rest is
    // dropped and read again below, so the documents are never all held.
    let mut located = params;
    located.extend(recommendations);
    let params_and_recommendations = located.len();
    let mut state_of = |documents: Vec<SourceDocument>, kinds: &mut Kinds| {
        for document in documents {
            learn(kinds, &document)?;
            if !is_review(&document.value) && is_state(&policies, &document.value) {
                located.push(document);
            }
        }
        Ok::<(), RunError>(())
    };
    inputs.each("-f", &args.files, &mut |documents| {
        state_of(documents, &mut kinds)
    })?;
    let kustomized = inputs.kustomize(&args.kustomize)?;
    state_of(kustomized.clone(), &mut kinds)?;
    let old = inputs.read("--old", &args.old)?;
    for document in located[..params_and_recommendations].iter().chain(&old) {
        check_state(&kinds, document)?;
    }
    state.extend(located.iter().map(|d| d.value.clone()));
    let engine = Engine::new(
        Arc::new(policies),
        state,
        args.missing_node_recommendation.into(),
        args.mutation.boost(),
        kinds,
    )
    .map_err(|e| locate(e, &located))?;
    drop(located);
    let old: Vec<Value> = old.into_iter().map(|d| d.value).collect();
    let user = User {
        username: args.as_user.clone().unwrap_or_default(),
        groups: args.as_groups.clone(),
    };
    let options = RequestOptions {
        operation: args.operation.as_str(),
        sub_resource: None,
        user: &user,
        nodes: &args.nodes,
        keep_written: false,
    };
    // Second pass: in batches, each evaluated and spooled before the next
    // is read, so that only one batch of documents, requests and reports
    // is held at a time.
    let mut run = Batches {
        engine: &engine,
        old: &old,
        options: &options,
        uid: 0,
        batch: Vec::with_capacity(BATCH),
        spool: spool::ReportSpool::new(args.output, colour).map_err(RunError::Internal)?,
    };
    inputs.rewind();
    inputs.each("-f", &args.files, &mut |documents| run.add(documents))?;
    run.add(kustomized)?;
    run.flush()?;
    let spool = run.spool;
    let mut out = std::io::BufWriter::new(crate::cli::out::stdout());
    let summary = spool
        .finish(&mut out)
        .and_then(|summary| {
            out.flush()
                .map_err(|e| format!("cannot write the report: {}", sources::reason(&e)))
                .map(|()| summary)
        })
        .map_err(RunError::Internal)?;
    Ok(if summary.denied > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Whether a document of `-f` is also cluster state the run keeps. A
/// ConfigMap is kept only when a binding could take it as its param:
/// inputs hold ConfigMaps by the thousand, and the rules read few.
pub fn is_state(policies: &PolicySet, value: &Value) -> bool {
    is_param_kind(value)
        && (crate::json::str_at(value, "/kind") != "ConfigMap"
            || crate::json::str_at(value, "/apiVersion") != "v1"
            || policies.may_take_as_param(value))
}

/// Colour only on a terminal, and never when `NO_COLOR` is set (to
/// anything, even empty).
#[must_use]
pub fn use_colour(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none()
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
