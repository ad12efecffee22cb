//! `nodescope features` without a subcommand: every Feature, its desired
//! and recorded state and the uses left, as a table or as JSON or YAML for
//! scripts (which also carry the tasks and the instances' reports).

use super::{load, uses_of, write_out, Source, UsesFormat};
use crate::cli::dry_run::RunError;
use crate::cli::kubectl::table::{age, none_found, table};
use crate::json::str_at;
use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Value};
use std::process::ExitCode;

/// Runs `nodescope features [-o table|json|yaml]`; warnings on stderr.
///
/// # Errors
/// Bad input (exit 2), or output that cannot be written (exit 3).
pub(crate) fn run_list(source: &Source, output: UsesFormat) -> Result<ExitCode, RunError> {
    let loaded = load(source)?;
    let now = Timestamp::now();
    let mut features: Vec<&Value> = loaded.features.iter().collect();
    features.sort_by_key(|f| {
        (
            str_at(f, "/metadata/namespace"),
            str_at(f, "/metadata/name"),
        )
    });
    let mut items = Vec::new();
    for feature in &features {
        let uses: usize = uses_of(&loaded, feature)?
            .iter()
            .map(|p| p.uses.len())
            .sum();
        items.push((*feature, uses));
    }
    for warning in super::cleanup::prune_warnings(&loaded)? {
        eprintln!("nodescope: warning: {warning}");
    }
    let text = match output {
        // No Feature: kubectl's words on stderr, not a header alone that
        // reads as "every Feature is fine".
        UsesFormat::Table if items.is_empty() => {
            eprintln!("{}", none_found(None));
            String::new()
        }
        UsesFormat::Table => list_table(&items, now),
        UsesFormat::Json | UsesFormat::Yaml => {
            let list: Vec<Value> = items
                .iter()
                .map(|(f, uses)| list_item(f, *uses, now))
                .collect();
            let report = serde_json::to_value(crate::cli::kubectl::list::list(&list))
                .map_err(|e| RunError::Internal(e.to_string()))?;
            super::render(&report, output)?
        }
    };
    write_out(&text)?;
    Ok(ExitCode::SUCCESS)
}

fn list_table(items: &[(&Value, usize)], now: Timestamp) -> String {
    let mut rows = vec![[
        "NAMESPACE",
        "NAME",
        "DESIRED",
        "STATE",
        "USES",
        "LAST-TRANSITION",
    ]
    .map(str::to_owned)];
    let or_dash = |s: &str| {
        if s.is_empty() {
            "-".to_owned()
        } else {
            s.to_owned()
        }
    };
    for (feature, uses) in items {
        rows.push([
            or_dash(str_at(feature, "/metadata/namespace")),
            or_dash(str_at(feature, "/metadata/name")),
            or_dash(str_at(feature, "/spec/desired")),
            or_dash(str_at(feature, "/status/state")),
            uses.to_string(),
            str_at(feature, "/status/lastTransitionTime")
                .parse::<Timestamp>()
                .map_or_else(|_| "-".to_owned(), |t| age(now, t)),
        ]);
    }
    table(&rows)
}

/// One Feature for `-o json|yaml`: what the table shows, with the time
/// itself, the tasks and the live reports.
fn list_item(feature: &Value, uses: usize, now: Timestamp) -> Value {
    let optional = |pointer: &str| match str_at(feature, pointer) {
        "" => Value::Null,
        text => json!(text),
    };
    let reports: Vec<Value> = crate::features::report::reports(feature)
        .iter()
        .map(|r| {
            let mut entry = r.to_value();
            entry["expired"] = json!(r.expired(now));
            entry
        })
        .collect();
    json!({
        "namespace": str_at(feature, "/metadata/namespace"),
        "name": str_at(feature, "/metadata/name"),
        "desired": optional("/spec/desired"),
        "state": optional("/status/state"),
        "uses": uses,
        "lastTransitionTime": optional("/status/lastTransitionTime"),
        "transitionTasks": feature.pointer("/status/transitionTasks").cloned().unwrap_or(json!([])),
        "reports": reports,
    })
}
