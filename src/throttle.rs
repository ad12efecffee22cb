//! Warn lines that a flood cannot turn into a full disk: refused requests
//! and failed TLS handshakes are logged through a [`Throttle`], and the
//! lines it holds back are counted and reported by the next line let
//! through. The metrics count every event; the log is for the who and why.

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};

/// A token bucket of log lines (governor's GCRA limiter, lock-free), and the
/// count of lines it refused since the last one it let through.
#[derive(Debug)]
pub struct Throttle {
    limiter: DefaultDirectRateLimiter,
    suppressed: AtomicU64,
}

impl Throttle {
    /// Lines in a burst.
    pub const BURST: u32 = 20;

    /// At most [`Self::BURST`] lines at once, then one a second: a flood
    /// writes about 3,600 lines an hour, well under a megabyte.
    #[must_use]
    pub fn new() -> Self {
        Self::with_quota(
            Quota::per_second(NonZeroU32::MIN)
                .allow_burst(NonZeroU32::new(Self::BURST).unwrap_or(NonZeroU32::MIN)),
        )
    }

    /// A throttle of `quota`.
    #[must_use]
    pub fn with_quota(quota: Quota) -> Self {
        Self {
            limiter: RateLimiter::direct(quota),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Whether a line may be written now: `Some(n)` with the `n` lines held
    /// back since the last one written (for the line to say so), or `None`,
    /// and the line is counted as held back. A count is reported by the next
    /// line let through, so lines held back at the end of a flood are told
    /// of by the next event's line.
    #[must_use]
    pub fn admit(&self) -> Option<u64> {
        if self.limiter.check().is_ok() {
            Some(self.suppressed.swap(0, Ordering::Relaxed))
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

impl Default for Throttle {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_gets_its_burst_and_the_next_line_counts_what_was_held_back() {
        let throttle = Throttle::new();
        let admitted = (0..300).filter_map(|_| throttle.admit()).count();
        // One more may slip in if a second passed during the loop.
        assert!(
            (Throttle::BURST as usize..=Throttle::BURST as usize + 1).contains(&admitted),
            "{admitted}"
        );
        std::thread::sleep(std::time::Duration::from_millis(1_100));
        let reported = throttle.admit();
        assert_eq!(reported, Some(300 - admitted as u64));
    }
}
