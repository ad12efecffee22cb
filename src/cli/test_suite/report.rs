//! What `nodescope test` prints: a PASS or FAIL line per case and the
//! counts, or JUnit XML.

use crate::cli::dry_run::junit::xml;
use std::io::Write;

/// The outcome of one case.
pub(super) struct CaseResult {
    pub suite: String,
    pub case: String,
    pub failure: Option<String>,
}

pub(super) fn text(out: &mut impl Write, results: &[CaseResult]) -> std::io::Result<()> {
    for result in results {
        match &result.failure {
            None => writeln!(out, "PASS  {}/{}", result.suite, result.case)?,
            Some(why) => writeln!(out, "FAIL  {}/{}: {why}", result.suite, result.case)?,
        }
    }
    let failed = results.iter().filter(|r| r.failure.is_some()).count();
    writeln!(out, "{} passed, {failed} failed", results.len() - failed)
}

pub(super) fn junit(out: &mut impl Write, results: &[CaseResult]) -> std::io::Result<()> {
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
