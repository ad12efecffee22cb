//! `serve --demo`: everything the demo needs is compiled into the binary
//! (the example store and two sample reviews, next to the bundled policies),
//! so it runs from any directory, not only from a checkout.
//!
//! The files are written into the demo's temporary directory rather than
//! served from memory: the file store then watches them like any other, and
//! the printed `curl` lines point at files that exist wherever you are.

use crate::tls::{self, CertRequest, KeyType, TlsError};
use std::net::SocketAddr;
use std::path::PathBuf;

/// `(file name, contents)` of every file of `examples/store/`.
pub const STORE_FILES: &[(&str, &str)] = &[
    (
        "features.yaml",
        include_str!("../../../examples/store/features.yaml"),
    ),
    (
        "monitoring-namespace.yaml",
        include_str!("../../../examples/store/monitoring-namespace.yaml"),
    ),
    (
        "node-exporter-vpa.yaml",
        include_str!("../../../examples/store/node-exporter-vpa.yaml"),
    ),
];

/// The review the banner's `/mutate` line posts: a DaemonSet pod that gets
/// its node's recommendation from the example store.
const MUTATE_REVIEW: (&str, &str) = (
    "pod-node-exporter-node-a-1-create.json",
    include_str!("../../../examples/reviews/pod-node-exporter-node-a-1-create.json"),
);

/// The review the banner's `/validate` line posts: a pod that borrows the
/// balloon priority, which the bundled policies deny.
const VALIDATE_REVIEW: (&str, &str) = (
    "pod-borrows-node-balloon.json",
    include_str!("../../../examples/reviews/pod-borrows-node-balloon.json"),
);

/// Why the demo could not set itself up.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("cannot create a temporary directory for --demo: {0}")]
    TempDir(std::io::Error),
    #[error("cannot write {}: {cause}", path.display())]
    Write {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// The demo's temporary directory; removed when this is dropped.
pub struct Demo {
    dir: tempfile::TempDir,
}

impl Demo {
    /// Writes throwaway certificates for localhost and 127.0.0.1, the
    /// example store and the sample reviews into a new temporary directory.
    pub fn create() -> Result<Self, DemoError> {
        let dir = tempfile::tempdir().map_err(DemoError::TempDir)?;
        let certs = tls::generate(&CertRequest {
            hosts: vec!["localhost".into(), "127.0.0.1".into()],
            key_type: KeyType::Ecdsa,
            validity_days: 1,
        })?;
        certs.write_to(dir.path(), false)?;
        let store = dir.path().join("store");
        std::fs::create_dir(&store).map_err(|cause| DemoError::Write {
            path: store.clone(),
            cause,
        })?;
        let files = STORE_FILES
            .iter()
            .map(|(name, text)| (store.join(name), *text))
            .chain(
                [MUTATE_REVIEW, VALIDATE_REVIEW].map(|(name, text)| (dir.path().join(name), text)),
            );
        for (path, text) in files {
            crate::files::write_new(&path, text.as_bytes(), crate::files::Mode::Public)
                .map_err(|cause| DemoError::Write { path, cause })?;
        }
        Ok(Self { dir })
    }

    /// The serving certificate chain.
    #[must_use]
    pub fn cert(&self) -> PathBuf {
        self.dir.path().join("tls.crt")
    }

    /// The serving key.
    #[must_use]
    pub fn key(&self) -> PathBuf {
        self.dir.path().join("tls.key")
    }

    /// The copy of `examples/store/`, for `--store file:`.
    #[must_use]
    pub fn store(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    /// What the demo prints once it listens: where, and a `curl` line for
    /// each webhook that works from any directory.
    #[must_use]
    pub fn banner(&self, addr: SocketAddr) -> String {
        let dir = self.dir.path();
        let curl = |review: &str, route: &str| {
            format!(
                "  curl --cacert {ca} -H 'Content-Type: application/json' --data-binary @{review} https://{addr}/{route}\n",
                ca = dir.join("ca.crt").display(),
                review = dir.join(review).display(),
            )
        };
        format!(
            "nodescope demo listening on https://{addr}\ntry:\n{}{}",
            curl(MUTATE_REVIEW.0, "mutate"),
            curl(VALIDATE_REVIEW.0, "validate"),
        )
    }

    /// The directory itself, for tests.
    #[cfg(test)]
    #[must_use]
    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_store_is_exactly_the_files_of_examples_store() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/store");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .expect("examples/store exists")
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let embedded: Vec<&str> = STORE_FILES.iter().map(|(n, _)| *n).collect();
        assert_eq!(embedded, on_disk, "update src/cli/serve/demo.rs");
        for (name, text) in STORE_FILES {
            let path = format!("{dir}/{name}");
            assert_eq!(
                std::fs::read_to_string(&path).expect("readable"),
                *text,
                "{path}"
            );
        }
    }

    #[test]
    fn the_demo_directory_holds_certificates_store_and_reviews() {
        let demo = Demo::create().expect("demo files");
        for file in [
            "ca.crt",
            "tls.crt",
            "tls.key",
            MUTATE_REVIEW.0,
            VALIDATE_REVIEW.0,
        ] {
            assert!(demo.path().join(file).is_file(), "{file}");
        }
        let store = crate::store::file::load(&demo.store()).expect("store loads");
        assert_eq!(store.vpa_count(), 1);
        tls::load_pair(&demo.cert(), &demo.key()).expect("pair loads");
    }
}
