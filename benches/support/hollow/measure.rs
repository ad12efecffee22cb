//! One component against the hollow apiserver: started with its
//! Deployment's arguments, watched until it has made its first whole pass,
//! then measured over one more (between two pass marks).

use super::process::{free_port, metric_sum, spawn, Running};
use super::server::{lock, State, Tally};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// What marks a pass.
#[derive(Clone, Copy, Debug)]
pub enum Marker {
    /// A metric family (or one series, `name{label="value"}`) whose sum
    /// changes once a pass, at its end.
    Metric(&'static str),
    /// A LIST begun of this path pattern.
    Lists(&'static str),
    /// No passes (watch-driven): a window of `period` after `/readyz`.
    Window,
}

/// What shows the first whole pass is done, besides `/readyz`.
#[derive(Clone, Copy, Debug)]
pub enum First {
    /// `/readyz` alone.
    Ready,
    /// A line of the log holding this.
    Log(&'static str),
    /// A metric family with a sum above 0.
    Metric(&'static str),
}

/// A component as its Deployment runs it.
pub struct Spec {
    pub name: &'static str,
    /// The YAML file holding its Deployment (relative to the crate).
    pub manifest: &'static str,
    /// `--flag` → value, replacing the shipped one or added.
    pub overrides: Vec<(String, String)>,
    pub metrics_flag: &'static str,
    pub first: First,
    /// What marks each pass after the first.
    pub marker: Marker,
    /// Its pass interval (flags as shipped).
    pub period: Duration,
}

/// What one run measured.
#[derive(Default, Clone)]
pub struct Measured {
    pub ready_after: Duration,
    pub rss_synced: u64,
    pub rss_after_pass: u64,
    pub peak: u64,
    pub sync: Tally,
    pub pass: Tally,
    pub pass_cpu: f64,
    pub pass_wall: Duration,
    pub sync_cpu: f64,
}

/// The shipped arguments of the Deployment in `spec.manifest`, with the
/// overrides applied.
pub fn arguments(spec: &Spec) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(spec.manifest);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .unwrap_or_else(|| panic!("{} holds no Deployment", path.display()));
    let shipped = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut out: Vec<String> = shipped
        .iter()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .filter(|a| {
            !spec
                .overrides
                .iter()
                .any(|(f, _)| a == f || a.starts_with(&format!("{f}=")))
        })
        .collect();
    out.extend(spec.overrides.iter().map(|(f, v)| format!("{f}={v}")));
    out
}

fn marker(state: &State, running: &Running, component: &str, m: Marker) -> Option<f64> {
    match m {
        Marker::Metric(name) => running
            .get("/metrics")
            .and_then(|(_, body)| metric_sum(&body, name)),
        Marker::Lists(pattern) => lock(&state.tallies)
            .get(component)
            .and_then(|t| t.starts.get(pattern).map(|&n| n as f64)),
        Marker::Window => None,
    }
}

fn tally(state: &State, component: &str) -> Tally {
    lock(&state.tallies)
        .get(component)
        .cloned()
        .unwrap_or_default()
}

fn why_gone(running: &mut Running, log: &Path) -> Option<String> {
    let status = running.exited()?;
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(5).collect();
    Some(format!(
        "exited ({status}): {}",
        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
    ))
}

/// Runs `spec` against the hollow apiserver at `port` holding `state`,
/// counted as `label`.
pub fn run(
    spec: &Spec,
    state: &State,
    kubeconfig: &Path,
    label: &str,
    dir: &Path,
    wrap: &[String],
    limit: Duration,
) -> Result<Measured, String> {
    super::measure_as(state, label);
    let port = free_port();
    let mut s = Spec {
        overrides: spec.overrides.clone(),
        ..*spec
    };
    s.overrides
        .push((spec.metrics_flag.to_owned(), format!("127.0.0.1:{port}")));
    s.overrides
        .push(("--log-format".to_owned(), "text".to_owned()));
    let args = arguments(&s);
    let log = dir.join(format!("{label}.log"));
    let mut running = spawn(&args, kubeconfig, spec.name, &log, wrap, port);
    lock(&state.marks).clear();
    *lock(&state.mark) = match spec.marker {
        Marker::Lists(pattern) => Some((label.to_owned(), pattern.to_owned(), running.pid())),
        _ => None,
    };
    let began = Instant::now();
    let poll = Duration::from_millis(250);
    let result = (|| {
        // Ready, and the first pass seen.
        let first = loop {
            if let Some(why) = why_gone(&mut running, &log) {
                return Err(why);
            }
            if began.elapsed() > limit {
                return Err(format!("no first pass within {limit:?}"));
            }
            let ready = running.get("/readyz").is_some_and(|(c, _)| c == 200);
            let first = match spec.first {
                First::Ready => true,
                First::Log(text) => std::fs::read_to_string(&log)
                    .unwrap_or_default()
                    .contains(text),
                First::Metric(name) => running
                    .get("/metrics")
                    .and_then(|(_, b)| metric_sum(&b, name))
                    .is_some_and(|v| v > 0.0),
            };
            // A LIST marker has begun the first pass.
            let begun = !matches!(spec.marker, Marker::Lists(_))
                || marker(state, &running, label, spec.marker).is_some_and(|v| v >= 1.0);
            if ready && first && begun {
                break marker(state, &running, label, spec.marker)
                    .or(Some(0.0))
                    .filter(|_| !matches!(spec.marker, Marker::Window));
            }
            std::thread::sleep(poll);
        };
        let ready_after = began.elapsed();
        // The next mark: the first pass is whole; then one more pass.
        let next_mark = |running: &mut Running,
                         from: Option<f64>,
                         after: Instant|
         -> Result<Option<f64>, String> {
            let Some(mut seen) = from else {
                std::thread::sleep(spec.period.saturating_sub(after.elapsed()));
                return Ok(None);
            };
            loop {
                if let Some(why) = why_gone(running, &log) {
                    return Err(why);
                }
                if began.elapsed() > limit * 2 {
                    return Err("no next pass".to_owned());
                }
                let now = marker(state, running, label, spec.marker);
                if let Some(v) = now.filter(|v| *v != seen) {
                    if after.elapsed() >= spec.period / 2 {
                        return Ok(Some(v));
                    }
                    seen = v;
                }
                std::thread::sleep(poll);
            }
        };
        if let Marker::Lists(_) = spec.marker {
            // Marks taken by the server as each pass's LIST arrives: the
            // first pass is whole at the next one, the pass measured ends
            // at the one after.
            let n0 = lock(&state.marks).len();
            let mut rss_synced = None;
            loop {
                if let Some(why) = why_gone(&mut running, &log) {
                    return Err(why);
                }
                if began.elapsed() > limit * 2 {
                    return Err("no next pass".to_owned());
                }
                let n = lock(&state.marks).len();
                if n > n0 && rss_synced.is_none() {
                    rss_synced = Some(running.rss());
                }
                if n > n0 + 1 {
                    break;
                }
                std::thread::sleep(poll);
            }
            let marks = lock(&state.marks);
            let ((t0, sync, cpu0), (t1, end, cpu1)) = (&marks[n0], &marks[n0 + 1]);
            return Ok(Measured {
                ready_after,
                rss_synced: rss_synced.unwrap_or_default(),
                rss_after_pass: running.rss(),
                peak: running.peak(),
                pass_cpu: cpu1 - cpu0,
                pass_wall: t1.duration_since(*t0),
                sync_cpu: *cpu0,
                pass: end.since(sync),
                sync: sync.clone(),
            });
        }
        let mark = if first.is_some() {
            next_mark(&mut running, first, Instant::now() - spec.period)?
        } else {
            None
        };
        let (sync, rss_synced, sync_cpu) = (tally(state, label), running.rss(), running.cpu());
        let t0 = Instant::now();
        next_mark(&mut running, mark, t0)?;
        let pass = tally(state, label).since(&sync);
        Ok(Measured {
            ready_after,
            rss_synced,
            rss_after_pass: running.rss(),
            peak: running.peak(),
            pass_cpu: running.cpu() - sync_cpu,
            pass_wall: t0.elapsed(),
            sync_cpu,
            sync,
            pass,
        })
    })();
    running.stop();
    *lock(&state.mark) = None;
    result
}
