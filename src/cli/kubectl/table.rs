//! kubectl's table and age, shared by every command that prints rows.

use k8s_openapi::jiff::Timestamp;

/// Columns padded to their widest cell, three spaces apart, as kubectl does.
pub(crate) fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let widths = widths(rows.iter());
    let mut out = String::new();
    for row in rows {
        line(row, &widths, &mut out);
    }
    out
}

/// [`table`], written to `out` as it goes: `rows` makes the rows twice
/// (once for the widths, once to write), so that they are never all held,
/// nor the text built whole (100,000 plans made 30 MB of both).
///
/// # Errors
/// When `out` fails.
pub(crate) fn write_table<const N: usize, I: Iterator<Item = [String; N]>>(
    rows: impl Fn() -> I,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let widths = widths(rows());
    use std::io::Write;
    // Standard output flushes at every newline: one write per block.
    let mut out = std::io::BufWriter::with_capacity(64 << 10, out);
    let mut text = String::new();
    for row in rows() {
        text.clear();
        line(&row, &widths, &mut text);
        out.write_all(text.as_bytes())?;
    }
    out.flush()
}

/// Each column's widest cell, in characters.
fn widths<const N: usize, R: std::borrow::Borrow<[String; N]>>(
    rows: impl Iterator<Item = R>,
) -> [usize; N] {
    let mut widths = [0; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row.borrow()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    widths
}

/// One row, padded, without trailing blanks, and its newline.
fn line<const N: usize>(row: &[String; N], widths: &[usize; N], out: &mut String) {
    use std::fmt::Write;
    let start = out.len();
    for (i, cell) in row.iter().enumerate() {
        if i + 1 == N {
            out.push_str(cell);
        } else {
            // Writing to a String cannot fail.
            let _ = write!(out, "{cell:<width$}   ", width = widths[i]);
        }
    }
    let kept = out[start..].trim_end().len();
    out.truncate(start + kept);
    out.push('\n');
}

/// What kubectl says on stderr when a listing has no row (`kubectl get`'s
/// words exactly): a table with only its header would read as a list of
/// nothing to do.
pub(crate) fn none_found(namespace: Option<&str>) -> String {
    match namespace {
        Some(namespace) => format!("No resources found in {namespace} namespace."),
        None => "No resources found".to_owned(),
    }
}

/// kubectl's short age: `45s`, `12m`, `5h`, `3d`.
pub(crate) fn age(now: Timestamp, then: Timestamp) -> String {
    let seconds = now.duration_since(then).as_secs().max(0);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_as_kubectl_writes_them() {
        let t = |s: i64| Timestamp::from_second(s).unwrap_or(Timestamp::UNIX_EPOCH);
        assert_eq!(age(t(1000), t(955)), "45s");
        assert_eq!(age(t(10_000), t(10_000 - 720)), "12m");
        assert_eq!(age(t(100_000), t(100_000 - 5 * 3600)), "5h");
        assert_eq!(age(t(1_000_000), t(1_000_000 - 3 * 86_400)), "3d");
        assert_eq!(age(t(0), t(10)), "0s");
    }

    #[test]
    fn no_row_is_said_in_kubectls_words() {
        assert_eq!(none_found(None), "No resources found");
        assert_eq!(
            none_found(Some("ops")),
            "No resources found in ops namespace."
        );
    }

    #[test]
    fn tables_pad_every_column_but_the_last() {
        let rows = [
            ["A".to_owned(), "long".to_owned()],
            ["bbbb".to_owned(), "x".to_owned()],
            ["cé".to_owned(), String::new()],
        ];
        assert_eq!(table(&rows), "A      long\nbbbb   x\ncé\n");
        let mut written = Vec::new();
        write_table(|| rows.iter().cloned(), &mut written).expect("written");
        assert_eq!(String::from_utf8(written).expect("text"), table(&rows));
    }
}
