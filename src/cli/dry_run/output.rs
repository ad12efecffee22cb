//! The dry-run report and its four renderings: a table for people, JSON and
//! YAML (one schema, documented in docs/dry-run.md) for programs, JUnit XML
//! ([`super::junit`]) for CI systems.

use super::DryRunFormat;
use crate::input::Location;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;

/// The whole report: `apiVersion`/`kind` version its schema.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub objects: Vec<ObjectReport>,
    pub summary: Summary,
}

/// Counts of objects (not of rows).
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct Summary {
    pub objects: usize,
    /// Admitted (possibly with warnings).
    pub allowed: usize,
    pub denied: usize,
    /// Objects that got at least one warning.
    pub warnings: usize,
    /// Objects for which at least one binding could not be evaluated.
    pub errors: usize,
}

/// Everything about one request.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReport {
    /// `kind/namespace/name`; `Pod/<ns>/<generateName>[<node>]` for a pod
    /// expanded from a DaemonSet.
    pub object: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<Location>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub operation: String,
    /// The resource, with `/subresource` when there is one.
    pub resource: String,
    pub allowed: bool,
    /// The apiserver's answer when denied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// Every warning the apiserver would return, webhook's and policies'.
    pub warnings: Vec<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub audit_annotations: BTreeMap<String, String>,
    /// One per evaluated (policy, binding, param).
    pub results: Vec<Row>,
    /// The mutating webhook's patch, for pods it would patch or warn about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mutation: Option<MutationReport>,
}

/// The status of a denial, as the apiserver returns it.
#[derive(Debug, Serialize)]
pub struct Status {
    pub code: u16,
    pub reason: String,
    pub message: String,
}

/// One (policy, binding, param) verdict.
#[derive(Debug, Serialize)]
pub struct Row {
    pub policy: String,
    pub binding: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    /// `allow`, `deny`, `warn`, `audit`, `error` or `skip`.
    pub result: &'static str,
    /// The validation's message (for `skip`: why it was skipped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What the mutating webhook does to a pod.
#[derive(Debug, Serialize)]
pub struct MutationReport {
    /// The JSON Patch (RFC 6902) the webhook returns.
    pub patch: Vec<json_patch::PatchOperation>,
    pub warnings: Vec<String>,
    /// Each container's resources after the patch.
    pub containers: Vec<ContainerResources>,
}

/// A container's resources.
#[derive(Debug, Serialize, PartialEq)]
pub struct ContainerResources {
    pub name: String,
    pub requests: BTreeMap<String, Value>,
    pub limits: BTreeMap<String, Value>,
}

impl ContainerResources {
    /// The resources of a container object.
    #[must_use]
    pub fn of(container: &Value) -> Self {
        let list = |key: &str| {
            container
                .pointer(&format!("/resources/{key}"))
                .and_then(Value::as_object)
                .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default()
        };
        Self {
            name: container
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            requests: list("requests"),
            limits: list("limits"),
        }
    }
}

impl ObjectReport {
    /// An object the apiserver's own validation refuses (422 Invalid)
    /// between the two webhook phases: no policy sees it. `node`,
    /// `operation` and `resource` are left for the caller.
    #[must_use]
    pub fn invalid(
        object: String,
        source: Option<Location>,
        message: String,
        mutation: Option<MutationReport>,
    ) -> Self {
        Self {
            object,
            source,
            node: None,
            operation: String::new(),
            resource: String::new(),
            allowed: false,
            status: Some(Status {
                code: 422,
                reason: "Invalid".to_owned(),
                message,
            }),
            warnings: Vec::new(),
            audit_annotations: BTreeMap::new(),
            results: Vec::new(),
            mutation,
        }
    }

    /// Whether a binding could not be evaluated.
    #[must_use]
    pub fn errored(&self) -> bool {
        self.results.iter().any(|r| r.result == "error")
    }
}

impl Summary {
    /// Counts `object` in.
    pub fn count(&mut self, object: &ObjectReport) {
        self.objects += 1;
        if object.allowed {
            self.allowed += 1;
        } else {
            self.denied += 1;
        }
        if !object.warnings.is_empty() {
            self.warnings += 1;
        }
        if object.errored() {
            self.errors += 1;
        }
    }
}

impl Report {
    /// A report over `objects`, with its summary.
    #[must_use]
    pub fn new(objects: Vec<ObjectReport>) -> Self {
        let mut summary = Summary::default();
        for object in &objects {
            summary.count(object);
        }
        Self {
            api_version: "nodescope.dev/v1alpha1",
            kind: "DryRunReport",
            objects,
            summary,
        }
    }
}

/// Writes `report` as `format`; `colour` only affects the table.
///
/// # Errors
/// When writing fails or the report cannot be encoded.
pub fn write(
    out: &mut impl Write,
    report: &Report,
    format: DryRunFormat,
    colour: bool,
) -> Result<(), String> {
    let io = |e: std::io::Error| {
        format!(
            "cannot write the report: {}",
            crate::input::sources::reason(&e)
        )
    };
    match format {
        DryRunFormat::Table => table(out, report, colour).map_err(io),
        DryRunFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, report).map_err(|e| e.to_string())?;
            writeln!(out).map_err(io)
        }
        DryRunFormat::Yaml => {
            let text = serde_saphyr::to_string(report).map_err(|e| e.to_string())?;
            out.write_all(text.as_bytes()).map_err(io)
        }
        DryRunFormat::Junit => super::junit::write(out, report).map_err(io),
    }
}

pub(super) const HEADERS: [&str; 6] =
    ["OBJECT", "SOURCE", "POLICY", "BINDING", "RESULT", "MESSAGE"];
/// The column whose cell is coloured by its value.
const RESULT: usize = 4;
/// The last column, which is not padded.
const MESSAGE: usize = 5;

/// Column widths that fit the headers and `rows`.
pub(super) fn widen(widths: &mut [usize; 6], rows: &[[String; 6]]) {
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row.iter()).take(MESSAGE) {
            *width = (*width).max(cell.chars().count());
        }
    }
}

fn paint(colour: bool, text: &str, code: &str) -> String {
    if colour && !code.is_empty() {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

/// One table line: the cells padded to `widths`, the result coloured.
pub(super) fn table_line(cells: &[String; 6], widths: &[usize; 6], colour: bool) -> String {
    let mut text = String::new();
    for (i, cell) in cells.iter().enumerate().take(MESSAGE) {
        let padded = format!("{cell:<width$}  ", width = widths[i]);
        if i == RESULT {
            text.push_str(&paint(colour, &padded, result_colour(&cells[RESULT])));
        } else {
            text.push_str(&padded);
        }
    }
    text.push_str(&cells[MESSAGE]);
    text.trim_end().to_owned()
}

/// The lines under an object's rows: its denial, warnings and mutation.
pub(super) fn object_notes(
    out: &mut impl Write,
    object: &ObjectReport,
    colour: bool,
) -> std::io::Result<()> {
    if let Some(status) = &object.status {
        let text = format!(
            "  denied ({} {}): {}",
            status.code, status.reason, status.message
        );
        writeln!(out, "{}", paint(colour, &text, "31"))?;
    }
    for warning in &object.warnings {
        writeln!(
            out,
            "{}",
            paint(colour, &format!("  warning: {warning}"), "33")
        )?;
    }
    if let Some(mutation) = &object.mutation {
        mutation_lines(out, mutation)?;
    }
    Ok(())
}

/// The table's last line.
pub(super) fn summary_line(s: &Summary) -> String {
    format!(
        "{} objects: {} allowed, {} denied, {} warnings, {} errors",
        s.objects, s.allowed, s.denied, s.warnings, s.errors
    )
}

fn table(out: &mut impl Write, report: &Report, colour: bool) -> std::io::Result<()> {
    let rows: Vec<Vec<[String; 6]>> = report.objects.iter().map(object_rows).collect();
    let mut widths = HEADERS.map(str::len);
    for rows in &rows {
        widen(&mut widths, rows);
    }
    let headers = HEADERS.map(str::to_owned);
    writeln!(out, "{}", table_line(&headers, &widths, false))?;
    for (object, rows) in report.objects.iter().zip(&rows) {
        for row in rows {
            writeln!(out, "{}", table_line(row, &widths, colour))?;
        }
        object_notes(out, object, colour)?;
    }
    writeln!(out, "{}", summary_line(&report.summary))
}

/// The SOURCE cell: where the object was read, so that two objects of the
/// same name (a PriorityClass given twice) can be told apart.
fn source_cell(object: &ObjectReport) -> String {
    object
        .source
        .as_ref()
        .map_or_else(|| "-".to_owned(), Location::short)
}

pub(super) fn object_rows(object: &ObjectReport) -> Vec<[String; 6]> {
    let source = source_cell(object);
    if object.results.is_empty() {
        // Denied with no policy evaluated: the apiserver's own validation
        // refused it before the validating webhooks.
        let (result, message) = match &object.status {
            Some(status) if !object.allowed => ("deny", status.message.clone()),
            _ => ("allow", "no policy binding matches".to_owned()),
        };
        return vec![[
            object.object.clone(),
            source,
            "-".to_owned(),
            "-".to_owned(),
            result.to_owned(),
            message,
        ]];
    }
    object
        .results
        .iter()
        .map(|row| {
            [
                object.object.clone(),
                source.clone(),
                row.policy.clone(),
                binding_label(row),
                row.result.to_owned(),
                row.message.clone().unwrap_or_default(),
            ]
        })
        .collect()
}

pub(super) fn binding_label(row: &Row) -> String {
    match &row.param {
        Some(param) => format!("{} ({param})", row.binding),
        None => row.binding.clone(),
    }
}

fn result_colour(result: &str) -> &'static str {
    match result {
        "allow" => "32",
        "deny" => "31",
        "warn" | "audit" => "33",
        "error" => "1;31",
        "skip" => "2",
        _ => "",
    }
}

pub(super) fn mutation_lines(
    out: &mut impl Write,
    mutation: &MutationReport,
) -> std::io::Result<()> {
    writeln!(
        out,
        "  mutation: {} patch operation(s)",
        mutation.patch.len()
    )?;
    for operation in &mutation.patch {
        let value = serde_json::to_value(operation).unwrap_or(Value::Null);
        let op = value.get("op").and_then(Value::as_str).unwrap_or("");
        let path = value.get("path").and_then(Value::as_str).unwrap_or("");
        match value.get("value") {
            Some(v) => writeln!(out, "    {op} {path} {v}")?,
            None => writeln!(out, "    {op} {path}")?,
        }
    }
    for container in &mutation.containers {
        writeln!(
            out,
            "    => {}: requests {}; limits {}",
            container.name,
            resource_list(&container.requests),
            resource_list(&container.limits)
        )?;
    }
    Ok(())
}

fn resource_list(list: &BTreeMap<String, Value>) -> String {
    if list.is_empty() {
        return "none".to_owned();
    }
    list.iter()
        .map(|(name, q)| match q {
            Value::String(s) => format!("{name}={s}"),
            other => format!("{name}={other}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denied_report() -> Report {
        Report::new(vec![ObjectReport {
            object: "Pod/ns/p".into(),
            source: None,
            node: None,
            operation: "CREATE".into(),
            resource: "pods".into(),
            allowed: false,
            status: Some(Status {
                code: 403,
                reason: "Forbidden".into(),
                message: "ValidatingAdmissionPolicy 'a' with binding 'b' denied request: <no>"
                    .into(),
            }),
            warnings: Vec::new(),
            audit_annotations: BTreeMap::new(),
            results: vec![Row {
                policy: "a".into(),
                binding: "b".into(),
                param: None,
                result: "deny",
                message: Some("<no>".into()),
            }],
            mutation: None,
        }])
    }

    #[test]
    fn the_table_colours_results_only_when_asked() {
        let report = denied_report();
        let mut plain = Vec::new();
        write(&mut plain, &report, DryRunFormat::Table, false).unwrap();
        let plain = String::from_utf8(plain).unwrap();
        assert!(!plain.contains('\x1b'));
        assert!(plain.ends_with("1 objects: 0 allowed, 1 denied, 0 warnings, 0 errors\n"));
        let mut coloured = Vec::new();
        write(&mut coloured, &report, DryRunFormat::Table, true).unwrap();
        assert!(String::from_utf8(coloured)
            .unwrap()
            .contains("\x1b[31mdeny"));
    }

    #[test]
    fn junit_escapes_messages_and_counts_denials_as_failures() {
        let mut out = Vec::new();
        write(&mut out, &denied_report(), DryRunFormat::Junit, false).unwrap();
        let xml = String::from_utf8(out).unwrap();
        assert!(
            xml.contains(r#"tests="1" failures="1" errors="0" skipped="0""#),
            "{xml}"
        );
        assert!(
            xml.contains(r#"<failure type="deny" message="&lt;no&gt;">"#),
            "{xml}"
        );
    }
}
