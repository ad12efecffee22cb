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
#[derive(Clone, Debug)]
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
        self.groups.iter().map(|files| read_group(files))
    }
}

fn read_group(files: &[PathBuf]) -> Result<Vec<(Timestamp, Vec<PodUsage>)>, ReplayError> {
    let mut usage = Vec::new();
    for file in files {
        usage.extend(usage_under(file)?);
    }
    Ok(intervals(usage))
}

/// A recording replayed an interval at a time, as the cluster loop takes
/// it (`recommender --metrics file:DIR`): a group of files is read when
/// the intervals read before have all been taken, so the loop holds one
/// group, not the recording.
#[derive(Clone, Debug)]
pub struct Replayed {
    recording: Recording,
    /// The next group to read.
    next: usize,
    read: std::collections::VecDeque<(Timestamp, Vec<PodUsage>)>,
}

impl Replayed {
    /// From the first interval on.
    #[must_use]
    pub fn new(recording: Recording) -> Self {
        Self {
            recording,
            next: 0,
            read: std::collections::VecDeque::new(),
        }
    }

    /// The next interval; `None` once every interval has been taken.
    ///
    /// # Errors
    /// A file of the next group that can no longer be read (changed or
    /// removed since the scan); the group is skipped.
    pub fn next_interval(&mut self) -> Option<Result<(Timestamp, Vec<PodUsage>), ReplayError>> {
        loop {
            if let Some(interval) = self.read.pop_front() {
                return Some(Ok(interval));
            }
            let files = self.recording.groups.get(self.next)?;
            self.next += 1;
            match read_group(files) {
                Ok(intervals) => self.read.extend(intervals),
                Err(error) => return Some(Err(error)),
            }
        }
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

    /// Out of order by name, two files sharing a minute, two on their own.
    fn four_files() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            ("a.json", list("2026-11-25T10:02:00Z", &["p1", "p2"])),
            ("b.json", list("2026-11-25T10:00:00Z", &["p1"])),
            ("c.json", list("2026-11-25T10:00:00Z", &["p3"])),
            ("d.json", list("2026-11-25T10:01:00Z", &["p2"])),
        ];
        for (name, text) in &files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    #[test]
    fn groups_read_in_turn_give_the_intervals_of_the_whole_directory() {
        let dir = four_files();
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

    #[test]
    fn replayed_takes_the_intervals_one_at_a_time_and_then_runs_out() {
        let dir = four_files();
        let mut replayed = Replayed::new(Recording::scan(dir.path()).unwrap());
        let mut taken = Vec::new();
        while let Some(interval) = replayed.next_interval() {
            let (at, usage) = interval.unwrap();
            let mut names: Vec<&str> = usage.iter().map(|u| u.name.as_str()).collect();
            names.sort_unstable();
            taken.push(format!("{at} {}", names.join(",")));
        }
        assert_eq!(
            taken,
            [
                "2026-11-25T10:00:00Z p1,p3",
                "2026-11-25T10:01:00Z p2",
                "2026-11-25T10:02:00Z p1,p2"
            ]
        );
        assert!(replayed.next_interval().is_none());
    }

    #[test]
    fn a_file_gone_since_the_scan_is_an_error_naming_it_and_the_rest_go_on() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.json"),
            list("2026-11-25T10:00:00Z", &["p1"]),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("b.json"),
            list("2026-11-25T10:01:00Z", &["p2"]),
        )
        .unwrap();
        let mut replayed = Replayed::new(Recording::scan(dir.path()).unwrap());
        std::fs::remove_file(dir.path().join("a.json")).unwrap();
        let error = replayed.next_interval().unwrap().unwrap_err().to_string();
        assert!(error.contains("a.json"), "{error}");
        let (at, usage) = replayed.next_interval().unwrap().unwrap();
        assert_eq!(
            (at.to_string(), usage[0].name.as_str()),
            ("2026-11-25T10:01:00Z".into(), "p2")
        );
        assert!(replayed.next_interval().is_none());
    }

    #[test]
    fn every_shape_of_file_gives_the_same_usage_and_a_bad_item_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let item = |pod: &str, kind: bool| {
            format!(
                r#"{{{}"metadata":{{"name":"{pod}","namespace":"ns"}},"timestamp":"2026-11-25T10:00:00Z","containers":[{{"name":"c","usage":{{"cpu":"10m","memory":"1Mi"}}}}]}}"#,
                if kind {
                    r#""apiVersion":"metrics.k8s.io/v1beta1","kind":"PodMetrics","#
                } else {
                    ""
                }
            )
        };
        let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","namespace":"ns"}}"#;
        let shapes = [
            ("list.json", list("2026-11-25T10:00:00Z", &["p1", "p2"])),
            (
                "generic.json",
                format!(
                    r#"{{"kind":"List","items":[{},{pod},{}]}}"#,
                    item("p1", true),
                    item("p2", true)
                ),
            ),
            (
                "array.json",
                format!("[{},{pod},{}]", item("p1", true), item("p2", true)),
            ),
            (
                "late-kind.json",
                format!(
                    r#"{{"items":[{},{}],"kind":"PodMetricsList"}}"#,
                    item("p1", false),
                    item("p2", false)
                ),
            ),
            (
                "docs.yaml",
                ["p1", "p2"]
                    .map(|p| {
                        format!(
                            "kind: PodMetrics\nmetadata: {{name: {p}, namespace: ns}}\n\
                             timestamp: 2026-11-25T10:00:00Z\n\
                             containers: [{{name: c, usage: {{cpu: 10m, memory: 1Mi}}}}]\n"
                        )
                    })
                    .join("---\nkind: Pod\nmetadata: {name: x, namespace: ns}\n---\n"),
            ),
        ];
        for (name, text) in &shapes {
            let file = dir.path().join(name);
            std::fs::write(&file, text).unwrap();
            let usage = usage_under(&file).unwrap();
            let read: Vec<String> = usage
                .iter()
                .map(|u| format!("{}/{} {:?}", u.namespace, u.name, u.containers))
                .collect();
            assert_eq!(
                read,
                [
                    "ns/p1 [(\"c\", 10, 1048576)]",
                    "ns/p2 [(\"c\", 10, 1048576)]"
                ],
                "{name}"
            );
        }
        let bad = dir.path().join("bad.json");
        std::fs::write(
            &bad,
            list("2026-11-25T10:00:00Z", &["p1"]).replace("10m", "ten"),
        )
        .unwrap();
        let error = usage_under(&bad).unwrap_err().to_string();
        assert!(
            error.starts_with(&format!("{}: PodMetrics/ns/p1", bad.display()))
                && error.contains("containers[0].usage.cpu"),
            "{error}"
        );
    }
}
