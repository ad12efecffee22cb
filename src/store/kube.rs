//! `--store kube`: cluster state from API-server watches.
//!
//! One watcher per kind feeds [`WatchState`], which keeps the current objects
//! and rebuilds a [`Snapshot`] after each burst of events. A broken watch
//! keeps the last snapshot serving while the watcher reconnects with backoff.
//! [`WatchState`] is plain data, so recorded watch events test it without a
//! cluster.

use super::nodes::{self, CoveredKeys, LabelKeys};
use super::{Entry, Interner, Snapshot};
use crate::json::text::ObjectText;
use crate::metrics::StoreMetrics;
use futures::{stream, StreamExt};
use kube::api::{Api, ApiResource, GroupVersionKind};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// One kind nodescope watches, optionally limited to a namespace.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WatchedKind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespace: Option<String>,
}

impl WatchedKind {
    /// Whether a CRD defines this kind, which a cluster may lack (the VPA
    /// CRD on a balloon-only install, the Feature CRD beside upstream VPA,
    /// any CRD during an upgrade): then there are none of it, and the store
    /// still syncs.
    #[must_use]
    pub fn is_custom(&self) -> bool {
        self.group.contains('.')
    }
}

impl WatchedKind {
    /// `group/version`, or `version` for the core group.
    #[must_use]
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    fn api_resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(self.group, self.version, self.kind),
            self.plural,
        )
    }
}

/// The kinds `serve --store kube` watches: VPAs and LimitRanges (all
/// namespaces or `namespace`), Namespaces, Features, Nodes (metadata only,
/// see [`nodes`]), and ConfigMaps in the namespaces policy params live in.
pub fn default_kinds(namespace: Option<&str>, param_namespaces: &[String]) -> Vec<WatchedKind> {
    let ns = namespace.map(str::to_owned);
    let mut kinds = vec![
        WatchedKind {
            group: "autoscaling.k8s.io",
            version: "v1",
            kind: "VerticalPodAutoscaler",
            plural: "verticalpodautoscalers",
            namespace: ns.clone(),
        },
        WatchedKind {
            group: "",
            version: "v1",
            kind: "LimitRange",
            plural: "limitranges",
            namespace: ns,
        },
        WatchedKind {
            group: "",
            version: "v1",
            kind: "Namespace",
            plural: "namespaces",
            namespace: None,
        },
        WatchedKind {
            group: "",
            version: "v1",
            kind: "Node",
            plural: "nodes",
            namespace: None,
        },
        WatchedKind {
            group: "featureflags.nodescope.dev",
            version: "v1alpha1",
            kind: "Feature",
            plural: "features",
            namespace: None,
        },
    ];
    for p in param_namespaces {
        kinds.push(WatchedKind {
            group: "",
            version: "v1",
            kind: "ConfigMap",
            plural: "configmaps",
            namespace: Some(p.clone()),
        });
    }
    kinds
}

type Key = (String, String); // namespace, name

/// The objects seen so far, per watched kind, following the watcher's
/// Init / InitApply / InitDone / Apply / Delete protocol.
///
/// Objects are kept converted ([`Entry`]): an event costs the conversion of
/// the one object it carries, and a new snapshot only re-indexes entries.
#[derive(Debug, Default)]
pub struct WatchState {
    current: HashMap<usize, BTreeMap<Key, Entry>>,
    /// Objects of a relist in progress; they replace `current` at InitDone.
    relisting: HashMap<usize, BTreeMap<Key, Entry>>,
    synced: Vec<bool>,
    interner: Interner,
    /// The label keys the Node listing kept; `None` when Nodes come whole.
    covered: Option<CoveredKeys>,
    /// Streams whose kind the apiserver does not serve (its CRD is not
    /// installed): synced with none, until a listing succeeds.
    absent: std::collections::HashSet<usize>,
}

fn key_of(object: &ObjectText) -> Key {
    (object.namespace().to_owned(), object.name().to_owned())
}

impl WatchState {
    /// State for `kinds` watched streams, none synced yet.
    #[must_use]
    pub fn new(kinds: usize) -> Self {
        Self {
            synced: vec![false; kinds],
            ..Self::default()
        }
    }

    /// Applies one event of stream `index`, which watches `kind`; returns
    /// whether state changed. An object is converted from its text here, so
    /// no tree of it outlives its event.
    pub fn apply(&mut self, index: usize, kind: &WatchedKind, event: Event<ObjectText>) -> bool {
        let entry = |object: &ObjectText, interner: &mut Interner| {
            Entry::from_text(object.text(), &kind.api_version(), kind.kind, interner)
        };
        match event {
            Event::Init => {
                self.relisting.insert(index, BTreeMap::new());
                false
            }
            Event::InitApply(object) => {
                let entry = entry(&object, &mut self.interner);
                self.relisting
                    .entry(index)
                    .or_default()
                    .insert(key_of(&object), entry);
                false
            }
            Event::InitDone => {
                let fresh = self.relisting.remove(&index).unwrap_or_default();
                self.current.insert(index, fresh);
                if let Some(s) = self.synced.get_mut(index) {
                    *s = true;
                }
                true
            }
            Event::Apply(object) => {
                let entry = entry(&object, &mut self.interner);
                self.current
                    .entry(index)
                    .or_default()
                    .insert(key_of(&object), entry);
                true
            }
            Event::Delete(object) => {
                self.current
                    .entry(index)
                    .or_default()
                    .remove(&key_of(&object));
                true
            }
        }
    }

    /// Stream `kind` cannot be listed because its kind is not served (404):
    /// it holds none of them and counts as synced. Returns whether this is
    /// news (the kind was there, or this is the first answer).
    pub fn absent(&mut self, kind: usize) -> bool {
        if !self.absent.insert(kind) {
            return false;
        }
        self.relisting.remove(&kind);
        self.current.insert(kind, BTreeMap::new());
        if let Some(s) = self.synced.get_mut(kind) {
            *s = true;
        }
        true
    }

    /// Stream `kind` answered again after [`Self::absent`]: returns whether
    /// it had been absent.
    pub fn present(&mut self, kind: usize) -> bool {
        self.absent.remove(&kind)
    }

    /// Every stream has finished its first list.
    #[must_use]
    pub fn synced(&self) -> bool {
        self.synced.iter().all(|s| *s)
    }

    /// Nodes arrive with only the labels in `covered` (see [`nodes`]).
    #[must_use]
    pub fn with_covered_keys(mut self, covered: CoveredKeys) -> Self {
        self.covered = Some(covered);
        self
    }

    /// A snapshot of everything currently known.
    #[must_use]
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::from_entries_covering(
            self.current.values().flat_map(BTreeMap::values),
            self.covered.as_ref().map(CoveredKeys::get),
        )
    }
}

/// Watches `kinds` and publishes a snapshot after each burst of changes;
/// calls `on_synced` once, after every kind's first full list.
pub async fn run(
    client: Client,
    kinds: Vec<WatchedKind>,
    metrics: StoreMetrics,
    publish: impl Fn(Arc<Snapshot>) + Send + 'static,
    on_synced: impl FnOnce() + Send + 'static,
) {
    let count = kinds.len();
    let (wanted, wanted_rx) = tokio::sync::watch::channel(LabelKeys::default());
    let covered = CoveredKeys::default();
    let state = WatchState::new(count).with_covered_keys(covered.clone());
    let streams = kinds.into_iter().enumerate().map(|(index, kind)| {
        let events = if (kind.group, kind.kind) == ("", "Node") {
            nodes::stream(client.clone(), wanted_rx.clone(), covered.clone()).boxed()
        } else {
            let resource = kind.api_resource();
            let api: Api<ObjectText> = match &kind.namespace {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            watcher::watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed()
        };
        events
            .map(move |event| (index, kind.clone(), event))
            .boxed()
    });
    let publish = move |snapshot: Arc<Snapshot>| {
        let keys: LabelKeys = Arc::new(snapshot.scope_label_keys());
        wanted.send_if_modified(|current| {
            let grew = *current != keys;
            if grew {
                *current = keys;
            }
            grew
        });
        publish(snapshot);
    };
    apply_events(
        stream::select_all(streams),
        state,
        metrics,
        publish,
        on_synced,
    )
    .await;
}

/// One watch event, tagged with the index and description of its stream.
pub type TaggedEvent = (
    usize,
    WatchedKind,
    Result<Event<ObjectText>, watcher::Error>,
);

/// The store's event loop, apart from the API client so recorded event
/// streams can drive it: applies events, coalesces bursts, publishes.
pub async fn apply_events(
    mut events: impl futures::Stream<Item = TaggedEvent> + Unpin,
    mut state: WatchState,
    metrics: StoreMetrics,
    publish: impl Fn(Arc<Snapshot>),
    on_synced: impl FnOnce(),
) {
    let mut on_synced = Some(on_synced);
    while let Some((index, kind, event)) = events.next().await {
        let mut changed = handle(&mut state, index, &kind, event, &metrics);
        // Coalesce a burst (a relist, a flurry of status updates) into one rebuild.
        while let Ok(Some((index, kind, event))) =
            tokio::time::timeout(Duration::from_millis(100), events.next()).await
        {
            changed |= handle(&mut state, index, &kind, event, &metrics);
        }
        if changed && state.synced() {
            let snapshot = state.snapshot();
            super::file::report_problems(&snapshot, "kube");
            // Ready once the Node listing also has every label key the VPAs
            // name (a new key starts a new listing; see `nodes`).
            let complete = snapshot.node_labels_complete();
            publish(Arc::new(snapshot));
            if complete {
                if let Some(f) = on_synced.take() {
                    tracing::info!("store synced with the API server");
                    f();
                }
            }
        }
    }
}

fn handle(
    state: &mut WatchState,
    index: usize,
    kind: &WatchedKind,
    event: Result<Event<ObjectText>, watcher::Error>,
    metrics: &StoreMetrics,
) -> bool {
    match event {
        Ok(event) => {
            if state.present(index) {
                tracing::info!(
                    kind = kind.kind,
                    group = kind.group,
                    "the kind is served now (its CRD was installed): watching it"
                );
            }
            state.apply(index, kind, event)
        }
        Err(error) if kind.is_custom() && is_not_served(&error) => {
            let news = state.absent(index);
            if news {
                tracing::info!(
                    kind = kind.kind,
                    group = kind.group,
                    "the kind is not served (no CRD): none of them, until its CRD is installed"
                );
            }
            news
        }
        Err(error) => {
            metrics.store_error("kube");
            tracing::warn!(%error, kind = kind.kind, "watch failed; serving the last snapshot while reconnecting");
            false
        }
    }
}

/// A list or watch answered 404: the apiserver does not serve the
/// resource (for a CRD kind, the CRD is not installed).
fn is_not_served(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status.code == 404,
        watcher::Error::WatchError(status) => status.code == 404,
        _ => false,
    }
}

#[cfg(test)]
#[path = "kube_tests.rs"]
mod tests;
