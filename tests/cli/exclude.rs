//! `dry-run --exclude GLOB`: what is found under a directory and matches is
//! not read, so one unreadable corner does not stop a run over a tree.

use super::*;

/// A tree with one good manifest and one file that is no manifest.
fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = std::fs::read_to_string(root().join("examples/manifests/balloon.yaml"))
        .expect("the example");
    std::fs::write(dir.path().join("balloon.yaml"), good).expect("written");
    std::fs::create_dir_all(dir.path().join("recordings/week-1")).expect("mkdir");
    std::fs::write(
        dir.path().join("recordings/week-1/usage.json"),
        r#"{"timestamp": "2026-11-25T00:00:00Z"}"#,
    )
    .expect("written");
    dir
}

fn dry_run(dir: &Path, extra: &[&str]) -> Output {
    let path = dir.to_str().expect("utf-8");
    let mut args = vec!["dry-run", "-f", path];
    args.extend_from_slice(extra);
    nodescope(&args)
}

#[test]
fn without_exclude_the_file_that_is_no_manifest_stops_the_run() {
    let dir = tree();
    let output = dry_run(dir.path(), &[]);
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("usage.json"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_directory_a_path_or_a_name_that_matches_is_left_out() {
    let dir = tree();
    let under = format!("{}/recordings", dir.path().display());
    for pattern in ["recordings", "*.json", "**/week-*/*", under.as_str()] {
        let output = dry_run(dir.path(), &["--exclude", pattern]);
        assert_exit(&output, 0);
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(text.contains("balloon"), "{pattern}: {text}");
    }
    // Repeatable: each pattern leaves out its own part.
    let output = dry_run(
        dir.path(),
        &["--exclude", "nothing-here", "--exclude", "usage.json"],
    );
    assert_exit(&output, 0);
}

#[test]
fn excluding_everything_under_a_path_is_an_empty_input() {
    let dir = tree();
    let output = dry_run(dir.path(), &["--exclude", "*.yaml", "--exclude", "*.json"]);
    assert_exit(&output, 2);
    assert!(
        stderr(&output).ends_with("holds no .yaml, .yml or .json file and no kustomization\n"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_pattern_that_is_no_glob_is_exit_2_naming_it() {
    let dir = tree();
    fails_with(
        &dry_run(dir.path(), &["--exclude", "a[b"]),
        "--exclude a[b: unclosed character class; missing ']'",
    );
}
