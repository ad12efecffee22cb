//! `--store file:PATH`: cluster state from a YAML/JSON file or directory,
//! for running without a cluster (the demo, the CLI, tests).
//!
//! A file that fails to parse is reported with its path and line and the
//! last good snapshot stays in service. So does a reload that finds no
//! object at all ([`Reload::Empty`]): a file emptied while the webhook runs
//! (a truncated write, a ConfigMap gone) says nothing about the cluster, and
//! serving it would answer every review as if no VPA, Feature or Namespace
//! existed.

use super::{Entry, Interner, Snapshot};
use crate::manifest::{self, ManifestError};
use crate::metrics::StoreMetrics;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Reads every object under `path` into a snapshot. JSON files are read
/// object by object into the store's own types (a large store never exists
/// as a `Value` tree); YAML goes through `Value`, as YAML stores are small.
pub fn load(path: &Path) -> Result<Snapshot, ManifestError> {
    load_counted(path).map(|(snapshot, _)| snapshot)
}

/// As [`load`], with the number of objects read (documents that are
/// objects, good or not): 0 for an empty file or directory.
///
/// # Errors
/// As [`load`].
pub fn load_counted(path: &Path) -> Result<(Snapshot, usize), ManifestError> {
    let mut objects = 0;
    let mut interner = Interner::default();
    let mut entries = Vec::new();
    for file in manifest::collect_files(path, &[])? {
        let name = file.display().to_string();
        let io = |source| ManifestError::Io {
            path: name.clone(),
            source,
        };
        // A JSON List or array streams; anything else (YAML, one object, a
        // syntax error) is declined after its first bytes and read whole.
        // The scan reads in blocks of its own; no buffering is needed.
        let reader = std::fs::File::open(&file).map_err(io)?;
        let mut streamed = Vec::new();
        let complete = manifest::stream_json_items(reader, |item| {
            objects += usize::from(item.trim_start().starts_with('{'));
            let entry = Entry::from_json(item, &mut interner);
            // A problem may be a syntax error, which is the file's, not the
            // object's: the whole-file read below names its line.
            let valid = !matches!(entry, Entry::Problem(_))
                || serde_json::from_str::<serde::de::IgnoredAny>(item).is_ok();
            streamed.push(entry);
            valid
        })
        .map_err(io)?;
        if complete {
            entries.append(&mut streamed);
            continue;
        }
        let text = std::fs::read_to_string(&file).map_err(io)?;
        if manifest::looks_like_json(&text) {
            for item in manifest::json_items(&name, &text)? {
                objects += usize::from(item.get().trim_start().starts_with('{'));
                entries.push(Entry::from_json(item.get(), &mut interner));
            }
        } else {
            for document in manifest::parse_documents(&name, &text)? {
                objects += usize::from(document.value.is_object());
                entries.push(Entry::from_value(document.value, &mut interner));
            }
        }
    }
    Ok((Snapshot::from_entries(&entries), objects))
}

/// Logs what a snapshot left out, so an operator sees a bad VPA by name.
pub fn report_problems(snapshot: &Snapshot, source: &str) {
    for problem in &snapshot.problems {
        tracing::warn!(store = source, %problem, "object left out of the store");
    }
}

/// What one reload of a file store found.
pub enum Reload {
    /// A snapshot to serve.
    Loaded(Arc<Snapshot>),
    /// No object at all: refused, the last good snapshot keeps serving.
    Empty,
}

/// Reloads `path` whenever it changes and calls `publish` with each new
/// good snapshot, or with [`Reload::Empty`] when the path holds no object
/// (logged at warn). Runs until the task is dropped.
pub async fn watch(
    path: PathBuf,
    interval: Duration,
    metrics: StoreMetrics,
    publish: impl Fn(Reload) + Send + 'static,
) {
    let source = path.clone();
    manifest::poll_changes(path, interval, move || match load_counted(&source) {
        Ok((_, 0)) => {
            tracing::warn!(
                path = %source.display(),
                "store reload refused: it holds no object; keeping the previous snapshot"
            );
            publish(Reload::Empty);
        }
        Ok((snapshot, _)) => {
            report_problems(&snapshot, "file");
            tracing::info!(path = %source.display(), vpas = snapshot.vpa_count(), "store reloaded");
            publish(Reload::Loaded(Arc::new(snapshot)));
        }
        Err(error) => {
            metrics.store_error("file");
            tracing::warn!(%error, "store reload failed; keeping the previous snapshot");
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vpa(name: &str, cpu: &str) -> serde_json::Value {
        json!({
            "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
            "metadata": {"name": name, "namespace": "monitoring"},
            "spec": {"scope": "node", "targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name}},
            "status": {"recommendationGroups": [{"scopeValue": "n1", "containerRecommendations": [
                {"containerName": "c", "target": {"cpu": cpu, "memory": "64Mi"},
                 "lowerBound": {"cpu": "1m"}, "upperBound": {"cpu": "9"}, "uncappedTarget": {"cpu": cpu}}]}]}
        })
    }

    fn cpu_of(snapshot: &Snapshot, daemonset: &str) -> Option<String> {
        let row = snapshot
            .vpa_for("monitoring", daemonset)?
            .recommendations
            .group("n1")?;
        let (_, cpu) = row.target("c").find(|(r, _)| *r == "cpu")?;
        Some(cpu.to_string())
    }

    #[test]
    fn a_json_list_and_yaml_documents_load_the_same_store() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let list = json!({"apiVersion": "v1", "kind": "List", "items": [
            vpa("a", "150m"), null,
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "monitoring"}}
        ]});
        std::fs::write(dir.path().join("list.json"), list.to_string())
            .unwrap_or_else(|e| panic!("{e}"));
        let yaml = format!(
            "# flow style\n{}\n---\n{}\n",
            vpa("b", "0.25"),
            vpa("c", "1")
        );
        std::fs::write(dir.path().join("more.yaml"), yaml).unwrap_or_else(|e| panic!("{e}"));
        let snapshot = load(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert!(snapshot.problems.is_empty(), "{:?}", snapshot.problems);
        assert_eq!(snapshot.vpa_count(), 3);
        assert_eq!(cpu_of(&snapshot, "a").as_deref(), Some("150m"));
        assert_eq!(cpu_of(&snapshot, "b").as_deref(), Some("250m"));
        assert_eq!(cpu_of(&snapshot, "c").as_deref(), Some("1"));
        use crate::params::PolicyInputs;
        assert!(snapshot.namespace("monitoring").is_some());
    }

    #[test]
    fn a_vpa_of_the_wrong_shape_in_a_json_list_is_named_and_the_rest_still_loads() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut wrong_type = vpa("typed", "1");
        wrong_type["status"]["recommendationGroups"] = json!("not a list");
        let list = json!([vpa("good", "1"), vpa("bad", "lots"), wrong_type]);
        std::fs::write(dir.path().join("store.json"), list.to_string())
            .unwrap_or_else(|e| panic!("{e}"));
        let snapshot = load(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        // An unparsable target is that container's problem only (the
        // webhook and the updater name it); a status of the wrong shape
        // leaves the VPA out.
        assert_eq!(snapshot.vpa_count(), 2);
        let problems: Vec<String> = snapshot.problems.iter().map(ToString::to_string).collect();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("VerticalPodAutoscaler/monitoring/typed: (object): invalid type: string \"not a list\", expected a list"),
            "{problems:?}"
        );
    }

    #[test]
    fn an_object_with_items_that_is_not_a_list_is_one_object() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let text = "\n  {\"items\": [{\"kind\": \"Namespace\"}], \"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"whole\"}}";
        std::fs::write(dir.path().join("ns.json"), text).unwrap_or_else(|e| panic!("{e}"));
        let snapshot = load(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        use crate::params::PolicyInputs;
        assert!(snapshot.namespace("whole").is_some());
        assert!(snapshot.problems.is_empty(), "{:?}", snapshot.problems);
    }

    #[test]
    fn objects_are_counted_so_that_an_emptied_store_is_told_from_an_empty_cluster() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let count = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
            let counted = load_counted(&path).map(|(_, n)| n);
            std::fs::remove_file(&path).unwrap_or_else(|e| panic!("{e}"));
            counted.unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        assert_eq!(count("empty.yaml", ""), 0);
        assert_eq!(count("comments.yaml", "# emptied\n---\n---\n"), 0);
        assert_eq!(
            count(
                "list.json",
                r#"{"apiVersion": "v1", "kind": "List", "items": []}"#
            ),
            0
        );
        assert_eq!(count("nulls.json", "[null, null]"), 0);
        assert_eq!(
            count(
                "one.yaml",
                "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n"
            ),
            1
        );
        assert_eq!(
            count(
                "two.json",
                &json!([vpa("a", "1"), null, vpa("b", "lots")]).to_string()
            ),
            2
        );
        assert_eq!(load_counted(dir.path()).map(|(_, n)| n).ok(), Some(0));
    }

    #[test]
    fn a_json_syntax_error_names_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("broken.json");
        std::fs::write(&path, "{\n  \"kind\": \"List\",\n  \"items\": [\n}")
            .unwrap_or_else(|e| panic!("{e}"));
        let error = load(dir.path()).err().map(|e| e.to_string());
        let expected = format!("{}: expected value at line 4 column 1", path.display());
        assert_eq!(error.as_deref(), Some(expected.as_str()));
    }
}
