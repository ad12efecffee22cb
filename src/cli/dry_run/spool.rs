//! The dry-run report written one object at a time. Each object is rendered
//! into a temporary file as soon as it is evaluated, and the report is put
//! together from that file at the end. So memory holds one object however
//! many there are, the table's columns still fit every row, and a run that
//! fails half-way prints nothing on stdout: only its message and exit code.
//! The bytes are those [`super::output::write`] gives for the whole report.

use super::junit;
use super::output::{
    object_notes, object_rows, summary_line, table_line, widen, ObjectReport, Summary, HEADERS,
};
use super::DryRunFormat;
use serde::Serialize;
use std::io::{BufRead, BufReader, BufWriter, Seek, Write};

/// A spooled table line: a row of cells (padded at the end) or a note.
#[derive(serde::Serialize, serde::Deserialize)]
enum TableLine {
    Row([String; 6]),
    Note(String),
}

/// The report so far: the summary, the table's widths or JUnit's counts,
/// and the rendered objects in a temporary file (deleted when dropped).
pub struct ReportSpool {
    format: DryRunFormat,
    colour: bool,
    file: BufWriter<std::fs::File>,
    summary: Summary,
    widths: [usize; 6],
    counts: junit::Counts,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Head {
    api_version: &'static str,
    kind: &'static str,
}

const HEAD: Head = Head {
    api_version: "nodescope.dev/v1alpha1",
    kind: "DryRunReport",
};

#[derive(Serialize)]
struct Objects<'a> {
    objects: &'a [&'a ObjectReport],
}

#[derive(Serialize)]
struct Tail<'a> {
    summary: &'a Summary,
}

fn io(error: &std::io::Error) -> String {
    format!(
        "cannot write the report: {}",
        crate::input::sources::reason(error)
    )
}

/// Every line of `text` but the first (a YAML key the caller writes itself).
fn after_first_line(text: &str) -> &str {
    text.split_once('\n').map_or("", |(_, rest)| rest)
}

impl ReportSpool {
    /// An empty report in `format`; `colour` only affects the table.
    ///
    /// # Errors
    /// When no temporary file can be made.
    pub fn new(format: DryRunFormat, colour: bool) -> Result<Self, String> {
        let file = tempfile::tempfile().map_err(|e| {
            format!(
                "cannot make a temporary file for the report: {}",
                crate::input::sources::reason(&e)
            )
        })?;
        Ok(Self {
            format,
            colour,
            file: BufWriter::new(file),
            summary: Summary::default(),
            widths: HEADERS.map(str::len),
            counts: junit::Counts::default(),
        })
    }

    /// Adds one object.
    ///
    /// # Errors
    /// When the temporary file cannot be written.
    pub fn push(&mut self, object: &ObjectReport) -> Result<(), String> {
        let first = self.summary.objects == 0;
        self.summary.count(object);
        let out = &mut self.file;
        match self.format {
            DryRunFormat::Table => {
                let rows = object_rows(object);
                widen(&mut self.widths, &rows);
                let mut notes = Vec::new();
                object_notes(&mut notes, object, self.colour).map_err(|e| io(&e))?;
                let lines = rows.into_iter().map(TableLine::Row).chain(
                    String::from_utf8_lossy(&notes)
                        .lines()
                        .map(|l| TableLine::Note(l.to_owned()))
                        .collect::<Vec<_>>(),
                );
                for line in lines {
                    serde_json::to_writer(&mut *out, &line).map_err(|e| e.to_string())?;
                    out.write_all(b"\n").map_err(|e| io(&e))?;
                }
            }
            DryRunFormat::Json => {
                let text = serde_json::to_string_pretty(object).map_err(|e| e.to_string())?;
                if !first {
                    out.write_all(b",\n").map_err(|e| io(&e))?;
                }
                let indented: Vec<String> = text.lines().map(|l| format!("    {l}")).collect();
                out.write_all(indented.join("\n").as_bytes())
                    .map_err(|e| io(&e))?;
            }
            DryRunFormat::Yaml => {
                let text = serde_saphyr::to_string(&Objects { objects: &[object] })
                    .map_err(|e| e.to_string())?;
                out.write_all(after_first_line(&text).as_bytes())
                    .map_err(|e| io(&e))?;
            }
            DryRunFormat::Junit => {
                let cases = junit::object_cases(object, &mut self.counts).map_err(|e| io(&e))?;
                out.write_all(cases.as_bytes()).map_err(|e| io(&e))?;
            }
        }
        Ok(())
    }

    /// Writes the whole report to `out`; returns its summary.
    ///
    /// # Errors
    /// When the temporary file cannot be read back or `out` written.
    pub fn finish(self, out: &mut impl Write) -> Result<Summary, String> {
        let Self {
            format,
            colour,
            file,
            summary,
            widths,
            counts,
        } = self;
        let mut file = file.into_inner().map_err(|e| io(e.error()))?;
        file.rewind().map_err(|e| io(&e))?;
        let mut spooled = BufReader::new(file);
        match format {
            DryRunFormat::Table => {
                let headers = HEADERS.map(str::to_owned);
                writeln!(out, "{}", table_line(&headers, &widths, false)).map_err(|e| io(&e))?;
                for line in spooled.lines() {
                    let line = line.map_err(|e| io(&e))?;
                    let text = match serde_json::from_str(&line).map_err(|e| e.to_string())? {
                        TableLine::Row(cells) => table_line(&cells, &widths, colour),
                        TableLine::Note(text) => text,
                    };
                    writeln!(out, "{text}").map_err(|e| io(&e))?;
                }
                writeln!(out, "{}", summary_line(&summary)).map_err(|e| io(&e))?;
            }
            DryRunFormat::Json => {
                let head = serde_json::to_string_pretty(&HEAD).map_err(|e| e.to_string())?;
                let head = head.trim_end_matches('}').trim_end();
                let tail = serde_json::to_string_pretty(&summary).map_err(|e| e.to_string())?;
                let tail = tail.replace('\n', "\n  ");
                if summary.objects == 0 {
                    write!(out, "{head},\n  \"objects\": [],\n").map_err(|e| io(&e))?;
                } else {
                    write!(out, "{head},\n  \"objects\": [\n").map_err(|e| io(&e))?;
                    std::io::copy(&mut spooled, out).map_err(|e| io(&e))?;
                    out.write_all(b"\n  ],\n").map_err(|e| io(&e))?;
                }
                writeln!(out, "  \"summary\": {tail}\n}}").map_err(|e| io(&e))?;
            }
            DryRunFormat::Yaml => {
                let head = serde_saphyr::to_string(&HEAD).map_err(|e| e.to_string())?;
                out.write_all(head.as_bytes()).map_err(|e| io(&e))?;
                if summary.objects == 0 {
                    let empty = serde_saphyr::to_string(&Objects { objects: &[] })
                        .map_err(|e| e.to_string())?;
                    out.write_all(empty.as_bytes()).map_err(|e| io(&e))?;
                } else {
                    out.write_all(b"objects:\n").map_err(|e| io(&e))?;
                    std::io::copy(&mut spooled, out).map_err(|e| io(&e))?;
                }
                let tail = serde_saphyr::to_string(&Tail { summary: &summary })
                    .map_err(|e| e.to_string())?;
                out.write_all(tail.as_bytes()).map_err(|e| io(&e))?;
            }
            DryRunFormat::Junit => {
                junit::head(out, &counts).map_err(|e| io(&e))?;
                std::io::copy(&mut spooled, out).map_err(|e| io(&e))?;
                junit::foot(out).map_err(|e| io(&e))?;
            }
        }
        Ok(summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::dry_run::output::{self, Report, Row, Status};
    use std::collections::BTreeMap;

    fn object(name: &str, allowed: bool) -> ObjectReport {
        ObjectReport {
            object: format!("Pod/ns/{name}"),
            source: None,
            node: Some("node-a-1".into()),
            operation: "CREATE".into(),
            resource: "pods".into(),
            allowed,
            status: (!allowed).then(|| Status {
                code: 403,
                reason: "Forbidden".into(),
                message: "denied: <no>\nsecond line".into(),
            }),
            warnings: vec![format!("a warning about {name}")],
            audit_annotations: BTreeMap::new(),
            results: vec![Row {
                policy: "a-longer-policy-name".into(),
                binding: "b".into(),
                param: Some("kube-system/x".into()),
                result: if allowed { "allow" } else { "deny" },
                message: (!allowed).then(|| "<no>".to_owned()),
            }],
            mutation: None,
        }
    }

    fn spooled(objects: &[ObjectReport], format: DryRunFormat, colour: bool) -> String {
        let mut spool = ReportSpool::new(format, colour).unwrap();
        for object in objects {
            spool.push(object).unwrap();
        }
        let mut out = Vec::new();
        spool.finish(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_format_spooled_is_the_whole_report_written_at_once() {
        let cases: [Vec<ObjectReport>; 3] = [
            Vec::new(),
            vec![object("one", false)],
            vec![
                object("one", true),
                object("a-much-longer-name", false),
                object("three", true),
            ],
        ];
        for objects in cases {
            for format in [
                DryRunFormat::Table,
                DryRunFormat::Json,
                DryRunFormat::Yaml,
                DryRunFormat::Junit,
            ] {
                for colour in [false, true] {
                    let streamed = spooled(&objects, format, colour);
                    let report = Report::new(
                        objects
                            .iter()
                            .map(|o| object(&o.object[7..], o.allowed))
                            .collect(),
                    );
                    let mut whole = Vec::new();
                    output::write(&mut whole, &report, format, colour).unwrap();
                    assert_eq!(
                        streamed,
                        String::from_utf8(whole).unwrap(),
                        "{format:?}, {} objects",
                        objects.len()
                    );
                }
            }
        }
    }
}
