//! Client-side pacing of API requests, as client-go's `--kube-api-qps` and
//! `--kube-api-burst` pace upstream's VPA components: every request a
//! client sends (watches included, once each) takes a token from one
//! bucket, so a controller that sends its writes concurrently still asks no
//! more of the apiserver than its flags allow.
//!
//! A tower layer for [`kube::client::ClientBuilder`]: it waits for a token
//! in `poll_ready`, as tower's own `RateLimit` does, but from a GCRA bucket
//! with a burst (governor, already the crate's log throttle), which tower's
//! fixed window has not.

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// Upstream VPA's defaults for its components' clients (`--kube-api-qps`
/// 50, `--kube-api-burst` 100): sized for a 5,000-node cluster, where a
/// pass may change thousands of pods.
pub const DEFAULT_QPS: f64 = 50.0;
pub const DEFAULT_BURST: u32 = 100;

/// `--kube-api-qps` and `--kube-api-burst`, upstream's names.
#[derive(clap::Args, Clone, Copy, Debug, PartialEq)]
pub struct PaceFlags {
    /// Requests per second this component's client sends at most, on
    /// average (0: unpaced).
    #[arg(long, default_value_t = DEFAULT_QPS, value_parser = qps)]
    pub kube_api_qps: f64,
    /// Requests it may send at once above that average; also how many
    /// writes of one pass are in flight at most.
    #[arg(long, default_value_t = DEFAULT_BURST, value_parser = clap::value_parser!(u32).range(1..))]
    pub kube_api_burst: u32,
}

impl Default for PaceFlags {
    fn default() -> Self {
        Self {
            kube_api_qps: DEFAULT_QPS,
            kube_api_burst: DEFAULT_BURST,
        }
    }
}

/// A finite rate of zero or more requests a second.
fn qps(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "{text:?} is not a rate: a number of requests a second, 0 or more, such as 50"
        )),
    }
}

impl PaceFlags {
    /// The layer these flags ask for; `None` when unpaced (qps 0).
    #[must_use]
    pub fn layer(&self) -> Option<PaceLayer> {
        quota(self.kube_api_qps, self.kube_api_burst).map(|quota| PaceLayer {
            limiter: Arc::new(RateLimiter::direct(quota)),
        })
    }

    /// How many writes of one pass may be in flight at once.
    #[must_use]
    pub fn in_flight(&self) -> usize {
        usize::try_from(self.kube_api_burst.max(1)).unwrap_or(1)
    }

    /// A client for `config`, paced by these flags.
    ///
    /// # Errors
    /// When kube cannot build a client from `config`.
    pub fn client(&self, config: kube::Config) -> Result<kube::Client, kube::Error> {
        let builder = kube::client::ClientBuilder::try_from(config)?;
        Ok(match self.layer() {
            Some(layer) => builder.with_layer(&layer).build(),
            None => builder.build(),
        })
    }
}

/// `qps` tokens a second, `burst` at once; `None` for 0.
fn quota(qps: f64, burst: u32) -> Option<Quota> {
    if qps <= 0.0 {
        return None;
    }
    // governor refills one token per period; at least a nanosecond.
    let period = Duration::from_secs_f64(1.0 / qps).max(Duration::from_nanos(1));
    let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
    Quota::with_period(period).map(|q| q.allow_burst(burst))
}

/// Makes [`Paced`] services sharing one bucket.
#[derive(Clone, Debug)]
pub struct PaceLayer {
    limiter: Arc<DefaultDirectRateLimiter>,
}

impl<S> tower::Layer<S> for PaceLayer {
    type Service = Paced<S>;

    fn layer(&self, inner: S) -> Paced<S> {
        Paced {
            inner,
            limiter: self.limiter.clone(),
            wait: None,
            permitted: false,
        }
    }
}

type Wait = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A service that is ready only once the bucket gave it a token.
pub struct Paced<S> {
    inner: S,
    limiter: Arc<DefaultDirectRateLimiter>,
    wait: Option<Wait>,
    /// A token taken and not yet spent on a call.
    permitted: bool,
}

impl<S, R> tower::Service<R> for Paced<S>
where
    S: tower::Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if !self.permitted {
            if self.limiter.check().is_ok() {
                self.permitted = true;
            } else {
                let limiter = self.limiter.clone();
                let wait = self
                    .wait
                    .get_or_insert_with(|| Box::pin(async move { limiter.until_ready().await }));
                if wait.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.wait = None;
                self.permitted = true;
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.permitted = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use tower::{Service, ServiceExt};

    #[derive(Clone)]
    struct Echo;

    impl Service<u32> for Echo {
        type Response = u32;
        type Error = Infallible;
        type Future = std::future::Ready<Result<u32, Infallible>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, r: u32) -> Self::Future {
            std::future::ready(Ok(r))
        }
    }

    #[tokio::test]
    async fn a_burst_goes_at_once_and_the_next_request_waits_for_a_token() {
        let flags = PaceFlags {
            kube_api_qps: 1.0,
            kube_api_burst: 3,
        };
        let layer = flags.layer().expect("paced");
        let mut service = tower::Layer::layer(&layer, Echo);
        for i in 0..3 {
            assert_eq!(
                service.ready().await.map(|s| s.call(i)).ok().map(|_| i),
                Some(i)
            );
        }
        // The fourth: not ready now (a token comes in a second).
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(service.poll_ready(&mut cx).is_pending());
    }

    #[test]
    fn zero_qps_is_unpaced_and_a_rate_must_be_a_number() {
        let flags = PaceFlags {
            kube_api_qps: 0.0,
            kube_api_burst: 10,
        };
        assert!(flags.layer().is_none());
        assert_eq!(qps("50"), Ok(50.0));
        assert_eq!(
            qps("-1"),
            Err(
                "\"-1\" is not a rate: a number of requests a second, 0 or more, such as 50"
                    .to_owned()
            )
        );
        assert!(qps("inf").is_err());
        assert!(qps("NaN").is_err());
    }
}
