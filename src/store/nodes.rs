//! Node labels for label scopes (AEP-10031), from a metadata-only watch.
//!
//! A Node object is tens of KiB (images, conditions, addresses); nodescope
//! needs one or two of its labels. So the watch asks for metadata only, and
//! each node is kept as its name plus the labels whose key some scoped VPA
//! names ("wanted" keys), nothing else.
//!
//! When a VPA names a key the current listing dropped, the watch is started
//! over with the larger key set (a new list). Until that list is complete,
//! the snapshot reports the new key's nodes as unknown (the webhook falls
//! back to the VPA-wide recommendation and says so) rather than reading a
//! label that was filtered away as absent.

use crate::json::text::ObjectText;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ObjectMeta, PartialObjectMeta};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};
use tokio::sync::watch;

/// A set of label keys, shared without copying.
pub type LabelKeys = Arc<BTreeSet<Arc<str>>>;

/// The keys the Node store's current (complete) listing kept: written by
/// the node stream, read when a snapshot is built.
#[derive(Clone, Debug, Default)]
pub struct CoveredKeys(Arc<RwLock<LabelKeys>>);

impl CoveredKeys {
    /// The keys whose labels every known node carries, as far as they have them.
    #[must_use]
    pub fn get(&self) -> LabelKeys {
        self.0
            .read()
            .map_or_else(|e| e.into_inner().clone(), |k| k.clone())
    }

    fn set(&self, keys: LabelKeys) {
        match self.0.write() {
            Ok(mut current) => *current = keys,
            Err(poisoned) => *poisoned.into_inner() = keys,
        }
    }
}

type Inner =
    futures::stream::BoxStream<'static, Result<Event<PartialObjectMeta<Node>>, watcher::Error>>;

fn start(client: &Client) -> Inner {
    use futures::StreamExt;
    // An Api over PartialObjectMeta asks the apiserver for metadata only.
    watcher::watcher(
        Api::<PartialObjectMeta<Node>>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .boxed()
}

/// One node as the store keeps it: its name and the labels in `keys`
/// (a `v1/Node` by the watch it came from).
#[must_use]
pub fn reduce(node: PartialObjectMeta<Node>, keys: &BTreeSet<Arc<str>>) -> ObjectText {
    let labels: serde_json::Map<String, serde_json::Value> = node
        .metadata
        .labels
        .into_iter()
        .flatten()
        .filter(|(key, _)| keys.contains(key.as_str()))
        .map(|(key, value)| (key, serde_json::Value::String(value)))
        .collect();
    let value = serde_json::json!({"metadata": {"name": &node.metadata.name, "labels": labels}});
    let metadata = ObjectMeta {
        name: node.metadata.name,
        resource_version: node.metadata.resource_version,
        ..ObjectMeta::default()
    };
    ObjectText::built(metadata, &value)
}

struct State {
    client: Client,
    wanted: watch::Receiver<LabelKeys>,
    covered: CoveredKeys,
    /// The keys the current watch keeps.
    listing: LabelKeys,
    /// The current watch has not finished its first list yet.
    listing_in_progress: bool,
    inner: Inner,
}

/// Node events, reduced to the wanted labels, restarting the watch when the
/// wanted keys grow beyond what the current listing kept.
pub fn stream(
    client: Client,
    wanted: watch::Receiver<LabelKeys>,
    covered: CoveredKeys,
) -> impl futures::Stream<Item = Result<Event<ObjectText>, watcher::Error>> + Send {
    use futures::StreamExt;
    let listing = wanted.borrow().clone();
    let state = State {
        inner: start(&client),
        client,
        wanted,
        covered,
        listing,
        listing_in_progress: true,
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            tokio::select! {
                biased;
                Ok(()) = state.wanted.changed() => {
                    let wanted = state.wanted.borrow_and_update().clone();
                    if !wanted.is_subset(&state.listing) {
                        tracing::info!(keys = ?wanted, "a VPA names a new node label key; listing Nodes again");
                        state.listing = wanted;
                        state.inner = start(&state.client);
                        state.listing_in_progress = true;
                    }
                }
                event = state.inner.next() => {
                    let event = event?;
                    let keys = &state.listing;
                    let event = event.map(|e| match e {
                        Event::Init => Event::Init,
                        Event::InitDone => Event::InitDone,
                        Event::InitApply(node) => Event::InitApply(reduce(node, keys)),
                        Event::Apply(node) => Event::Apply(reduce(node, keys)),
                        Event::Delete(node) => Event::Delete(reduce(node, keys)),
                    });
                    if state.listing_in_progress && matches!(event, Ok(Event::InitDone)) {
                        state.listing_in_progress = false;
                        state.covered.set(state.listing.clone());
                    }
                    return Some((event, state));
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::ResourceExt;
    use std::collections::BTreeMap;

    #[test]
    fn a_node_is_kept_as_its_name_and_the_wanted_labels_only() {
        let node = PartialObjectMeta::<Node> {
            types: None,
            metadata: ObjectMeta {
                name: Some("n1".into()),
                labels: Some(BTreeMap::from([
                    (
                        "topology.kubernetes.io/zone".to_owned(),
                        "zone-a".to_owned(),
                    ),
                    ("kubernetes.io/os".to_owned(), "linux".to_owned()),
                ])),
                annotations: Some(BTreeMap::from([("big".to_owned(), "x".repeat(1000))])),
                resource_version: Some("7".into()),
                ..ObjectMeta::default()
            },
            _phantom: std::marker::PhantomData,
        };
        let keys = BTreeSet::from([Arc::from("topology.kubernetes.io/zone")]);
        let kept = reduce(node, &keys);
        assert_eq!(
            (kept.text(), kept.name(), kept.resource_version()),
            (
                r#"{"metadata":{"labels":{"topology.kubernetes.io/zone":"zone-a"},"name":"n1"}}"#,
                "n1",
                Some("7".to_owned())
            )
        );
    }
}
