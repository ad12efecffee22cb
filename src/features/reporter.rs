//! The task a long-running component starts to report, per Feature it
//! consults, what it observed ([`super::report`]): it watches those
//! Features and applies its own `status.uses` entry on change and on
//! heartbeat. Owns only its entry (server-side apply, one field manager
//! per instance); must not touch any other field of the Feature.

use super::cluster::feature_resource;
use super::report::{self, Report};
use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use serde_json::Value;
use std::time::Duration;
use tokio::task::JoinHandle;

/// What one component instance reports, and how often.
#[derive(Debug, Clone)]
pub struct ReporterConfig {
    /// `webhook`, `recommender`, `updater`, `balloon-controller`.
    pub component: String,
    /// The pod name.
    pub instance: String,
    /// The Features it consults, as `(namespace, name)`.
    pub features: Vec<(String, String)>,
    /// The longest time between two writes of an unchanged entry.
    pub heartbeat: Duration,
    /// Written into the entry: how long after its last write the
    /// controller ignores it. Well over `heartbeat`.
    pub expiry: Duration,
}

/// Reports on every configured Feature until the handles are aborted (or
/// dropped with the runtime). A Feature that does not exist is reported on
/// once it is created.
#[must_use]
pub fn spawn(client: &Client, config: &ReporterConfig) -> Vec<JoinHandle<()>> {
    tracing::info!(
        component = %config.component,
        instance = %config.instance,
        features = %feature_words(&config.features),
        heartbeat_seconds = config.heartbeat.as_secs(),
        expiry_seconds = config.expiry.as_secs(),
        "reporting in the Features' status.uses"
    );
    config
        .features
        .iter()
        .map(|(namespace, name)| {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), namespace, &feature_resource());
            let one = One {
                api,
                namespace: namespace.clone(),
                name: name.clone(),
                config: config.clone(),
            };
            tokio::spawn(one.run())
        })
        .collect()
}

/// `kube-system/vpa-node-scope, team/fancy`: the Features as a person
/// names them.
fn feature_words(features: &[(String, String)]) -> String {
    features
        .iter()
        .map(|(namespace, name)| format!("{namespace}/{name}"))
        .collect::<Vec<_>>()
        .join(", ")
}

struct One {
    api: Api<DynamicObject>,
    namespace: String,
    name: String,
    config: ReporterConfig,
}

impl One {
    async fn run(self) {
        let watch = watcher::Config::default().fields(&format!("metadata.name={}", self.name));
        let mut events = watcher(self.api.clone(), watch).default_backoff().boxed();
        // The Feature as last seen, and its entries merged with this
        // instance's own writes since.
        let mut latest: Option<Value> = None;
        let mut known: Vec<Report> = Vec::new();
        let tick = (self.config.heartbeat / 10).max(Duration::from_secs(1));
        let mut ticks = tokio::time::interval(tick);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut retry_at = tokio::time::Instant::now();
        // Whether the current (re-)list has delivered the Feature.
        let mut listed = false;
        loop {
            tokio::select! {
                event = events.next() => match event {
                    Some(Ok(Event::Apply(object) | Event::InitApply(object))) => {
                        if let Ok(value) = serde_json::to_value(&object) {
                            known = report::reports(&value);
                            latest = Some(value);
                            listed = true;
                        }
                    }
                    Some(Ok(Event::Delete(_))) => {
                        latest = None;
                        known.clear();
                    }
                    Some(Ok(Event::Init)) => listed = false,
                    // A re-list without the Feature: deleted meanwhile.
                    Some(Ok(Event::InitDone)) if !listed => {
                        latest = None;
                        known.clear();
                    }
                    Some(Ok(Event::InitDone)) => {}
                    Some(Err(error)) => {
                        tracing::debug!(feature = %self.label(), %error, "watch error; backing off");
                        continue;
                    }
                    None => return,
                },
                _ = ticks.tick() => {}
            }
            let Some(feature) = &latest else { continue };
            if tokio::time::Instant::now() < retry_at {
                continue;
            }
            let now = Timestamp::from_second(Timestamp::now().as_second())
                .unwrap_or_else(|_| Timestamp::now());
            let observed = Report::observe(
                &self.config.component,
                &self.config.instance,
                feature,
                now,
                self.config.expiry,
            );
            if !report::due(&known, &observed, self.config.heartbeat) {
                continue;
            }
            match self.write(&observed).await {
                Ok(()) => {
                    tracing::debug!(feature = %self.label(), state = ?observed.observed_state, "reported");
                    known = report::merge(&known, &observed);
                }
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    // Deleted since the watch saw it: its next creation
                    // comes through the watch.
                    latest = None;
                    known.clear();
                }
                Err(error) => {
                    tracing::warn!(feature = %self.label(), %error, "report not written; retrying");
                    retry_at = tokio::time::Instant::now() + tick.max(Duration::from_secs(5));
                }
            }
        }
    }

    async fn write(&self, observed: &Report) -> Result<(), kube::Error> {
        let body = report::apply_body(&self.namespace, &self.name, observed);
        let params = PatchParams::apply(&report::field_manager(
            &self.config.component,
            &self.config.instance,
        ))
        .force();
        self.api
            .patch_status(&self.name, &params, &Patch::Apply(&body))
            .await
            .map(drop)
    }

    fn label(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// `namespace/name` pairs from `--report-features` values; a bare name is
/// in `kube-system`, where nodescope's own Features live.
///
/// # Errors
/// An empty name, or more than one `/`, quoted.
pub fn parse_feature(text: &str) -> Result<(String, String), String> {
    let (namespace, name) = match text.split_once('/') {
        Some((namespace, name)) => (namespace, name),
        None => ("kube-system", text),
    };
    if namespace.is_empty() || name.is_empty() || name.contains('/') {
        return Err(format!(
            "{text:?} is not a Feature such as kube-system/vpa-node-scope or vpa-node-scope"
        ));
    }
    Ok((namespace.to_owned(), name.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_names_features_as_namespace_slash_name() {
        let features = [
            ("kube-system".to_owned(), "vpa-node-scope".to_owned()),
            ("team".to_owned(), "fancy".to_owned()),
        ];
        assert_eq!(
            feature_words(&features),
            "kube-system/vpa-node-scope, team/fancy"
        );
    }

    #[test]
    fn features_are_named_with_or_without_their_namespace() {
        assert_eq!(
            parse_feature("vpa-node-scope"),
            Ok(("kube-system".to_owned(), "vpa-node-scope".to_owned()))
        );
        assert_eq!(
            parse_feature("team-a/fancy"),
            Ok(("team-a".to_owned(), "fancy".to_owned()))
        );
        for bad in ["", "a/", "/b", "a/b/c"] {
            assert_eq!(
                parse_feature(bad),
                Err(format!(
                    "{bad:?} is not a Feature such as kube-system/vpa-node-scope or vpa-node-scope"
                ))
            );
        }
    }
}
