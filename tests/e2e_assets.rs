//! The e2e suite's asset rules: `KUBEBUILDER_ASSETS` unset and nothing in
//! setup-envtest's store is "not run" and a pass; set, even empty, without
//! etcd and kube-apiserver, is a failure that says why. The e2e binary
//! also runs itself with each of these environments before anything else
//! (tests/e2e/asset_rules.rs), so its exit codes are checked where it is
//! never stale.

#[path = "e2e/support/assets.rs"]
#[allow(dead_code)]
mod assets;

use assets::{Assets, Found};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

fn outcome(variable: Option<&str>, home: &Path) -> Result<String, String> {
    Assets::find_in(variable.map(OsString::from), Some(home.into())).map(|found| match found {
        Found::Assets(assets) => format!("run from {}", assets.dir.display()),
        Found::NotAsked(why) => format!("not run: {why}"),
    })
}

/// A store with one complete version, as setup-envtest leaves it.
fn store_with_binaries(home: &Path) -> PathBuf {
    let dir = home.join(".local/share/kubebuilder-envtest/k8s/1.36.2-linux-amd64");
    std::fs::create_dir_all(&dir).unwrap();
    for binary in ["etcd", "kube-apiserver"] {
        std::fs::write(dir.join(binary), b"").unwrap();
    }
    dir
}

#[test]
fn unset_with_an_empty_store_is_not_run() {
    let home = tempfile::tempdir().unwrap();
    let result = outcome(None, home.path());
    assert!(
        result
            .as_deref()
            .is_ok_and(|r| r.starts_with("not run: KUBEBUILDER_ASSETS is unset")),
        "{result:?}"
    );
}

#[test]
fn unset_with_a_version_in_the_store_runs_on_it() {
    let home = tempfile::tempdir().unwrap();
    let dir = store_with_binaries(home.path());
    assert_eq!(
        outcome(None, home.path()),
        Ok(format!("run from {}", dir.display()))
    );
}

#[test]
fn set_but_empty_fails_and_says_it_is_set_but_empty() {
    let home = tempfile::tempdir().unwrap();
    // Even with a store to fall back on: the empty value asked for a run.
    store_with_binaries(home.path());
    let error = outcome(Some(""), home.path()).expect_err("an empty value must fail");
    assert!(
        error.starts_with("KUBEBUILDER_ASSETS is set but empty"),
        "{error}"
    );
    assert!(!error.contains("unset"), "{error}");
}

#[test]
fn set_to_a_directory_without_the_binaries_fails_naming_them() {
    let home = tempfile::tempdir().unwrap();
    let error = outcome(Some("/nonexistent"), home.path()).expect_err("must fail");
    assert_eq!(
        error,
        "KUBEBUILDER_ASSETS=/nonexistent does not hold etcd and kube-apiserver: \
         /nonexistent/etcd is missing, /nonexistent/kube-apiserver is missing"
    );
}
