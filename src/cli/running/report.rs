//! The flags of every long-running component that reports, per Feature it
//! consults, what it observed ([`crate::features::reporter`]); one struct
//! flattened into each, so that the names and defaults are the same
//! everywhere.

use crate::cli::flags::parse_duration;
use crate::features::reporter::{self, ReporterConfig};
use clap::Args;
use std::time::Duration;

/// `--report-*`.
#[derive(Debug, Args, Clone)]
pub struct ReportFlags {
    /// Do not report in the Features' status.uses (the lifecycle
    /// controller then cannot wait for this instance's confirmation).
    #[arg(long, env = "NODESCOPE_NO_REPORT")]
    pub no_report: bool,
    /// The Features this component consults, as NAMESPACE/NAME or NAME (in
    /// kube-system); comma-separated or repeated. Each component's default
    /// is the Features it obeys.
    #[arg(long, env = "NODESCOPE_REPORT_FEATURES", value_delimiter = ',', value_parser = reporter::parse_feature)]
    pub report_features: Vec<(String, String)>,
    /// The longest time between two writes of an unchanged report: each
    /// instance writes one per Feature this often, and once more at each
    /// change it observes.
    #[arg(long, env = "NODESCOPE_REPORT_HEARTBEAT", default_value = "60s", value_parser = parse_duration)]
    pub report_heartbeat: Duration,
    /// How long after its last write a report is ignored, then removed, by
    /// the lifecycle controller: at least twice the heartbeat.
    #[arg(long, env = "NODESCOPE_REPORT_EXPIRY", default_value = "3m", value_parser = parse_duration)]
    pub report_expiry: Duration,
}

impl ReportFlags {
    /// The reporter of `component`'s `instance`, consulting `defaults`
    /// unless `--report-features` names others; `None` with `--no-report`.
    ///
    /// # Errors
    /// A heartbeat of less than a second, or an expiry shorter than two
    /// heartbeats.
    pub fn config(
        &self,
        component: &str,
        instance: &str,
        defaults: &[&str],
    ) -> Result<Option<ReporterConfig>, String> {
        if self.no_report {
            return Ok(None);
        }
        if self.report_heartbeat < Duration::from_secs(1) {
            return Err("--report-heartbeat must be at least 1s".to_owned());
        }
        if self.report_expiry < self.report_heartbeat * 2 {
            return Err(format!(
                "--report-expiry {}s must be at least twice --report-heartbeat {}s, so that one lost write does not expire a live instance",
                self.report_expiry.as_secs(),
                self.report_heartbeat.as_secs()
            ));
        }
        let features = if self.report_features.is_empty() {
            defaults
                .iter()
                .map(|f| reporter::parse_feature(f))
                .collect::<Result<_, _>>()?
        } else {
            self.report_features.clone()
        };
        Ok(Some(ReporterConfig {
            component: component.to_owned(),
            instance: instance.to_owned(),
            features,
            heartbeat: self.report_heartbeat,
            expiry: self.report_expiry,
        }))
    }
}

/// The instance name a report carries: `flag` when it was set (`--instance`
/// or `POD_NAME`, the pod name in a cluster), else the host name, else
/// `flag`'s default.
#[must_use]
pub fn instance(flag: &str, default: &str) -> String {
    if flag != default && !flag.is_empty() {
        return flag.to_owned();
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| default.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        report: ReportFlags,
    }

    fn parse(args: &[&str]) -> Result<ReportFlags, String> {
        Flags::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
            .map(|f| f.report)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn by_default_a_component_reports_on_its_own_features_every_minute() {
        let flags = parse(&[]).unwrap_or_else(|e| panic!("{e}"));
        let config = flags
            .config("webhook", "pod-a", &["vpa-node-scope", "balloon-pods"])
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("no reporter"));
        assert_eq!(
            config.features,
            [
                ("kube-system".to_owned(), "vpa-node-scope".to_owned()),
                ("kube-system".to_owned(), "balloon-pods".to_owned())
            ]
        );
        assert_eq!(config.heartbeat, Duration::from_secs(60));
        assert_eq!(config.expiry, Duration::from_secs(180));
        assert_eq!(
            (config.component.as_str(), config.instance.as_str()),
            ("webhook", "pod-a")
        );
    }

    #[test]
    fn the_features_and_times_are_flags_and_an_expiry_under_two_heartbeats_is_refused() {
        let flags = parse(&[
            "--report-features=team/fancy,other",
            "--report-heartbeat=2s",
            "--report-expiry=4s",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let config = flags.config("recommender", "r", &["vpa-node-scope"]);
        assert_eq!(
            config.map(|c| c.map(|c| c.features)),
            Ok(Some(vec![
                ("team".to_owned(), "fancy".to_owned()),
                ("kube-system".to_owned(), "other".to_owned())
            ]))
        );
        let short = parse(&["--report-heartbeat=60s", "--report-expiry=90s"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            short.config("webhook", "a", &[]).map(|c| c.is_some()),
            Err("--report-expiry 90s must be at least twice --report-heartbeat 60s, so that one lost write does not expire a live instance".to_owned())
        );
        let off = parse(&["--no-report"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            off.config("webhook", "a", &[]).map(|c| c.is_some()),
            Ok(false)
        );
        assert!(parse(&["--report-features=a/b/c"]).is_err());
    }
}
