//! `nodescope test`: policy test suites, in the spirit of `kyverno test` and
//! `gator verify`. A suite is a YAML file of cases; each case is evaluated
//! by the dry-run engine (so by the webhook's own pipeline) and compared
//! with its expectation. The schema is documented in docs/policy-tests.md.

pub mod cases;
mod expect;
mod report;
mod schema;

use crate::apiserver::kinds::Kinds;
use crate::apiserver::review::User;
use crate::cli::dry_run::{self, Engine, Request, RequestOptions, RunError};
use crate::input::sources::{self, Inputs};
use crate::input::{InputError, Location, SourceDocument};
use crate::policy::PolicySet;
use clap::{Args, ValueEnum};
use regex::Regex;
use report::CaseResult;
use schema::Case;
use serde_json::Value;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// `-o` of `test`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TestFormat {
    /// One PASS/FAIL line per case and a summary.
    Text,
    /// JUnit XML: one testcase per case.
    Junit,
}

/// `nodescope test`.
#[derive(Debug, Args, Clone)]
pub struct TestArgs {
    /// Suite files, or directories searched recursively for .yaml/.yml files.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Policies for suites that do not name their own `policies:`; the
    /// bundle built into this binary when omitted.
    #[arg(long)]
    pub policies: Option<PathBuf>,
    /// Run only the cases whose `suite/case` name matches this regex.
    #[arg(long)]
    pub run: Option<String>,
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: TestFormat,
}

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
    let mut out = crate::cli::out::stdout();
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

/// Which policies a suite's cases are evaluated against.
#[derive(Debug, Clone, Copy)]
enum PolicyChoice<'a> {
    /// The suite's own `policies:`, else this path (`--policies`), else
    /// the bundle: what `nodescope test` does.
    SuiteFirst(Option<&'a Path>),
    /// This path for every suite, whatever the suite names: for comparing
    /// with an enforcer that has all of them installed at once.
    Everywhere(&'a Path),
}

/// A suite file read, with what its cases share.
struct OpenSuite {
    suite: schema::Suite,
    source: String,
    base: PathBuf,
    name: String,
    policies: Arc<PolicySet>,
    /// The suite's params and recommendations.
    state: Vec<SourceDocument>,
}

/// Reads and checks a suite, and compiles (or reuses) its policies.
fn open_suite(
    file: &Path,
    choice: PolicyChoice<'_>,
    cache: &mut PolicyCache,
    inputs: &mut Inputs,
) -> Result<OpenSuite, RunError> {
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
    let base = file.parent().unwrap_or(Path::new(".")).to_path_buf();
    let name = suite.name.clone().unwrap_or_else(|| {
        file.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    // A suite's paths are its own, relative to its file: a suite copied
    // elsewhere then fails naming the path it lacks.
    let (policy_path, policy_name) = match (choice, &suite.policies) {
        (PolicyChoice::Everywhere(path), _) => (
            Some(path.to_path_buf()),
            format!("policies {}", path.display()),
        ),
        (PolicyChoice::SuiteFirst(_), Some(path)) => {
            let path = base.join(path);
            let name = format!("{source}: policies: {}", path.display());
            (Some(path), name)
        }
        (PolicyChoice::SuiteFirst(Some(path)), None) => (
            Some(path.to_path_buf()),
            format!("--policies {}", path.display()),
        ),
        (PolicyChoice::SuiteFirst(None), None) => (None, String::new()),
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
    let mut state = objects(inputs, &suite.params, "params", &base, &source)?;
    state.extend(objects(
        inputs,
        &suite.recommendations,
        "recommendations",
        &base,
        &source,
    )?);
    Ok(OpenSuite {
        suite,
        source,
        base,
        name,
        policies,
        state,
    })
}

/// A case turned into the engine that holds its cluster state and the
/// requests to evaluate with it.
struct PreparedCase {
    engine: Engine,
    requests: Vec<Request>,
    /// The suite's and the case's params and recommendations, in order.
    state: Vec<SourceDocument>,
    /// The case, as messages name it.
    at: String,
}

/// Everything `nodescope test` does to a case short of evaluating it.
/// `keep_written` keeps the objects as written on each request.
fn prepare_case(
    open: &OpenSuite,
    case: &Case,
    inputs: &mut Inputs,
    keep_written: bool,
) -> Result<PreparedCase, RunError> {
    let (base, at) = (
        open.base.as_path(),
        format!("{}: case {:?}", open.source, case.name),
    );
    let mut state = open.state.clone();
    state.extend(objects(inputs, &case.params, "params", base, &at)?);
    state.extend(objects(
        inputs,
        &case.recommendations,
        "recommendations",
        base,
        &at,
    )?);
    let subjects = case_objects(inputs, case, base, &at)?;
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
    let engine = Engine::new(
        Arc::clone(&open.policies),
        values,
        Default::default(),
        Default::default(),
        kinds,
    )
    .map_err(|e| dry_run::locate(e, &state))?;
    let requests = case_requests(&engine, case, subjects, &at, keep_written)?;
    Ok(PreparedCase {
        engine,
        requests,
        state,
        at,
    })
}

/// Runs the cases of one suite that `filter` selects: how many cases the
/// suite has, and the results of those run.
fn run_suite(
    file: &Path,
    args: &TestArgs,
    filter: Option<&Regex>,
    cache: &mut PolicyCache,
) -> Result<(usize, Vec<CaseResult>), RunError> {
    let mut inputs = Inputs::default();
    let choice = PolicyChoice::SuiteFirst(args.policies.as_deref());
    let open = open_suite(file, choice, cache, &mut inputs)?;
    let mut results = Vec::new();
    for case in &open.suite.cases {
        let full_name = format!("{}/{}", open.name, case.name);
        if filter.is_some_and(|f| !f.is_match(&full_name)) {
            continue;
        }
        let prepared = prepare_case(&open, case, &mut inputs, false)?;
        let mut reports = prepared.engine.evaluate_all(prepared.requests)?;
        if !case.nodes.is_empty() {
            // With `nodes`, the case is about the DaemonSet's pods.
            reports.retain(|r| r.node.is_some());
        }
        results.push(CaseResult {
            suite: open.name.clone(),
            case: case.name.clone(),
            failure: expect::check(&case.expect, &reports, &prepared.at)?,
        });
    }
    Ok((open.suite.cases.len(), results))
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

/// The requests of a case, as the dry-run engine builds them.
fn case_requests(
    engine: &Engine,
    case: &Case,
    subjects: Subjects,
    at: &str,
    keep_written: bool,
) -> Result<Vec<Request>, RunError> {
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
    let old: Vec<Value> = subjects.old.into_iter().map(|d| d.value).collect();
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
        keep_written,
    };
    dry_run::requests(engine, subjects.new, &old, &options, &mut 0)
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
