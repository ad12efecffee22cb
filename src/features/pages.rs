//! Lists in pages: the edge that reads the objects the gating policies
//! match. At 150,000 pods one whole LIST is the whole cluster's pods in one
//! response, decoded and held at once while every Feature is evaluated
//! (issue 43: 369 MiB at 4,000 pods). A page of [`PAGE`] is decoded,
//! handed to the caller's fold and dropped before the next is asked for,
//! so what stays is only what the fold keeps.
//!
//! A `continue` token the apiserver no longer honours (`410 Gone`: its
//! etcd revision was compacted away) restarts the list from the start once,
//! with a fresh accumulator: pages already folded were of a different
//! revision. A second 410 fails the list. A list cut short is never a
//! result: the caller gets an error, not the pages it saw.

use super::cluster::ClusterError;
use kube::api::{Api, ListParams};

/// Objects per LIST request: what client-go's pager asks for.
pub const PAGE: u32 = 500;

/// Folds every object of `api` into an accumulator, page by page: each page
/// goes to `page` with the accumulator `fresh` made, then is dropped.
///
/// # Errors
/// A request that fails; a `410 Gone` after the one restart
/// ([`ClusterError::Expired`]); whatever `page` returns.
pub async fn fold<K, A>(
    api: &Api<K>,
    what: &str,
    fresh: impl Fn() -> A,
    mut page: impl FnMut(&mut A, Vec<K>) -> Result<(), ClusterError>,
) -> Result<A, ClusterError>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut restarted = false;
    'list: loop {
        let mut acc = fresh();
        let mut params = ListParams::default().limit(PAGE);
        loop {
            let list = match api.list(&params).await {
                Ok(list) => list,
                Err(error) if is_expired(&error) => {
                    if restarted {
                        return Err(ClusterError::Expired {
                            what: what.to_owned(),
                        });
                    }
                    tracing::info!(list = %what, "continue token expired (410 Gone); listing again from the start");
                    restarted = true;
                    continue 'list;
                }
                Err(source) => {
                    return Err(ClusterError::List {
                        what: what.to_owned(),
                        source,
                    })
                }
            };
            let next = list.metadata.continue_.filter(|token| !token.is_empty());
            page(&mut acc, list.items)?;
            match next {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(acc),
            }
        }
    }
}

/// Every object of `api`, read in pages (for the few small lists that are
/// kept whole: Features, policies, Namespaces).
///
/// # Errors
/// As [`fold`].
pub async fn all<K>(api: &Api<K>, what: &str) -> Result<Vec<K>, ClusterError>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    fold(api, what, Vec::new, |all, mut items| {
        all.append(&mut items);
        Ok(())
    })
    .await
}

/// `410 Gone`: the continue token's revision is no longer in etcd.
fn is_expired(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 410)
}

#[cfg(test)]
#[path = "pages_tests.rs"]
mod tests;
