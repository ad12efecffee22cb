//! The updater at issue 22's scale: one planning pass over 20 scoped
//! DaemonSet VPAs x 5,000 nodes, 100,000 pods of two containers each
//! (`nodescope::update::synthetic`: bound, Running and Ready, started weeks
//! ago, nine in ten away from their group's recommendation). Measures, for
//! node-scoped VPAs (a group per node) and zone-scoped ones (a group per
//! zone):
//! - RSS held once the Workloads (DaemonSets and `RunningPod`s) and the
//!   store Snapshot (VPAs, Nodes) are built, the inputs dropped and freed
//!   memory given back: what the updater holds between passes;
//! - the process's CPU time (`getrusage`, user + system) of one
//!   `plan_pass`, the first one and the median [min-max] of all runs;
//! - peak RSS during the pass (VmHWM, reset before it) and RSS with the
//!   pass's plans still held;
//! - the CPU time of what the running updater logs of the pods it leaves
//!   alone (`update::told`): the first pass tells every held-back pod,
//!   later passes with the same decisions tell none.
//!
//! Each variant runs in a child process so RSS is its own.
//!
//! `cargo bench --bench update` (both scopes, 5 passes each), or
//! `cargo bench --bench update -- node|zone [NODES [VPAS [RUNS]]]` (one,
//! e.g. a smaller size under a profiler).

use nodescope::pods::RunningPod;
use nodescope::store::Snapshot;
use nodescope::update::synthetic::{self, Scope};
use nodescope::update::{plan_pass, Action, Memory, UpdateConfig, Workloads};
use std::time::Duration;

const VPAS: usize = 20;
const NODES: usize = 5_000;
const RUNS: usize = 5;
/// 2026-11-25T12:00:00Z: the pods started weeks before.
const NOW: i64 = 1_795_608_000;

/// The process's CPU time, user and system.
fn cpu() -> Duration {
    // SAFETY: getrusage writes into the struct it is given; all-zero is a
    // valid `rusage`.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// A `/proc/self/status` field in MiB.
fn status_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn rss_mib() -> f64 {
    status_mib("VmRSS:")
}

/// Gives freed heap pages back, so RSS is what is held.
fn trim() {
    // SAFETY: malloc_trim only releases free heap pages.
    unsafe { libc::malloc_trim(0) };
}

/// Resets VmHWM to the current RSS (`clear_refs` 5, Linux 4.0 and later).
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn run(scope: Scope, nodes: usize, vpas: usize, runs: usize) {
    let before = rss_mib();
    let started = cpu();
    let (mut workloads, rest) =
        Workloads::split(synthetic::cluster(vpas, nodes, scope)).expect("synthetic cluster");
    // Pod by pod, as the watch delivers them.
    for pod in synthetic::pods(vpas, nodes, scope) {
        workloads.put_pod(RunningPod::from_value(&pod).expect("synthetic pod"));
    }
    let snapshot = Snapshot::build(rest);
    assert!(snapshot.problems.is_empty(), "{:?}", snapshot.problems);
    let build = cpu() - started;
    trim();
    let held = rss_mib();
    let config = UpdateConfig::default();
    let mut memory = Memory::default();
    let mut times = Vec::new();
    let mut told = nodescope::update::told::Told::default();
    let mut telling = Vec::new();
    let (mut peak, mut with_plans, mut counts) = (f64::NAN, f64::NAN, String::new());
    for run in 0..runs {
        memory.retain_live(&workloads);
        trim();
        let reset = reset_peak();
        let started = cpu();
        let plans = plan_pass(&snapshot, &workloads, &config, &mut memory, true, NOW);
        times.push((cpu() - started).as_secs_f64());
        let started = cpu();
        let lines = told.news(&plans).len();
        telling.push(((cpu() - started).as_secs_f64(), lines));
        if run == 0 {
            if reset {
                peak = status_mib("VmHWM:");
            }
            with_plans = rss_mib();
            let count = |f: &dyn Fn(&nodescope::update::PodPlan) -> bool| {
                plans.iter().filter(|p| f(p)).count()
            };
            counts = format!(
                "{} plans: {} resize, {} evict; {} at their recommendation, {} deferred, {} below the threshold",
                plans.len(),
                count(&|p| p.action == Action::Resize),
                count(&|p| p.action == Action::Evict),
                count(&|p| p.reason == nodescope::update::Reason::AtTarget),
                count(&|p| p.action == Action::Deferred),
                count(&|p| p.reason == nodescope::update::Reason::ChangeTooSmall),
            );
        }
        drop(plans);
    }
    let first = times[0];
    let (min, max) = times.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), t| {
        (lo.min(*t), hi.max(*t))
    });
    println!(
        "| {scope:?} | {vpas} x {nodes} | {} | {:.2} s | {held:.1} MiB | {first:.3} s | **{:.3} s** [{min:.3}-{max:.3}] | {peak:.1} MiB | {with_plans:.1} MiB |",
        workloads.pods.len(),
        build.as_secs_f64(),
        median(times.clone()),
    );
    eprintln!("  {scope:?}: rss before building {before:.1} MiB; {counts}; {runs} passes");
    let later: Vec<f64> = telling.iter().skip(1).map(|(t, _)| *t).collect();
    eprintln!(
        "  {scope:?}: told: first pass {:.3} s CPU, {} lines; later passes median {:.3} s, {} lines",
        telling[0].0,
        telling[0].1,
        if later.is_empty() { f64::NAN } else { median(later) },
        telling.iter().skip(1).map(|(_, n)| n).sum::<usize>(),
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let scope = args.iter().find_map(|a| match a.as_str() {
        "node" => Some(Scope::Node),
        "zone" => Some(Scope::Zone),
        _ => None,
    });
    let numbers: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let nodes = numbers.first().copied().unwrap_or(NODES);
    let vpas = numbers.get(1).copied().unwrap_or(VPAS);
    let runs = numbers.get(2).copied().unwrap_or(RUNS).max(1);
    let header = "| scope | VPAs x nodes | pods | building (CPU) | RSS held | first pass (CPU) | pass, median [min-max] (CPU) | peak RSS in the pass | RSS with the plans |\n|---|---|---|---|---|---|---|---|---|";
    if let Some(scope) = scope {
        if !args.iter().any(|a| a == "child") {
            println!("{header}");
        }
        run(scope, nodes, vpas, runs);
        return;
    }
    println!("{header}");
    let exe = std::env::current_exe().unwrap_or_default();
    for scope in ["node", "zone"] {
        let status = std::process::Command::new(&exe)
            .args([scope, "child"])
            .args(numbers.iter().map(ToString::to_string))
            .status();
        if !status.as_ref().is_ok_and(|s| s.success()) {
            eprintln!("update bench, {scope} scope, failed: {status:?}");
            std::process::exit(1);
        }
    }
}
