//! The dry-run report as JUnit XML, which CI systems show as test results:
//! one testcase per object and binding, a denial a failure.

use super::output::{binding_label, mutation_lines, ObjectReport, Report};
use std::io::Write;

/// Writes `report` as JUnit XML.
///
/// # Errors
/// When writing fails.
pub fn write(out: &mut impl Write, report: &Report) -> std::io::Result<()> {
    let mut counts = Counts::default();
    let mut cases = String::new();
    for object in &report.objects {
        cases.push_str(&object_cases(object, &mut counts)?);
    }
    head(out, &counts)?;
    out.write_all(cases.as_bytes())?;
    foot(out)
}

/// The testcases of a report, by outcome.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    tests: usize,
    failures: usize,
    errors: usize,
    skipped: usize,
}

/// The XML declaration and the opening elements, which carry the counts.
///
/// # Errors
/// When writing fails.
pub fn head(out: &mut impl Write, counts: &Counts) -> std::io::Result<()> {
    let Counts {
        tests,
        failures,
        errors,
        skipped,
    } = counts;
    writeln!(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>")?;
    writeln!(
        out,
        "<testsuites name=\"nodescope dry-run\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\">"
    )?;
    writeln!(
        out,
        "  <testsuite name=\"nodescope dry-run\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\">"
    )
}

/// The closing elements.
///
/// # Errors
/// When writing fails.
pub fn foot(out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "  </testsuite>")?;
    writeln!(out, "</testsuites>")
}

/// The testcases of one object, counted into `counts`.
///
/// # Errors
/// Never in practice (the mutation lines are written to memory).
pub fn object_cases(object: &ObjectReport, counts: &mut Counts) -> std::io::Result<String> {
    let mut cases = String::new();
    let class = xml(&object.object);
    let mut case = |name: &str, body: String| {
        counts.tests += 1;
        cases.push_str(&format!(
            "    <testcase classname=\"{class}\" name=\"{}\">{body}</testcase>\n",
            xml(name)
        ));
    };
    match &object.status {
        // Refused by the apiserver's own validation: no policy evaluated.
        Some(status) if object.results.is_empty() && !object.allowed => {
            counts.failures += 1;
            let message = xml(&status.message);
            case(
                "apiserver validation",
                format!("\n      <failure type=\"deny\" message=\"{message}\">{message}</failure>\n    "),
            );
        }
        _ if object.results.is_empty() => case("no policy binding matches", String::new()),
        _ => {}
    }
    for row in &object.results {
        let message = xml(row.message.as_deref().unwrap_or(""));
        let body = match row.result {
            "deny" => {
                counts.failures += 1;
                let full = object.status.as_ref().map_or("", |s| s.message.as_str());
                format!(
                    "\n      <failure type=\"deny\" message=\"{message}\">{}</failure>\n    ",
                    xml(full)
                )
            }
            "error" => {
                counts.errors += 1;
                format!("\n      <error type=\"error\" message=\"{message}\"/>\n    ")
            }
            "skip" => {
                counts.skipped += 1;
                format!("\n      <skipped message=\"{message}\"/>\n    ")
            }
            "warn" | "audit" => {
                format!(
                    "\n      <system-out>{}: {message}</system-out>\n    ",
                    row.result
                )
            }
            _ => String::new(),
        };
        case(&format!("{}/{}", row.policy, binding_label(row)), body);
    }
    if let Some(mutation) = &object.mutation {
        let mut text = Vec::new();
        mutation_lines(&mut text, mutation)?;
        for warning in &mutation.warnings {
            text.extend_from_slice(format!("  warning: {warning}\n").as_bytes());
        }
        case(
            "nodescope mutation",
            format!(
                "\n      <system-out>{}</system-out>\n    ",
                xml(&String::from_utf8_lossy(&text))
            ),
        );
    }
    Ok(cases)
}

/// Escapes text for XML attributes and content (control characters other
/// than tab and newline are not allowed in XML 1.0 and are dropped).
#[must_use]
pub fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            c if c == '\t' || c >= ' ' => out.push(c),
            _ => {}
        }
    }
    out
}
