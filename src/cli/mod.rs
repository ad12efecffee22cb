//! The command line, parsed once into typed configuration.
//!
//! Nothing outside this module reads flags or environment variables; each
//! subcommand gets a plain struct and runs from it. Each command family
//! keeps its flags and its run in a folder of its own; what several
//! families share is in [`kubectl`] (kubectl's flags and printers),
//! [`flags`] (the value parsers, and the flags several commands take) and
//! [`running`] (what the long-running commands share), defined once so
//! that a flag reads the same in every command.

pub mod balloon;
pub mod dry_run;
pub mod features;
pub mod flags;
pub mod kubectl;
pub mod out;
pub mod recommend;
pub mod running;
mod serve;
pub mod test_suite;
pub mod update;
pub mod version;

// The paths the binary and the tests name, kept as they were before the
// families had folders.
pub use dry_run::{run_dry_run, DryRunArgs, DryRunFormat, Operation};
pub use features::run_features;
pub use flags::missing_node::MissingNode;
pub use kubectl::cluster;
pub use serve::{run_certs, run_serve, CertsArgs, ServeArgs};
pub use test_suite::{run_test, TestArgs, TestFormat};

use clap::{Parser, Subcommand, ValueEnum};

/// nodescope: admission webhooks and a CEL policy bundle for node-level
/// resource control (per-node VPA for DaemonSets, balloon pods, feature lifecycle).
#[derive(Debug, Parser)]
#[command(name = "nodescope", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTPS admission webhook server.
    Serve(Box<ServeArgs>),
    /// Generate a self-signed CA and a serving certificate.
    Certs(CertsArgs),
    /// Show what the webhook and the policy bundle would say about manifests,
    /// offline. Exit 0: all admitted; 1: any denied; 2: bad input or nothing to
    /// check; 3: internal error.
    DryRun(Box<DryRunArgs>),
    /// Run policy test suites (YAML files of cases with expected results).
    /// Exit 0: all passed; 1: any failed; 2: bad input or nothing to test; 3:
    /// internal error.
    Test(TestArgs),
    /// KEP-3920 Features: list them (namespace, name, desired, state, uses
    /// left, age of the last transition), `uses NAME` for every object that
    /// keeps one from turning off, `cleanup NAME --dry-run` for what turning
    /// it off clears (from the cluster, or offline from manifests), or run
    /// the lifecycle `controller`.
    Features(Box<features::FeaturesArgs>),
    /// The scoped recommender: writes status.recommendationGroups (one
    /// recommendation per scope value) and the DaemonSet-wide
    /// status.recommendation of scoped DaemonSet VPAs, with upstream VPA's
    /// algorithm. Offline (--store file: --metrics file:, or --demo) it
    /// replays recorded PodMetrics and prints the VPAs with that status.
    Recommend(Box<recommend::RecommendArgs>),
    /// The per-node updater: brings running pods of scoped DaemonSet VPAs
    /// to their node's recommendation group, in place where the updateMode
    /// allows, with upstream VPA updater's rules and limits. `--plan`
    /// prints one pass and changes nothing.
    Update(Box<update::UpdateArgs>),
    /// Node resizing by balloon (KEP-5620): `status` of every node with a
    /// balloon (from the cluster, or offline from --store file:), `set` a
    /// Node's usable size, or run the `controller` that resizes balloons in
    /// place (an upsize the node's other pods would not fit under is
    /// refused, never evicted for).
    Balloon(Box<balloon::BalloonArgs>),
    /// Print the version, git commit and build date (`-o json|yaml` as
    /// `kubectl version -o`).
    Version(version::VersionArgs),
    /// Print a shell completion script: `source <(nodescope completion
    /// bash)`.
    Completion(version::CompletionArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One line per event for people (colour on a terminal).
    Text,
    /// One JSON object per event for log collectors.
    Json,
}

impl Cli {
    /// The command line, or exit 2 with clap's message; a bad value that
    /// came from an environment variable is blamed on the variable.
    #[must_use]
    pub fn parse_or_exit() -> Self {
        let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        match <Self as Parser>::try_parse_from(&args) {
            Ok(cli) => cli,
            Err(error) => {
                let command = <Self as clap::CommandFactory>::command();
                if let Some(message) =
                    flags::environment::blame_environment(&error, &command, &args)
                {
                    eprint!("{message}");
                    std::process::exit(2);
                }
                error.exit()
            }
        }
    }
}

/// Installs the global tracing subscriber; call once, at start.
pub fn init_logging(format: LogFormat, level: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
