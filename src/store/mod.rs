//! Where decisions get cluster state: VPAs, LimitRanges, Namespaces, Node
//! labels and policy params, as immutable snapshots swapped atomically.
//!
//! Writers (the file loader, the kube watchers) build a whole new
//! [`Snapshot`] and publish it; readers load an `Arc` and never lock. Nothing
//! here runs on the request path except [`Snapshot`] lookups.

mod convert;
mod entry;
pub mod file;
pub mod kube;
pub mod nodes;
pub mod presence;
mod snapshot;
pub mod synthetic;

pub use convert::{ConvertError, Interner};
pub use entry::Entry;
pub use snapshot::Snapshot;

use std::path::PathBuf;
use std::str::FromStr;

/// `--store`: where cluster state comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreSource {
    /// Watch the API server (inside a cluster).
    Kube,
    /// Read objects from a file or directory, reloading on change.
    File(PathBuf),
}

/// The error names neither the flag nor the value: clap, which reports it,
/// already says `invalid value 'x' for '--store <STORE>'`.
impl FromStr for StoreSource {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "kube" => Ok(Self::Kube),
            _ => match s.strip_prefix("file:") {
                Some(path) if !path.is_empty() => Ok(Self::File(PathBuf::from(path))),
                _ => Err("expected `kube` or `file:PATH`".to_owned()),
            },
        }
    }
}
