//! upstream's `model/container_test.go` (kubernetes/autoscaler 55c37cd5),
//! case for case: its mock histograms become a recorder of the calls, and
//! each test asserts the exact sequence upstream's mock expects.

// upstream's test values are 3.14 and 6.28 cores, not π and τ.
#![allow(clippy::approx_constant)]

use super::*;

const MB: i64 = 1024 * 1024;
const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;

#[derive(Debug, PartialEq)]
enum Call {
    Cpu(f64, i64),
    Add(f64, i64),
    Subtract(f64, i64),
}

#[derive(Default)]
struct Recorder(Vec<Call>);

impl Aggregator for Recorder {
    fn add_cpu(&mut self, cores: f64, at: Timestamp) {
        self.0.push(Call::Cpu(cores, at.as_millisecond()));
    }
    fn add_peak(&mut self, bytes: f64, at: Timestamp) {
        self.0.push(Call::Add(bytes, at.as_millisecond()));
    }
    fn subtract_peak(&mut self, bytes: f64, at: Timestamp) {
        self.0.push(Call::Subtract(bytes, at.as_millisecond()));
    }
}

/// upstream's `testTimestamp`, 2017-04-18 17:35:05 UTC.
fn t0() -> i64 {
    "2017-04-18T17:35:05Z"
        .parse::<Timestamp>()
        .map(Timestamp::as_millisecond)
        .unwrap_or_default()
}

fn at(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn peaks(interval_ms: i64) -> PeakConfig {
    PeakConfig {
        interval_ms,
        oom_bump_up_ratio: 1.2,
        oom_min_bump_up_bytes: 1.048_576e8,
    }
}

fn mb(n: i64) -> f64 {
    (n * MB) as f64
}

#[test]
fn aggregate_container_usage_samples() {
    let (mut c, mut r, p) = (
        ContainerState::default(),
        Recorder::default(),
        peaks(DAY_MS),
    );
    let step = DAY_MS / 2;
    let t = t0();
    assert!(c.add_cpu_sample(&mut r, 3140, at(t)));
    assert!(c.add_memory_sample(&mut r, &p, 5, at(t), false));
    assert!(c.add_cpu_sample(&mut r, 6280, at(t + step)));
    assert!(c.add_memory_sample(&mut r, &p, 10, at(t + step), false));
    assert!(c.add_cpu_sample(&mut r, 1570, at(t + 2 * step)));
    assert!(c.add_memory_sample(&mut r, &p, 2, at(t + 2 * step), false));
    // Out of order, negative CPU, negative memory: discarded.
    assert!(!c.add_cpu_sample(&mut r, 1000, at(t + 2 * step)));
    assert!(!c.add_cpu_sample(&mut r, -1000, at(t + 4 * step)));
    assert!(!c.add_memory_sample(&mut r, &p, -1000, at(t + 4 * step), false));
    let end = t + DAY_MS;
    assert_eq!(
        r.0,
        vec![
            Call::Cpu(3.14, t),
            Call::Add(5.0, end),
            Call::Cpu(6.28, t + step),
            Call::Subtract(5.0, end),
            Call::Add(10.0, end),
            Call::Cpu(1.57, t + 2 * step),
            Call::Add(2.0, end + DAY_MS),
        ]
    );
}

#[test]
fn record_oom_increased_by_bump_up() {
    let (mut c, mut r, p) = (
        ContainerState::default(),
        Recorder::default(),
        peaks(DAY_MS),
    );
    assert!(c.record_oom(&mut r, &p, at(t0()), 1000 * MB));
    assert_eq!(r.0, vec![Call::Add(mb(1200), t0() + DAY_MS)]);
}

#[test]
fn record_oom_dont_run_away() {
    let (mut c, mut r, p) = (
        ContainerState::default(),
        Recorder::default(),
        peaks(DAY_MS),
    );
    let end = t0() + DAY_MS;
    assert!(c.record_oom(&mut r, &p, at(t0()), 1000 * MB));
    // Smaller OOMs do not change the peak.
    assert!(c.record_oom(&mut r, &p, at(t0()), 999 * MB));
    assert!(c.record_oom(&mut r, &p, at(t0()), 999 * MB));
    // A larger one replaces it.
    assert!(c.record_oom(&mut r, &p, at(t0()), 2000 * MB));
    assert_eq!(
        r.0,
        vec![
            Call::Add(mb(1200), end),
            Call::Subtract(mb(1200), end),
            Call::Add(mb(2400), end),
        ]
    );
}

#[test]
fn record_oom_increased_by_min() {
    let (mut c, mut r, p) = (
        ContainerState::default(),
        Recorder::default(),
        peaks(DAY_MS),
    );
    assert!(c.record_oom(&mut r, &p, at(t0()), MB));
    assert_eq!(r.0, vec![Call::Add(mb(101), t0() + DAY_MS)]);
}

#[test]
fn record_oom_maxed_with_known_sample() {
    let (mut c, mut r, p) = (
        ContainerState::default(),
        Recorder::default(),
        peaks(DAY_MS),
    );
    let end = t0() + DAY_MS;
    assert!(c.add_memory_sample(&mut r, &p, 3000 * MB, at(t0()), false));
    assert!(c.record_oom(&mut r, &p, at(t0()), 1000 * MB));
    assert_eq!(
        r.0,
        vec![
            Call::Add(mb(3000), end),
            Call::Subtract(mb(3000), end),
            Call::Add(mb(3600), end),
        ]
    );
}

#[test]
fn record_oom_discards_old_sample() {
    let (mut c, mut r, p) = (
        ContainerState::default(),
        Recorder::default(),
        peaks(DAY_MS),
    );
    assert!(c.add_memory_sample(&mut r, &p, 1000 * MB, at(t0()), false));
    assert!(!c.record_oom(&mut r, &p, at(t0() - 30 * HOUR_MS), 1000 * MB));
    assert_eq!(r.0, vec![Call::Add(mb(1000), t0() + DAY_MS)]);
}

#[test]
fn record_oom_in_new_window() {
    let (mut c, mut r, p) = (
        ContainerState::default(),
        Recorder::default(),
        peaks(DAY_MS),
    );
    assert!(c.add_memory_sample(&mut r, &p, 2000 * MB, at(t0()), false));
    assert!(c.record_oom(&mut r, &p, at(t0() + 2 * DAY_MS), 1000 * MB));
    assert_eq!(
        r.0,
        vec![
            Call::Add(mb(2000), t0() + DAY_MS),
            Call::Add(mb(2400), t0() + 3 * DAY_MS),
        ]
    );
}

#[test]
fn record_oom_fresh_oom_near_window_boundary_is_not_discarded() {
    let (mut c, mut r, p) = (
        ContainerState::default(),
        Recorder::default(),
        peaks(DAY_MS),
    );
    let boundary = t0() + DAY_MS;
    let end = t0() + 2 * DAY_MS;
    assert!(c.add_memory_sample(&mut r, &p, 100 * MB, at(t0()), false));
    assert!(c.add_memory_sample(&mut r, &p, 2000 * MB, at(boundary), false));
    assert!(c.record_oom(&mut r, &p, at(boundary - 1000), 1000 * MB));
    assert_eq!(
        r.0,
        vec![
            Call::Add(mb(100), t0() + DAY_MS),
            Call::Add(mb(2000), end),
            Call::Subtract(mb(2000), end),
            Call::Add(mb(2400), end),
        ]
    );
}

#[test]
fn memory_samples_with_custom_aggregation_interval() {
    let (mut c, mut r, p) = (
        ContainerState::default(),
        Recorder::default(),
        peaks(HOUR_MS),
    );
    assert!(c.add_memory_sample(&mut r, &p, 5, at(t0()), false));
    assert!(c.add_memory_sample(&mut r, &p, 10, at(t0() + 2 * HOUR_MS), false));
    assert_eq!(
        r.0,
        vec![
            Call::Add(5.0, t0() + HOUR_MS),
            Call::Add(10.0, t0() + 3 * HOUR_MS)
        ]
    );
}

#[test]
fn memory_peak_update_within_custom_interval() {
    let (mut c, mut r, p) = (
        ContainerState::default(),
        Recorder::default(),
        peaks(HOUR_MS),
    );
    let end = t0() + HOUR_MS;
    assert!(c.add_memory_sample(&mut r, &p, 5, at(t0()), false));
    assert!(c.add_memory_sample(&mut r, &p, 10, at(t0() + HOUR_MS / 2), false));
    assert_eq!(
        r.0,
        vec![
            Call::Add(5.0, end),
            Call::Subtract(5.0, end),
            Call::Add(10.0, end)
        ]
    );
}

#[test]
fn record_oom_discards_old_sample_with_custom_interval() {
    let (mut c, mut r, p) = (
        ContainerState::default(),
        Recorder::default(),
        peaks(HOUR_MS),
    );
    assert!(c.add_memory_sample(&mut r, &p, 1000 * MB, at(t0()), false));
    assert!(!c.record_oom(&mut r, &p, at(t0() - 2 * HOUR_MS), 1000 * MB));
    assert_eq!(r.0, vec![Call::Add(mb(1000), t0() + HOUR_MS)]);
}

#[test]
fn record_oom_in_new_window_with_custom_interval() {
    let (mut c, mut r, p) = (
        ContainerState::default(),
        Recorder::default(),
        peaks(HOUR_MS),
    );
    assert!(c.add_memory_sample(&mut r, &p, 2000 * MB, at(t0()), false));
    assert!(c.record_oom(&mut r, &p, at(t0() + 2 * HOUR_MS), 1000 * MB));
    assert_eq!(
        r.0,
        vec![
            Call::Add(mb(2000), t0() + HOUR_MS),
            Call::Add(mb(2400), t0() + 3 * HOUR_MS)
        ]
    );
}

#[test]
fn record_oom_discards_old_sample_with_default_interval_three_back() {
    // upstream TestRecordOOMDiscardsOldSampleWithCustomIntervalCount: the
    // count does not enter the staleness check, the interval does.
    let (mut c, mut r, p) = (
        ContainerState::default(),
        Recorder::default(),
        peaks(DAY_MS),
    );
    assert!(c.add_memory_sample(&mut r, &p, 1000 * MB, at(t0()), false));
    assert!(!c.record_oom(&mut r, &p, at(t0() - 3 * DAY_MS), 1000 * MB));
    assert_eq!(r.0, vec![Call::Add(mb(1000), t0() + DAY_MS)]);
}

#[test]
fn a_kill_seen_again_is_recorded_once() {
    let (mut c, mut r, p) = (
        ContainerState::default(),
        Recorder::default(),
        peaks(DAY_MS),
    );
    assert!(c.record_oom_once(&mut r, &p, at(t0()), 1000 * MB));
    assert!(!c.record_oom_once(&mut r, &p, at(t0()), 2000 * MB));
    assert_eq!(r.0, vec![Call::Add(mb(1200), t0() + DAY_MS)]);
}

#[test]
fn amounts_truncate_and_clamp_as_upstream() {
    assert_eq!(amount(1.9), 1);
    assert_eq!(amount(-3.0), 0);
    assert_eq!(amount(f64::NAN), 0);
    assert_eq!(amount(1e20), 100_000_000_000_000);
}
