//! The kinds a Kubernetes kube-apiserver serves, as its own discovery said.
//!
//! A table written from `k8s-openapi` lagged the apiserver: it spoke the
//! Kubernetes the crate was generated for, so a `resource.k8s.io/v1`
//! DeviceClass, which v1.34 made GA, was "unknown" to a dry run. The table
//! is now `kinds-v1.36.2.txt`, captured from a real v1.36.2 apiserver by
//! `scripts/capture-kinds.sh` (its header says when and how), and read here
//! as it is: nothing is restated by hand, so it cannot drift from what was
//! captured. Kinds and versions that only `--runtime-config` turns on are
//! kept apart, so that a manifest using one is told so rather than "unknown".

use std::sync::LazyLock;

/// The Kubernetes release the table was captured from.
pub const VERSION: &str = "v1.36.2";

/// The captured discovery, as `scripts/capture-kinds.sh` printed it.
pub const CAPTURED: &str = include_str!("kinds-v1.36.2.txt");

/// One row of the captured discovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    /// `v1`, `apps/v1`.
    pub api_version: &'static str,
    pub kind: &'static str,
    /// The REST resource, e.g. `deviceclasses`.
    pub resource: &'static str,
    pub namespaced: bool,
    /// Served by an apiserver with its defaults; `false`: only when
    /// `--runtime-config` turns the version on.
    pub by_default: bool,
}

/// Parses the captured discovery: `#` comment lines, a header row, then
/// `APIVERSION KIND RESOURCE NAMESPACED SERVED` rows.
///
/// # Errors
/// A row that is not five columns of those values, with its line number.
pub fn parse(text: &'static str) -> Result<Vec<Served>, String> {
    let mut rows = Vec::new();
    let mut header = false;
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let columns: Vec<&'static str> = line.split_whitespace().collect();
        let at = || format!("kinds-{VERSION}.txt line {}", number + 1);
        if !header {
            if columns != ["APIVERSION", "KIND", "RESOURCE", "NAMESPACED", "SERVED"] {
                return Err(format!("{}: not the header row", at()));
            }
            header = true;
            continue;
        }
        let [api_version, kind, resource, namespaced, served] = columns[..] else {
            return Err(format!("{}: {} columns, not 5", at(), columns.len()));
        };
        let namespaced = match namespaced {
            "true" => true,
            "false" => false,
            other => return Err(format!("{}: NAMESPACED {other:?}", at())),
        };
        let by_default = match served {
            "default" => true,
            "opt-in" => false,
            other => return Err(format!("{}: SERVED {other:?}", at())),
        };
        rows.push(Served {
            api_version,
            kind,
            resource,
            namespaced,
            by_default,
        });
    }
    if rows.is_empty() {
        return Err(format!("kinds-{VERSION}.txt holds no kind"));
    }
    Ok(rows)
}

/// The captured rows. A file that does not parse (the tests make sure it
/// does) would leave every kind unknown: refused, never guessed.
pub static SERVED: LazyLock<Vec<Served>> = LazyLock::new(|| parse(CAPTURED).unwrap_or_default());

#[cfg(test)]
mod tests;
