//! `nodescope test`: policy test suites, in the spirit of `kyverno test` and
//! `gator verify`. A suite is a YAML file of cases; each case is evaluated
//! by the dry-run engine (so by the webhook's own pipeline) and compared
//! with its expectation. The schema is documented in docs/policy-tests.md.

mod report;
mod schema;

use crate::cli::dry_run::input::{InputError, Location, SourceDocument};
use crate::cli::dry_run::kinds::Kinds;
use crate::cli::dry_run::output::ObjectReport;
use crate::cli::dry_run::review::User;
use crate::cli::dry_run::sources::{self, Inputs};
use crate::cli::dry_run::{self, Engine, RequestOptions, RunError};
use crate::cli::{TestArgs, TestFormat};
use crate::policy::PolicySet;
use regex::Regex;
use report::CaseResult;
use schema::{Case, Expect, ExpectedResources};
use serde_json::Value;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// Compiled policies, shared by the suites that name the same path.
type PolicyCache = HashMap<Option<PathBuf>, Arc<PolicySet>>;

/// Runs the suites under `args.paths`; exit code 1 when any case fails.
///
/// # Errors
/// An unreadable or malformed suite or policy, and a run that would check
/// nothing: no suite, a suite without cases, a `--run` that selects none
/// (exit 2).
pub fn run_test(args: &TestArgs) -> Result<ExitCode, RunError> {
    let filter = args
        .run
        .as_deref()
        .map(|pattern| {
            Regex::new(pattern)
                .map_err(|e| InputError::Usage(format!("--run {pattern:?}: {}", regex_problem(&e))))
        })
        .transpose()?;
    let mut files = Vec::new();
    for path in &args.paths {
        files.extend(suite_files(path)?);
    }
    let mut cache = PolicyCache::new();
    let mut results = Vec::new();
    let mut cases = 0;
    for file in files {
        let (count, ran) = run_suite(&file, args, filter.as_ref(), &mut cache)?;
        cases += count;
        results.extend(ran);
    }
    if let (Some(pattern), true) = (&args.run, results.is_empty()) {
        return Err(InputError::Usage(format!(
            "--run {pattern:?}: matches none of the {cases} cases, so nothing was tested"
        ))
        .into());
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match args.output {
        TestFormat::Text => report::text(&mut out, &results),
        TestFormat::Junit => report::junit(&mut out, &results),
    }
    .map_err(|e| {
        RunError::Internal(format!("cannot write the results: {}", sources::reason(&e)))
    })?;
    Ok(if results.iter().any(|r| r.failure.is_some()) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The suite files a path names: itself, or the `.yaml`, `.yml` and
/// `.json` files under it, at least one.
fn suite_files(path: &Path) -> Result<Vec<PathBuf>, RunError> {
    let shown = path.display();
    let meta = std::fs::metadata(path)
        .map_err(|e| InputError::Usage(format!("{shown}: {}", sources::reason(&e))))?;
    let files = crate::manifest::collect_files(path, &[]).map_err(sources::manifest_error)?;
    if meta.is_dir() && files.is_empty() {
        return Err(InputError::Usage(format!(
            "{shown}: holds no .yaml, .yml or .json file, so there is no suite to run"
        ))
        .into());
    }
    Ok(files)
}

/// Runs the cases of one suite that `filter` selects: how many cases the
/// suite has, and the results of those run.
fn run_suite(
    file: &Path,
    args: &TestArgs,
    filter: Option<&Regex>,
    cache: &mut PolicyCache,
) -> Result<(usize, Vec<CaseResult>), RunError> {
    let source = file.display().to_string();
    let text = std::fs::read_to_string(file).map_err(|e| InputError::File {
        path: source.clone(),
        message: sources::reason(&e),
    })?;
    let suite = schema::parse(&source, &text)?;
    if suite.cases.is_empty() {
        return Err(InputError::File {
            path: source,
            message: "`cases` is empty, so the suite checks nothing".to_owned(),
        }
        .into());
    }
    let base = file.parent().unwrap_or(Path::new("."));
    let suite_name = suite.name.clone().unwrap_or_else(|| {
        file.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    // A suite's paths are its own, relative to its file: a suite copied
    // elsewhere then fails naming the path it lacks.
    let (policy_path, policy_name) = match (&suite.policies, &args.policies) {
        (Some(path), _) => {
            let path = base.join(path);
            let name = format!("{source}: policies: {}", path.display());
            (Some(path), name)
        }
        (None, Some(path)) => (Some(path.clone()), format!("--policies {}", path.display())),
        (None, None) => (None, String::new()),
    };
    // Suites are hermetic: the objects a policy directory installs (the
    // bundle's resizers ConfigMap) are not params unless a suite lists them.
    let policies = match cache.entry(policy_path) {
        Entry::Occupied(entry) => Arc::clone(entry.get()),
        Entry::Vacant(entry) => {
            let (set, _installed) = dry_run::load_policies(entry.key().as_deref(), &policy_name)?;
            Arc::clone(entry.insert(Arc::new(set)))
        }
    };
    let mut inputs = Inputs::default();
    let mut suite_state = objects(&mut inputs, &suite.params, "params", base, &source)?;
    suite_state.extend(objects(
        &mut inputs,
        &suite.recommendations,
        "recommendations",
        base,
        &source,
    )?);
    let mut results = Vec::new();
    for case in &suite.cases {
        let full_name = format!("{suite_name}/{}", case.name);
        if filter.is_some_and(|f| !f.is_match(&full_name)) {
            continue;
        }
        let at = format!("{source}: case {:?}", case.name);
        let mut state = suite_state.clone();
        state.extend(objects(&mut inputs, &case.params, "params", base, &at)?);
        state.extend(objects(
            &mut inputs,
            &case.recommendations,
            "recommendations",
            base,
            &at,
        )?);
        let subjects = case_objects(&mut inputs, case, base, &at)?;
        let mut kinds = Kinds::default();
        for document in state.iter().chain(&subjects.new).chain(&subjects.old) {
            kinds
                .learn(&document.value)
                .map_err(|why| InputError::document(&document.location, why))?;
        }
        for document in state.iter().chain(&subjects.old) {
            dry_run::check_state(&kinds, document)?;
        }
        let values = state.iter().map(|d| d.value.clone()).collect();
        let engine = Engine::new(Arc::clone(&policies), values, Default::default(), kinds)
            .map_err(|e| dry_run::locate(e, &state))?;
        let mut reports = run_case(&engine, case, subjects, &at)?;
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
    Ok((suite.cases.len(), results))
}

/// The documents of a suite's or a case's `field`: inline objects as they
/// are, strings as paths relative to the suite file.
fn objects(
    inputs: &mut Inputs,
    entries: &[Value],
    field: &str,
    base: &Path,
    at: &str,
) -> Result<Vec<SourceDocument>, RunError> {
    let mut out = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        out.extend(entry_documents(
            inputs,
            entry,
            &format!("{at}: {field}[{i}]"),
            base,
        )?);
    }
    Ok(out)
}

/// One entry's documents; `at` names its field.
fn entry_documents(
    inputs: &mut Inputs,
    entry: &Value,
    at: &str,
    base: &Path,
) -> Result<Vec<SourceDocument>, RunError> {
    match entry {
        Value::String(path) => {
            let path = base.join(path);
            Ok(inputs.read_one(&format!("{at}: {}", path.display()), &path)?)
        }
        value => Ok(vec![SourceDocument {
            location: Location {
                source: at.to_owned(),
                document: None,
                item: None,
                line: None,
            },
            value: value.clone(),
        }]),
    }
}

/// A case's objects and its old objects.
struct Subjects {
    new: Vec<SourceDocument>,
    old: Vec<SourceDocument>,
}

fn case_objects(
    inputs: &mut Inputs,
    case: &Case,
    base: &Path,
    at: &str,
) -> Result<Subjects, RunError> {
    let mut new = Vec::new();
    if let Some(object) = &case.object {
        new.extend(entry_documents(
            inputs,
            object,
            &format!("{at}: object"),
            base,
        )?);
    }
    new.extend(objects(inputs, &case.objects, "objects", base, at)?);
    if new.is_empty() {
        return Err(InputError::Usage(format!("{at}: needs `object` or `objects`")).into());
    }
    let old = match &case.old_object {
        Some(old) => entry_documents(inputs, old, &format!("{at}: oldObject"), base)?,
        None => Vec::new(),
    };
    Ok(Subjects { new, old })
}

fn run_case(
    engine: &Engine,
    case: &Case,
    subjects: Subjects,
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
    if operation == "UPDATE" && subjects.old.is_empty() && case.sub_resource.is_none() {
        return Err(InputError::Usage(format!(
            "{at}: operation UPDATE needs `oldObject` (or a `subResource`)"
        ))
        .into());
    }
    let mut old: Vec<Value> = subjects.old.into_iter().map(|d| d.value).collect();
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
    engine.evaluate_all(dry_run::requests(engine, subjects.new, &old, &options, 0)?)
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

/// A regex error on one line: its last line (`error: unclosed group`)
/// says why; the lines above only repeat the pattern.
fn regex_problem(error: &regex::Error) -> String {
    let text = error.to_string();
    let last = text.lines().last().unwrap_or_default().trim();
    format!(
        "not a valid regular expression: {}",
        last.strip_prefix("error: ").unwrap_or(last)
    )
}
