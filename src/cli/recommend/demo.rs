//! `recommend --demo`: the recorded example (`examples/recommend/`) is
//! compiled into the binary, so that the demo replays from any directory,
//! not only from a checkout. It is written into a temporary directory and
//! read back through `--store file:` and `--metrics file:`, the same path
//! as any recording.

/// `recommend --demo`'s data, `examples/recommend/`: `(path, contents)`.
pub const RECOMMEND_FILES: &[(&str, &str)] = &[
    (
        "store/zone-agent.yaml",
        include_str!("../../../examples/recommend/store/zone-agent.yaml"),
    ),
    (
        "metrics/2026-11-25T08.json",
        include_str!("../../../examples/recommend/metrics/2026-11-25T08.json"),
    ),
    (
        "metrics/2026-11-25T09.json",
        include_str!("../../../examples/recommend/metrics/2026-11-25T09.json"),
    ),
];

/// Writes [`RECOMMEND_FILES`] into a new temporary directory (with `store/`
/// and `metrics/`), removed when the result is dropped.
///
/// # Errors
/// The directory cannot be created or written, as one sentence.
pub fn recommend_data() -> Result<tempfile::TempDir, String> {
    let dir = tempfile::tempdir()
        .map_err(|e| format!("cannot create a temporary directory for --demo: {e}"))?;
    for (name, text) in RECOMMEND_FILES {
        let path = dir.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot write {}: {e}", parent.display()))?;
        }
        crate::files::write_new(&path, text.as_bytes(), crate::files::Mode::Public)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(dir)
}
