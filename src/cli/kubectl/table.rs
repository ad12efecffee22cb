//! kubectl's table and age, shared by every command that prints rows.

use k8s_openapi::jiff::Timestamp;

/// Columns padded to their widest cell, three spaces apart, as kubectl does.
pub(crate) fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == N {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}   ", width = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
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
        ];
        assert_eq!(table(&rows), "A      long\nbbbb   x\n");
    }
}
