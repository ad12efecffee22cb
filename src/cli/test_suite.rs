//! `nodescope test`: policy test suites, in the spirit of `kyverno test` and
//! `gator verify`. A suite is a YAML file of cases; each case is evaluated
//! by the dry-run engine (so by the webhook's own pipeline) and compared
//! with its expectation. The schema is documented in docs/policy-tests.md.

use crate::cli::dry_run::input::{self, InputError, Location, SourceDocument};
use crate::cli::dry_run::output::{xml, ObjectReport};
use crate::cli::dry_run::review::User;
use crate::cli::dry_run::{self, Engine, RequestOptions, RunError};
use crate::cli::{TestArgs, TestFormat};
use crate::policy::PolicySet;
use regex::Regex;
use serde::Deserialize;
use serde_json::Value;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// One suite file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Suite {
    /// Defaults to the file name without extension.
    name: Option<String>,
    /// Policy directory, relative to the suite file.
    policies: Option<PathBuf>,
    /// Objects (inline) or paths (relative to the suite file) for every case.
    #[serde(default)]
    params: Vec<Value>,
    #[serde(default)]
    recommendations: Vec<Value>,
    /// Free-form; a place to define YAML anchors that cases refer to.
    #[serde(default, rename = "fixtures")]
    _fixtures: Value,
    cases: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Case {
    name: String,
    #[serde(default = "create")]
    operation: String,
    sub_resource: Option<String>,
    object: Option<Value>,
    #[serde(default)]
    objects: Vec<Value>,
    old_object: Option<Value>,
    #[serde(default)]
    params: Vec<Value>,
    #[serde(default)]
    recommendations: Vec<Value>,
    user: Option<UserSpec>,
    #[serde(default)]
    nodes: Vec<String>,
    expect: Expect,
}

fn create() -> String {
    "CREATE".to_owned()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UserSpec {
    #[serde(default)]
    username: String,
    #[serde(default)]
    groups: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    result: String,
    policy: Option<String>,
    message: Option<String>,
    #[serde(default)]
    resources: BTreeMap<String, ExpectedResources>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectedResources {
    #[serde(default)]
    requests: BTreeMap<String, Value>,
    #[serde(default)]
    limits: BTreeMap<String, Value>,
}

/// The outcome of one case.
struct CaseResult {
    suite: String,
    case: String,
    failure: Option<String>,
}

/// Compiled policies, shared by the suites that name the same directory.
type PolicyCache = HashMap<Option<PathBuf>, Arc<PolicySet>>;

/// Runs the suites under `args.paths`; exit code 1 when any case fails.
///
/// # Errors
/// An unreadable or malformed suite or policy (exit 2).
pub fn run_test(args: &TestArgs) -> Result<ExitCode, RunError> {
    let filter = args
        .run
        .as_deref()
        .map(Regex::new)
        .transpose()
        .map_err(|e| InputError::Usage(format!("--run: {e}")))?;
    let mut files = Vec::new();
    for path in &args.paths {
        files.extend(crate::manifest::collect_files(path, &[]).map_err(InputError::from)?);
    }
    let mut cache = PolicyCache::new();
    let mut results = Vec::new();
    for file in files {
        results.extend(run_suite(&file, args, filter.as_ref(), &mut cache)?);
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match args.output {
        TestFormat::Text => text(&mut out, &results),
        TestFormat::Junit => junit(&mut out, &results),
    }
    .map_err(|e| RunError::Internal(e.to_string()))?;
    Ok(if results.iter().any(|r| r.failure.is_some()) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn run_suite(
    file: &Path,
    args: &TestArgs,
    filter: Option<&Regex>,
    cache: &mut PolicyCache,
) -> Result<Vec<CaseResult>, RunError> {
    let source = file.display().to_string();
    let text = std::fs::read_to_string(file).map_err(|e| InputError::File {
        path: source.clone(),
        message: e.to_string(),
    })?;
    let options = serde_saphyr::options! { with_snippet: false };
    let suite: Suite =
        serde_saphyr::from_str_with_options(&text, options).map_err(|e| InputError::File {
            path: source.clone(),
            message: format!("not a test suite: {e}"),
        })?;
    let base = file.parent().unwrap_or(Path::new("."));
    let suite_name = suite.name.clone().unwrap_or_else(|| {
        file.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    let policy_dir = suite
        .policies
        .as_ref()
        .map(|p| base.join(p))
        .or_else(|| args.policies.clone());
    // Suites are hermetic: the objects a policy directory installs (the
    // bundle's resizers ConfigMap) are not params unless a suite lists them.
    let policies = match cache.entry(policy_dir) {
        Entry::Occupied(entry) => Arc::clone(entry.get()),
        Entry::Vacant(entry) => {
            let (set, _installed) = dry_run::load_policies(entry.key().as_deref())?;
            Arc::clone(entry.insert(Arc::new(set)))
        }
    };
    let suite_params = objects(&suite.params, base, &source)?;
    let suite_recommendations = objects(&suite.recommendations, base, &source)?;
    let mut results = Vec::new();
    for case in &suite.cases {
        let full_name = format!("{suite_name}/{}", case.name);
        if filter.is_some_and(|f| !f.is_match(&full_name)) {
            continue;
        }
        let at = format!("{source}: case {:?}", case.name);
        let mut state = suite_params.clone();
        state.extend(objects(&case.params, base, &at)?);
        state.extend(suite_recommendations.iter().cloned());
        state.extend(objects(&case.recommendations, base, &at)?);
        let engine = Engine::new(Arc::clone(&policies), state, Default::default())?;
        let mut reports = run_case(&engine, case, base, &at)?;
        if !case.nodes.is_empty() {
            // With `nodes`, the case is about the DaemonSet's pods.
            reports.retain(|r| r.node.is_some());
        }
        results.push(CaseResult {
            suite: suite_name.clone(),
            case: case.name.clone(),
            failure: check(&case.expect, &reports, &at)?,
        });
    }
    Ok(results)
}

/// Inline objects as they are; strings are paths relative to the suite.
fn objects(entries: &[Value], base: &Path, at: &str) -> Result<Vec<Value>, RunError> {
    let mut out = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        match entry {
            Value::String(path) => {
                for document in input::read_all(&[base.join(path)])? {
                    input::check_object(&document)?;
                    out.push(document.value);
                }
            }
            value => {
                let document = located(value.clone(), at, i);
                input::check_object(&document)?;
                out.push(document.value);
            }
        }
    }
    Ok(out)
}

fn located(value: Value, at: &str, index: usize) -> SourceDocument {
    SourceDocument {
        location: Location {
            source: at.to_owned(),
            document: index + 1,
            item: None,
            line: None,
        },
        value,
    }
}

fn run_case(
    engine: &Engine,
    case: &Case,
    base: &Path,
    at: &str,
) -> Result<Vec<ObjectReport>, RunError> {
    let operation = match case.operation.as_str() {
        op @ ("CREATE" | "UPDATE" | "DELETE") => op,
        other => {
            return Err(InputError::Usage(format!(
                "{at}: operation must be CREATE, UPDATE or DELETE, not {other:?}"
            ))
            .into())
        }
    };
    let mut entries: Vec<Value> = case.object.iter().cloned().collect();
    entries.extend(case.objects.iter().cloned());
    if entries.is_empty() {
        return Err(InputError::Usage(format!("{at}: needs `object` or `objects`")).into());
    }
    let documents = objects(&entries, base, at)?
        .into_iter()
        .enumerate()
        .map(|(i, value)| located(value, at, i))
        .collect();
    let mut old = objects(
        &case.old_object.iter().cloned().collect::<Vec<_>>(),
        base,
        at,
    )?;
    for object in &mut old {
        engine.default(object, "CREATE");
    }
    let user = case
        .user
        .as_ref()
        .map(|u| User {
            username: u.username.clone(),
            groups: u.groups.clone(),
        })
        .unwrap_or_default();
    let options = RequestOptions {
        operation,
        sub_resource: case.sub_resource.as_deref(),
        user: &user,
        nodes: &case.nodes,
    };
    dry_run::requests(engine, documents, &old, &options, 0)?
        .into_iter()
        .map(|request| engine.evaluate(request))
        .collect()
}

/// `None` when every report meets the expectation, else why not.
fn check(expect: &Expect, reports: &[ObjectReport], at: &str) -> Result<Option<String>, RunError> {
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
        .map(Regex::new)
        .transpose()
        .map_err(|e| InputError::Usage(format!("{at}: expect.message: {e}")))?;
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

fn text(out: &mut impl Write, results: &[CaseResult]) -> std::io::Result<()> {
    for result in results {
        match &result.failure {
            None => writeln!(out, "PASS  {}/{}", result.suite, result.case)?,
            Some(why) => writeln!(out, "FAIL  {}/{}: {why}", result.suite, result.case)?,
        }
    }
    let failed = results.iter().filter(|r| r.failure.is_some()).count();
    writeln!(out, "{} passed, {failed} failed", results.len() - failed)
}

fn junit(out: &mut impl Write, results: &[CaseResult]) -> std::io::Result<()> {
    let failed = results.iter().filter(|r| r.failure.is_some()).count();
    writeln!(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>")?;
    writeln!(
        out,
        "<testsuites name=\"nodescope test\" tests=\"{}\" failures=\"{failed}\">",
        results.len()
    )?;
    let mut suites: Vec<&str> = results.iter().map(|r| r.suite.as_str()).collect();
    suites.dedup();
    for suite in suites {
        let cases: Vec<_> = results.iter().filter(|r| r.suite == suite).collect();
        let failures = cases.iter().filter(|r| r.failure.is_some()).count();
        writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\">",
            xml(suite),
            cases.len()
        )?;
        for case in cases {
            match &case.failure {
                None => writeln!(
                    out,
                    "    <testcase classname=\"{}\" name=\"{}\"/>",
                    xml(suite),
                    xml(&case.case)
                )?,
                Some(why) => writeln!(
                    out,
                    "    <testcase classname=\"{}\" name=\"{}\">\n      <failure message=\"{}\"/>\n    </testcase>",
                    xml(suite),
                    xml(&case.case),
                    xml(why)
                )?,
            }
        }
        writeln!(out, "  </testsuite>")?;
    }
    writeln!(out, "</testsuites>")
}
