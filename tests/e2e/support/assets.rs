//! Where the etcd and kube-apiserver binaries are, and what to do when they
//! are not there: `KUBEBUILDER_ASSETS` set, even to nothing, asks for the
//! suite, so a value that does not hold both binaries fails the run (a
//! `$(setup-envtest use …)` that failed leaves it empty); only when nothing
//! was asked for does the suite say "not run" and pass.
//!
//! Also compiled into `tests/e2e_assets.rs`, which tests these rules.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The binaries the suite runs.
pub struct Assets {
    pub dir: PathBuf,
    pub etcd: PathBuf,
    pub kube_apiserver: PathBuf,
    /// `kubectl` from the assets, else the one on PATH.
    pub kubectl: Option<PathBuf>,
}

/// What the environment asks for.
pub enum Found {
    /// Run the suite on these.
    Assets(Assets),
    /// Nothing was asked for and nothing was found: the suite is not run,
    /// for the reason given.
    NotAsked(String),
}

impl Assets {
    /// From this process's environment.
    ///
    /// # Errors
    /// `KUBEBUILDER_ASSETS` is set but does not hold both binaries.
    pub fn find() -> Result<Found, String> {
        Self::find_in(
            std::env::var_os("KUBEBUILDER_ASSETS"),
            std::env::var_os("HOME"),
        )
    }

    /// From `KUBEBUILDER_ASSETS` when it is set (to anything), else the
    /// newest version in setup-envtest's default store under `home`.
    ///
    /// # Errors
    /// `KUBEBUILDER_ASSETS` is set but does not hold both binaries.
    pub fn find_in(variable: Option<OsString>, home: Option<OsString>) -> Result<Found, String> {
        if let Some(dir) = variable {
            if dir.is_empty() {
                return Err(
                    "KUBEBUILDER_ASSETS is set but empty: the command that was to \
                            fill it (`setup-envtest use 1.36 -p path`) printed nothing; \
                            is setup-envtest installed? Unset the variable to skip the suite"
                        .to_owned(),
                );
            }
            let dir = PathBuf::from(dir);
            return Self::in_dir(&dir).map(Found::Assets).map_err(|missing| {
                format!(
                    "KUBEBUILDER_ASSETS={} does not hold etcd and kube-apiserver: {missing}",
                    dir.display()
                )
            });
        }
        let Some(home) = home else {
            return Ok(Found::NotAsked(
                "KUBEBUILDER_ASSETS is unset and HOME is unset".to_owned(),
            ));
        };
        let store = PathBuf::from(home).join(".local/share/kubebuilder-envtest/k8s");
        let Some(dir) = newest(&store) else {
            return Ok(Found::NotAsked(format!(
                "KUBEBUILDER_ASSETS is unset and {} holds no version",
                store.display()
            )));
        };
        Ok(match Self::in_dir(&dir) {
            Ok(assets) => Found::Assets(assets),
            Err(missing) => Found::NotAsked(format!(
                "KUBEBUILDER_ASSETS is unset and the newest version in the store is incomplete: {missing}"
            )),
        })
    }

    fn in_dir(dir: &Path) -> Result<Assets, String> {
        let etcd = dir.join("etcd");
        let kube_apiserver = dir.join("kube-apiserver");
        let missing: Vec<String> = [&etcd, &kube_apiserver]
            .into_iter()
            .filter(|binary| !binary.is_file())
            .map(|binary| format!("{} is missing", binary.display()))
            .collect();
        if !missing.is_empty() {
            return Err(missing.join(", "));
        }
        let kubectl = Some(dir.join("kubectl"))
            .filter(|k| k.is_file())
            .or_else(|| which("kubectl"));
        Ok(Assets {
            dir: dir.to_owned(),
            etcd,
            kube_apiserver,
            kubectl,
        })
    }
}

/// The newest `X.Y.Z-linux-amd64` directory of setup-envtest's store.
fn newest(store: &Path) -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir(store)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with("-linux-amd64"))
        .collect();
    // Newest version last: compare the numeric parts, not the text.
    versions.sort_by_key(|p| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
            .trim_end_matches("-linux-amd64")
            .split('.')
            .map(|part| part.parse::<u32>().unwrap_or(0))
            .collect::<Vec<_>>()
    });
    versions.pop()
}

pub fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}
