//! Shared by the recommender's benches: the synthetic clock and noise
//! their recorded histories are made of, so both benches feed the model
//! the same kind of week.

use k8s_openapi::jiff::Timestamp;

/// The first minute of every synthetic recording.
pub const START: i64 = 1_795_000_000;

/// `minute` minutes after [`START`].
pub fn at(minute: i64) -> Timestamp {
    Timestamp::from_second(START + minute * 60).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// A cheap deterministic noise in [-1, 1).
pub fn noise(seed: u64) -> f64 {
    let x = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    ((x >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
}
