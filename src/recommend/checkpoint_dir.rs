//! A checkpoint directory (`recommend --checkpoints file:DIR` or
//! `upstream:DIR`): which of its files nodescope wrote, reading them back,
//! and replacing them. A file nodescope did not write is read when it holds
//! checkpoints (upstream's, to import) and otherwise named; it is never
//! overwritten or deleted, whatever its name.

use crate::manifest::{self, Document};
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The label every checkpoint nodescope writes carries, in the cluster and
/// in files: what makes a file its own to replace.
pub const OWNER_LABEL: &str = "app.kubernetes.io/managed-by";
/// Its value.
pub const OWNER: &str = "nodescope-recommender";

/// Why a checkpoint directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error(
        "--checkpoints {dir}: it overlaps --{flag} {other}; checkpoints are written to \
         (and stale ones removed from) a directory of their own"
    )]
    Overlaps {
        dir: String,
        flag: &'static str,
        other: String,
    },
    #[error(
        "refusing to overwrite {path}: nodescope did not write it (no {OWNER_LABEL}: {OWNER} \
         label); move it away or choose another --checkpoints directory"
    )]
    NotOurs { path: String },
    #[error("--checkpoints {dir}: is a file, not a directory")]
    NotADirectory { dir: String },
    #[error("{path}: {}", crate::input::sources::reason(source))]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// What a checkpoint directory holds, read once.
#[derive(Debug, Default)]
pub struct CheckpointDir {
    /// The checkpoint objects of every file, nodescope's and others', in
    /// file order.
    pub objects: Vec<Value>,
    /// Files nodescope wrote: the only ones it replaces or removes.
    pub ours: Vec<PathBuf>,
    /// Files that hold something other than checkpoints: left alone.
    pub foreign: Vec<PathBuf>,
}

impl CheckpointDir {
    /// Reads `dir` (absent: empty). Files that cannot be parsed, or hold
    /// anything but checkpoints, are `foreign`, never an error: the
    /// directory may be shared with files nodescope knows nothing of.
    ///
    /// # Errors
    /// The directory itself cannot be listed.
    pub fn read(dir: &Path) -> Result<Self, DirError> {
        let mut read = CheckpointDir::default();
        match std::fs::metadata(dir) {
            Err(_) => return Ok(read),
            Ok(meta) if !meta.is_dir() => {
                return Err(DirError::NotADirectory {
                    dir: dir.display().to_string(),
                })
            }
            Ok(_) => {}
        }
        let files = manifest::collect_files(dir, &[]).map_err(|e| DirError::Io {
            path: dir.display().to_string(),
            source: std::io::Error::other(e.to_string()),
        })?;
        for file in files {
            let docs = std::fs::read_to_string(&file).ok().and_then(|text| {
                manifest::parse_documents(&file.display().to_string(), &text).ok()
            });
            match docs {
                Some(docs) if !docs.is_empty() && docs.iter().all(is_checkpoint) => {
                    if is_ours(&file, &docs) {
                        read.ours.push(file);
                    }
                    read.objects.extend(docs.into_iter().map(|d| d.value));
                }
                _ => read.foreign.push(file),
            }
        }
        Ok(read)
    }

    /// The one warning for files left alone, if any.
    #[must_use]
    pub fn foreign_warning(&self, dir: &Path) -> Option<String> {
        if self.foreign.is_empty() {
            return None;
        }
        let names: Vec<String> = self
            .foreign
            .iter()
            .map(|p| p.strip_prefix(dir).unwrap_or(p).display().to_string())
            .collect();
        Some(format!(
            "{}: {} file(s) that are not nodescope's checkpoints left alone: {}",
            dir.display(),
            names.len(),
            names.join(", ")
        ))
    }
}

fn is_checkpoint(doc: &Document) -> bool {
    matches!(
        doc.value.get("kind").and_then(Value::as_str),
        Some(super::checkpoints::KIND | super::upstream::KIND)
    )
}

/// A file is nodescope's when it holds one checkpoint with the owner label
/// under the name nodescope gives it.
fn is_ours(file: &Path, docs: &[Document]) -> bool {
    let [doc] = docs else { return false };
    let labelled = doc
        .value
        .pointer("/metadata/labels")
        .and_then(|l| l.get(OWNER_LABEL))
        .and_then(Value::as_str)
        == Some(OWNER);
    labelled && file.file_name().and_then(|n| n.to_str()) == Some(file_name(&doc.value).as_str())
}

/// `<namespace>.<name>.json`.
fn file_name(object: &Value) -> String {
    let field = |f: &str| {
        object
            .pointer(&format!("/metadata/{f}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    format!("{}.{}.json", field("namespace"), field("name"))
}

/// Refuses a checkpoint directory that is, holds or lies in `other` (the
/// store or the metrics), whose files a write would replace.
///
/// # Errors
/// They overlap.
pub fn check_apart(dir: &Path, flag: &'static str, other: &Path) -> Result<(), DirError> {
    let full = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| absolute(p));
    let (a, b) = (full(dir), full(other));
    if a.starts_with(&b) || b.starts_with(&a) {
        return Err(DirError::Overlaps {
            dir: dir.display().to_string(),
            flag,
            other: other.display().to_string(),
        });
    }
    Ok(())
}

fn absolute(p: &Path) -> PathBuf {
    std::env::current_dir().map_or_else(|_| p.to_owned(), |cwd| cwd.join(p))
}

/// Writes `objects` into `dir`, one `<namespace>.<name>.json` each, labelled
/// as nodescope's, each to a temporary name renamed over the old one so a
/// crash leaves the old file or the new; then removes nodescope's own files
/// that this set no longer has. Nothing is written when a name is taken by
/// a file nodescope did not write.
///
/// # Errors
/// A name taken by another's file, or the directory cannot be written.
pub fn replace(dir: &Path, before: &CheckpointDir, objects: &[Value]) -> Result<usize, DirError> {
    let io = |path: &Path, source| DirError::Io {
        path: path.display().to_string(),
        source,
    };
    let ours: HashSet<&Path> = before.ours.iter().map(PathBuf::as_path).collect();
    let named: Vec<(PathBuf, Value)> = objects
        .iter()
        .map(|o| (dir.join(file_name(o)), labelled(o)))
        .collect();
    if let Some((path, _)) = named
        .iter()
        .find(|(path, _)| std::fs::symlink_metadata(path).is_ok() && !ours.contains(path.as_path()))
    {
        return Err(DirError::NotOurs {
            path: path.display().to_string(),
        });
    }
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let mut written = HashSet::new();
    for (path, object) in &named {
        let text = serde_json::to_string(object).unwrap_or_default();
        crate::files::replace(path, text.as_bytes(), crate::files::Mode::Public)
            .map_err(|e| io(path, e))?;
        written.insert(path.clone());
    }
    for stale in before.ours.iter().filter(|p| !written.contains(*p)) {
        std::fs::remove_file(stale).map_err(|e| io(stale, e))?;
    }
    Ok(objects.len())
}

fn labelled(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let labels = meta
            .entry("labels")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert(OWNER_LABEL.into(), OWNER.into());
        }
    }
    object
}

#[cfg(test)]
#[path = "checkpoint_dir_tests.rs"]
mod tests;
