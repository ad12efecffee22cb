//! Whether a case's reports meet its `expect` (docs/policy-tests.md,
//! "Expectations").

use super::regex_problem;
use super::schema::{Expect, ExpectedResources};
use crate::cli::dry_run::output::ObjectReport;
use crate::cli::dry_run::RunError;
use crate::input::InputError;
use regex::Regex;
use serde_json::Value;
use std::collections::BTreeMap;
/// `None` when every report meets the expectation, else why not.
pub(super) fn check(
    expect: &Expect,
    reports: &[ObjectReport],
    at: &str,
) -> Result<Option<String>, RunError> {
    let allowed = ["allow", "deny", "warn", "skip", "error"];
    if !allowed.contains(&expect.result.as_str())
        || (expect.policy.is_none() && !allowed[..3].contains(&expect.result.as_str()))
    {
        return Err(InputError::Usage(format!(
            "{at}: expect.result must be allow, deny or warn (or, with expect.policy, skip or error), not {:?}",
            expect.result
        ))
        .into());
    }
    let pattern = expect
        .message
        .as_deref()
        .map(|pattern| {
            Regex::new(pattern).map_err(|e| {
                InputError::Usage(format!(
                    "{at}: expect.message {pattern:?}: {}",
                    regex_problem(&e)
                ))
            })
        })
        .transpose()?;
    if reports.is_empty() {
        return Ok(Some(
            "nothing to check (with `nodes`, give an apps/v1 DaemonSet)".to_owned(),
        ));
    }
    for report in reports {
        if let Some(problem) = check_one(expect, pattern.as_ref(), report) {
            return Ok(Some(format!("{}: {problem}", report.object)));
        }
    }
    Ok(None)
}

fn check_one(expect: &Expect, pattern: Option<&Regex>, report: &ObjectReport) -> Option<String> {
    let (actual, messages): (String, Vec<&str>) = match &expect.policy {
        Some(policy) => {
            let rows: Vec<_> = report
                .results
                .iter()
                .filter(|r| &r.policy == policy)
                .collect();
            let Some(row) = rows
                .iter()
                .find(|r| r.result == expect.result)
                .or(rows.first())
            else {
                return Some(format!("policy {policy} was not evaluated"));
            };
            (
                row.result.to_owned(),
                row.message.as_deref().into_iter().collect(),
            )
        }
        None => match (&report.status, report.warnings.is_empty()) {
            (Some(status), _) => ("deny".to_owned(), vec![status.message.as_str()]),
            (None, false) => (
                "warn".to_owned(),
                report.warnings.iter().map(String::as_str).collect(),
            ),
            (None, true) => ("allow".to_owned(), Vec::new()),
        },
    };
    if actual != expect.result {
        let why = messages
            .first()
            .map(|m| format!(": {m}"))
            .unwrap_or_default();
        return Some(format!("expected {}, got {actual}{why}", expect.result));
    }
    if let Some(pattern) = pattern {
        if !messages.iter().any(|m| pattern.is_match(m)) {
            return Some(format!("no message matches /{pattern}/; got {messages:?}"));
        }
    }
    if !expect.resources.is_empty() && report.object.starts_with("Pod/") {
        return check_resources(&expect.resources, report);
    }
    None
}

fn check_resources(
    expected: &BTreeMap<String, ExpectedResources>,
    report: &ObjectReport,
) -> Option<String> {
    let Some(mutation) = &report.mutation else {
        return Some(
            "expected resources after mutation, but the webhook does not patch this pod".to_owned(),
        );
    };
    for (name, want) in expected {
        let Some(got) = mutation.containers.iter().find(|c| &c.name == name) else {
            return Some(format!("no container {name:?}"));
        };
        for (what, want, got) in [
            ("requests", &want.requests, &got.requests),
            ("limits", &want.limits, &got.limits),
        ] {
            let text = |v: &Value| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let want: BTreeMap<_, _> = want.iter().map(|(k, v)| (k.clone(), text(v))).collect();
            let got: BTreeMap<_, _> = got.iter().map(|(k, v)| (k.clone(), text(v))).collect();
            if want != got {
                return Some(format!(
                    "container {name:?} {what}: expected {want:?}, got {got:?}"
                ));
            }
        }
    }
    None
}
