//! Recorded PodMetrics (`--metrics file:DIR`) read a few files at a time,
//! so that replaying a week of per-minute recordings does not hold the week.
//! A first pass reads each file once for its timestamps and drops its
//! usage; then files whose timestamps overlap are read together, group
//! after group in timestamp order. Memory holds the largest group (one file
//! when each file is its own stretch of time), however many files there
//! are. The intervals are exactly those [`super::replay::load_metrics`]
//! gives for the whole directory.

use super::input::PodUsage;
use super::replay::{intervals, usage_under, ReplayError};
use crate::manifest;
use k8s_openapi::jiff::Timestamp;
use std::path::{Path, PathBuf};

/// The files of a recording, grouped by overlapping time.
#[derive(Debug)]
pub struct Recording {
    /// Groups in timestamp order; in each, files in directory order.
    groups: Vec<Vec<PathBuf>>,
    last: Timestamp,
}

/// A file's first and last timestamp, and its place in directory order.
struct Span {
    first: Timestamp,
    last: Timestamp,
    order: usize,
    file: PathBuf,
}

impl Recording {
    /// Reads every file under `path` once for its timestamps.
    ///
    /// # Errors
    /// An unreadable file or item, or no PodMetrics at all.
    pub fn scan(path: &Path) -> Result<Self, ReplayError> {
        let mut spans = Vec::new();
        for (order, file) in manifest::collect_files(path, &[])?.into_iter().enumerate() {
            let usage = usage_under(&file)?;
            let first = usage.iter().map(|u| u.timestamp).min();
            let last = usage.iter().map(|u| u.timestamp).max();
            if let (Some(first), Some(last)) = (first, last) {
                spans.push(Span {
                    first,
                    last,
                    order,
                    file,
                });
            }
        }
        spans.sort_by_key(|s| (s.first, s.order));
        let mut groups: Vec<Vec<Span>> = Vec::new();
        let mut end = None;
        for span in spans {
            // Overlapping (or touching) another group's time: read with it.
            match (groups.last_mut(), end) {
                (Some(group), Some(until)) if span.first <= until => {
                    end = Some(until.max(span.last));
                    group.push(span);
                }
                _ => {
                    end = Some(span.last);
                    groups.push(vec![span]);
                }
            }
        }
        let Some(last) = end else {
            return Err(ReplayError::NoMetrics(path.display().to_string()));
        };
        let groups = groups
            .into_iter()
            .map(|mut group| {
                group.sort_by_key(|s| s.order);
                group.into_iter().map(|s| s.file).collect()
            })
            .collect();
        Ok(Self { groups, last })
    }

    /// The last timestamp recorded.
    #[must_use]
    pub fn last(&self) -> Timestamp {
        self.last
    }

    /// How many groups of files are read together (one per file when no
    /// two files overlap in time).
    #[must_use]
    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    /// Each group's intervals in turn, read when asked for.
    pub fn intervals(
        &self,
    ) -> impl Iterator<Item = Result<Vec<(Timestamp, Vec<PodUsage>)>, ReplayError>> + '_ {
        self.groups.iter().map(|files| {
            let mut usage = Vec::new();
            for file in files {
                usage.extend(usage_under(file)?);
            }
            Ok(intervals(usage))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recommend::replay::load_metrics;

    fn list(at: &str, pods: &[&str]) -> String {
        let items: Vec<String> = pods
            .iter()
            .map(|pod| {
                format!(
                    r#"{{"metadata":{{"name":"{pod}","namespace":"ns"}},"timestamp":"{at}","window":"1m0s","containers":[{{"name":"c","usage":{{"cpu":"10m","memory":"1Mi"}}}}]}}"#
                )
            })
            .collect();
        format!(
            r#"{{"apiVersion":"metrics.k8s.io/v1beta1","kind":"PodMetricsList","items":[{}]}}"#,
            items.join(",")
        )
    }

    #[test]
    fn groups_read_in_turn_give_the_intervals_of_the_whole_directory() {
        let dir = tempfile::tempdir().unwrap();
        // Out of order by name, two files sharing a minute, one on its own.
        let files = [
            ("a.json", list("2026-11-25T10:02:00Z", &["p1", "p2"])),
            ("b.json", list("2026-11-25T10:00:00Z", &["p1"])),
            ("c.json", list("2026-11-25T10:00:00Z", &["p3"])),
            ("d.json", list("2026-11-25T10:01:00Z", &["p2"])),
        ];
        for (name, text) in &files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let whole = load_metrics(dir.path()).unwrap();
        let recording = Recording::scan(dir.path()).unwrap();
        assert_eq!(recording.groups(), 3);
        let streamed: Vec<_> = recording
            .intervals()
            .collect::<Result<Vec<_>, _>>()
            .unwrap()
            .into_iter()
            .flatten()
            .collect();
        let names = |intervals: &[(Timestamp, Vec<PodUsage>)]| -> Vec<String> {
            intervals
                .iter()
                .map(|(at, usage)| format!("{at} {}", usage.len()))
                .collect()
        };
        assert_eq!(names(&streamed), names(&whole));
        assert_eq!(Some(recording.last()), whole.last().map(|(at, _)| *at));
    }
}
