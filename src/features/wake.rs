//! What wakes the controller between periods: a change to a Feature, a
//! gating policy or binding, or any object of the kinds the last pass
//! listed. Each change only triggers a pass; the pass re-reads everything,
//! so a missed or doubled event costs nothing but time. That a change
//! happened is all a watch has to say, so the watches carry metadata only:
//! a pod's full object, fetched for every churning pod, would be thrown
//! away.

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::discovery::ApiResource;
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Watches that wake the controller.
pub struct Wakers {
    client: Client,
    notify: Arc<Notify>,
    /// Always watched: Features, policies, bindings.
    _fixed: Vec<JoinHandle<()>>,
    /// The kinds the last pass listed, by `group/version/plural`.
    listed: BTreeMap<String, JoinHandle<()>>,
}

impl Wakers {
    /// Starts the fixed watches.
    #[must_use]
    pub fn new(client: &Client) -> Self {
        let notify = Arc::new(Notify::new());
        let admission = |plural: &str, kind: &str| ApiResource {
            group: "admissionregistration.k8s.io".to_owned(),
            version: "v1".to_owned(),
            api_version: "admissionregistration.k8s.io/v1".to_owned(),
            kind: kind.to_owned(),
            plural: plural.to_owned(),
        };
        let fixed = [
            super::cluster::feature_resource(),
            admission("validatingadmissionpolicies", "ValidatingAdmissionPolicy"),
            admission(
                "validatingadmissionpolicybindings",
                "ValidatingAdmissionPolicyBinding",
            ),
        ]
        .into_iter()
        .map(|r| spawn(client, r, &notify))
        .collect();
        Wakers {
            client: client.clone(),
            notify,
            _fixed: fixed,
            listed: BTreeMap::new(),
        }
    }

    /// Watches exactly `resources` from now on (the kinds a pass listed).
    pub fn watch(&mut self, resources: &[ApiResource]) {
        let key = |r: &ApiResource| format!("{}/{}/{}", r.group, r.version, r.plural);
        let wanted: BTreeMap<String, &ApiResource> =
            resources.iter().map(|r| (key(r), r)).collect();
        self.listed.retain(|k, task| {
            let keep = wanted.contains_key(k);
            if !keep {
                task.abort();
            }
            keep
        });
        for (k, resource) in wanted {
            if !self.listed.contains_key(&k) {
                let task = spawn(&self.client, resource.clone(), &self.notify);
                self.listed.insert(k, task);
            }
        }
    }

    /// Resolves at the next change seen by any watch.
    pub async fn changed(&self) {
        self.notify.notified().await;
    }
}

impl Drop for Wakers {
    fn drop(&mut self) {
        for task in self._fixed.iter().chain(self.listed.values()) {
            task.abort();
        }
    }
}

/// A metadata-only watch of every object of `resource` that wakes on each
/// change; the initial listing is not a change (the pass that asked for the
/// watch has just read it). Errors back off and re-watch.
fn spawn(client: &Client, resource: ApiResource, notify: &Arc<Notify>) -> JoinHandle<()> {
    // `Api<PartialObjectMeta<_>>` lists and watches as
    // PartialObjectMetadata (kube's `metadata_watcher`, deprecated in
    // favour of this).
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client.clone(), &resource);
    let notify = Arc::clone(notify);
    tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::Apply(_) | Event::Delete(_)) => notify.notify_one(),
                Ok(_) => {}
                Err(error) => {
                    tracing::debug!(resource = %resource.plural, %error, "watch error; backing off")
                }
            }
        }
    })
}
