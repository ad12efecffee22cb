//! A checkpoint directory (`recommend --checkpoints file:DIR` or
//! `upstream:DIR`): which of its files this recommender wrote, reading them
//! back, and replacing them. A file nodescope did not write is read when it
//! holds checkpoints (upstream's, to import) and otherwise named; it is never
//! overwritten or deleted, whatever its name. A file another recommender
//! (`--recommender-name`) wrote is neither read nor touched.

use crate::manifest::{self, Document};
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The label every checkpoint nodescope writes carries, in the cluster and
/// in files: what makes a file its own to replace.
pub const OWNER_LABEL: &str = "app.kubernetes.io/managed-by";
/// Its value.
pub const OWNER: &str = "nodescope-recommender";
/// The label naming the recommender (`--recommender-name`) that wrote a
/// checkpoint: only that recommender reads, replaces or deletes it.
pub const RECOMMENDER_LABEL: &str = "nodescope.dev/recommender";
/// The recommender of a VPA that names none, and of the checkpoints an
/// older nodescope wrote without [`RECOMMENDER_LABEL`].
pub const DEFAULT_RECOMMENDER: &str = "default";

fn label<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object
        .pointer("/metadata/labels")
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
}

/// Whether nodescope wrote `object` (it carries the owner label).
#[must_use]
pub fn written_by_nodescope(object: &Value) -> bool {
    label(object, OWNER_LABEL) == Some(OWNER)
}

/// Whether `object`, a checkpoint, is recommender `name`'s: nodescope wrote
/// it for that recommender; one an older nodescope wrote without a
/// recommender's name is the default recommender's, which adopts it (and
/// labels it at its next write).
#[must_use]
pub fn belongs_to(object: &Value, name: &str) -> bool {
    written_by_nodescope(object)
        && label(object, RECOMMENDER_LABEL).unwrap_or(DEFAULT_RECOMMENDER) == name
}

/// Whether `object` carries recommender `name`'s name: what this recommender
/// may delete. One without a name (an older nodescope's) is read and
/// replaced by the default recommender but never deleted: which
/// recommender wrote it is not known.
#[must_use]
pub fn named_for(object: &Value, name: &str) -> bool {
    written_by_nodescope(object) && label(object, RECOMMENDER_LABEL) == Some(name)
}

/// Whether nodescope wrote `object` for another recommender than `name`.
#[must_use]
pub fn belongs_to_another(object: &Value, name: &str) -> bool {
    written_by_nodescope(object) && !belongs_to(object, name)
}

/// `object` with the labels that make it recommender `name`'s.
#[must_use]
pub fn owned(object: &Value, name: &str) -> Value {
    let mut object = object.clone();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let labels = meta
            .entry("labels")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert(OWNER_LABEL.into(), OWNER.into());
            labels.insert(RECOMMENDER_LABEL.into(), name.into());
        }
    }
    object
}

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
        "refusing to overwrite {path}: recommender {recommender:?} did not write it (it has no \
         {OWNER_LABEL}: {OWNER} label, or another {RECOMMENDER_LABEL}); move it away or choose \
         another --checkpoints directory"
    )]
    NotOurs { path: String, recommender: String },
    #[error("--checkpoints {dir}: is a file, not a directory")]
    NotADirectory { dir: String },
    #[error("{path}: {}", crate::input::sources::reason(source))]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// What a checkpoint directory holds for one recommender, read once.
#[derive(Debug, Default)]
pub struct CheckpointDir {
    /// The checkpoint objects this recommender reads, in file order: its
    /// own and those nodescope did not write (upstream's, to import), not
    /// another recommender's.
    pub objects: Vec<Value>,
    /// Files this recommender wrote: the only ones it replaces or removes.
    pub ours: Vec<PathBuf>,
    /// The default recommender's: files an older nodescope wrote without a
    /// recommender's name, replaced when written again, never removed.
    pub adopted: Vec<PathBuf>,
    /// Files that hold something other than checkpoints: left alone.
    pub foreign: Vec<PathBuf>,
}

impl CheckpointDir {
    /// Reads `dir` (absent: empty) for recommender `recommender`. Files
    /// that cannot be parsed, or hold anything but checkpoints, are
    /// `foreign`, never an error: the directory may be shared with files
    /// nodescope knows nothing of.
    ///
    /// # Errors
    /// The directory itself cannot be listed.
    pub fn read(dir: &Path, recommender: &str) -> Result<Self, DirError> {
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
                    match ownership(&file, &docs, recommender) {
                        Some(true) => read.ours.push(file),
                        Some(false) => read.adopted.push(file),
                        None => {}
                    }
                    read.objects.extend(
                        docs.into_iter()
                            .map(|d| d.value)
                            .filter(|o| !belongs_to_another(o, recommender)),
                    );
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

/// A file is this recommender's when it holds one checkpoint that is
/// ([`belongs_to`]), under the name nodescope gives it: `Some(true)` when
/// it carries the recommender's name, `Some(false)` when it is an older
/// nodescope's the default recommender adopts.
fn ownership(file: &Path, docs: &[Document], recommender: &str) -> Option<bool> {
    let [doc] = docs else { return None };
    let named = file.file_name().and_then(|n| n.to_str()) == Some(file_name(&doc.value).as_str());
    (named && belongs_to(&doc.value, recommender)).then(|| named_for(&doc.value, recommender))
}

/// `<namespace>.<name>.json` (the object's namespace and name); for a
/// recommender other than the default, `<namespace>.<name>_<recommender>.json`.
/// Neither a namespace nor an object name holds `_`, so two recommenders'
/// files never take one name, even for the same VPA.
fn file_name(object: &Value) -> String {
    let field = |f: &str| {
        object
            .pointer(&format!("/metadata/{f}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (namespace, name) = (field("namespace"), field("name"));
    match label(object, RECOMMENDER_LABEL) {
        Some(r) if r != DEFAULT_RECOMMENDER => format!("{namespace}.{name}_{r}.json"),
        _ => format!("{namespace}.{name}.json"),
    }
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

/// Writes `objects` into `dir`, one file each ([`file_name`]), labelled as
/// recommender `recommender`'s, each to a temporary name renamed over the
/// old one so a crash leaves the old file or the new; then removes this
/// recommender's own files that this set no longer has (a VPA gone or no
/// longer its, fewer shards). Nothing is written when a name is taken by a
/// file this recommender did not write.
///
/// # Errors
/// A name taken by another's file, or the directory cannot be written.
pub fn replace(
    dir: &Path,
    before: &CheckpointDir,
    objects: &[Value],
    recommender: &str,
) -> Result<usize, DirError> {
    let io = |path: &Path, source| DirError::Io {
        path: path.display().to_string(),
        source,
    };
    let ours: HashSet<&Path> = before
        .ours
        .iter()
        .chain(&before.adopted)
        .map(PathBuf::as_path)
        .collect();
    let named: Vec<(PathBuf, Value)> = objects
        .iter()
        .map(|o| owned(o, recommender))
        .map(|o| (dir.join(file_name(&o)), o))
        .collect();
    if let Some((path, _)) = named
        .iter()
        .find(|(path, _)| std::fs::symlink_metadata(path).is_ok() && !ours.contains(path.as_path()))
    {
        return Err(DirError::NotOurs {
            path: path.display().to_string(),
            recommender: recommender.to_owned(),
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

#[cfg(test)]
#[path = "checkpoint_dir_tests.rs"]
mod tests;
