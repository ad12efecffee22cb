//! How every command that talks to a cluster reaches it, and how it says
//! that it could not: kubectl's `--kubeconfig` and `--context`, one
//! function that builds the client, and one mapping of a client error to
//! the words kubectl prints, so that an operator who knows kubectl reads
//! nodescope's failures without learning new ones.

use clap::Args;
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use std::error::Error as StdError;
use std::fmt;
use std::path::PathBuf;

/// `--kubeconfig` and `--context`, flattened into every command that
/// talks to a cluster.
#[derive(Debug, Args, Clone, Default, PartialEq, Eq)]
pub struct ClusterFlags {
    /// The kubeconfig file, as kubectl's flag. Without it, `$KUBECONFIG`
    /// (a list of files, merged), else ~/.kube/config, else the pod's
    /// service account.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use; its current-context when omitted.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

/// Whether the client retries what the server asks to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// kube's default: 429s and 503s are retried, for minutes.
    Default,
    /// No retry: a refusal (a PodDisruptionBudget's 429) is an answer that
    /// a pass reports and the next pass tries again; retrying would hold
    /// the pass.
    Off,
}

/// Where a client points, for messages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    /// `host:port` of the API server, as kubectl names it; empty when no
    /// configuration was loaded.
    pub server: String,
    /// Which kubeconfig was read; `None` for the pod's service account.
    pub kubeconfig: Option<String>,
    /// The context used.
    pub context: Option<String>,
}

impl Target {
    /// ` (kubeconfig: PATH; context: NAME)`: what to check when the
    /// server does not answer.
    fn hint(&self) -> String {
        match &self.kubeconfig {
            None => " (in-cluster service account)".to_owned(),
            Some(source) => match &self.context {
                Some(context) => format!(" (kubeconfig: {source}; context: {context})"),
                None => format!(" (kubeconfig: {source})"),
            },
        }
    }
}

/// A client and where it points.
#[derive(Clone)]
pub struct Connection {
    pub client: kube::Client,
    pub target: Target,
}

impl Connection {
    /// A failure of a request of this client, in kubectl's words.
    #[must_use]
    pub fn error(&self, error: &kube::Error) -> ClusterError {
        explain(error, &self.target)
    }
}

/// A failure talking to the cluster, worded as kubectl words it. The one
/// place those words are.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ClusterError {
    /// No client configuration: no kubeconfig (nor service account), an
    /// unreadable one, or a context it does not have.
    #[error("cannot load the kubeconfig: {cause}{}", target.hint())]
    Config { cause: String, target: Target },
    /// The server answered with a failure Status.
    #[error("Error from server{}: {message}", reason_words(reason))]
    Api {
        code: u16,
        reason: String,
        message: String,
    },
    /// Nothing listens where the kubeconfig points.
    #[error("The connection to the server {} was refused - did you specify the right host or port?{}", target.server, target.hint())]
    Refused { target: Target },
    /// The server could not be reached otherwise (DNS, TLS, a timeout).
    #[error("Unable to connect to the server {}: {cause}{}", target.server, target.hint())]
    Unreachable { cause: String, target: Target },
    /// Anything else the client reports (an answer it cannot read).
    #[error("{0}")]
    Other(String),
}

fn reason_words(reason: &str) -> String {
    if reason.is_empty() {
        String::new()
    } else {
        format!(" ({reason})")
    }
}

impl ClusterError {
    /// The API error kubectl prints for an object that is not there:
    /// `Error from server (NotFound): nodes "x" not found`. Offline stores
    /// use it too, so that a name is missing in the same words.
    #[must_use]
    pub fn not_found(resource: &str, name: &str) -> Self {
        Self::Api {
            code: 404,
            reason: "NotFound".to_owned(),
            message: format!("{resource} {name:?} not found"),
        }
    }

    /// Whether the server said the object is not there.
    #[must_use]
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Api { code: 404, .. })
    }
}

/// Maps a client error (or any error with one in its chain) to kubectl's
/// words, naming `target` where the server did not answer.
#[must_use]
pub fn explain(error: &(dyn StdError + 'static), target: &Target) -> ClusterError {
    let mut chain: Option<&(dyn StdError + 'static)> = Some(error);
    let mut kube_error = None;
    let mut refused = false;
    let mut deepest = error;
    while let Some(e) = chain {
        if kube_error.is_none() {
            kube_error = e.downcast_ref::<kube::Error>();
        }
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            refused = true;
        }
        deepest = e;
        chain = e.source();
    }
    if refused {
        return ClusterError::Refused {
            target: target.clone(),
        };
    }
    match kube_error {
        Some(kube::Error::Api(status)) => ClusterError::Api {
            code: status.code,
            reason: status.reason.clone(),
            message: if status.message.is_empty() {
                format!("the server answered {}", status.code)
            } else {
                status.message.clone()
            },
        },
        Some(kube::Error::HyperError(_) | kube::Error::Service(_)) => ClusterError::Unreachable {
            cause: deepest.to_string(),
            target: target.clone(),
        },
        Some(kube::Error::InferConfig(_) | kube::Error::InferKubeconfig(_)) => {
            ClusterError::Config {
                cause: deepest.to_string(),
                target: target.clone(),
            }
        }
        _ => ClusterError::Other(error.to_string()),
    }
}

/// What a kubeconfig load failure says, without kube's Debug quoting.
fn config_cause(error: &KubeconfigError) -> String {
    match error {
        KubeconfigError::ReadConfig(io, path) => format!(
            "{}: {} - give one with --kubeconfig or $KUBECONFIG",
            path.display(),
            crate::input::sources::reason(io)
        ),
        KubeconfigError::FindPath => {
            "no home directory for ~/.kube/config - give one with --kubeconfig or $KUBECONFIG"
                .to_owned()
        }
        KubeconfigError::LoadContext(name) => format!("no context {name:?} in it"),
        KubeconfigError::CurrentContextNotSet => {
            "it sets no current-context: give one with --context".to_owned()
        }
        other => other.to_string(),
    }
}

/// `host:port` of a cluster URL, as kubectl's messages name the server.
fn server_of(config: &kube::Config) -> String {
    let url = &config.cluster_url;
    url.authority()
        .map_or_else(|| url.to_string(), ToString::to_string)
}

impl ClusterFlags {
    /// Which kubeconfig the flags and the environment name, for messages.
    fn source(&self) -> String {
        if let Some(path) = &self.kubeconfig {
            return path.display().to_string();
        }
        match std::env::var("KUBECONFIG") {
            Ok(value) if !value.is_empty() => format!("$KUBECONFIG={value}"),
            _ => "~/.kube/config".to_owned(),
        }
    }

    /// The client configuration: `--kubeconfig` (read as kube's
    /// `Kubeconfig::read_from`) or, without it, `$KUBECONFIG` and
    /// ~/.kube/config, at `--context` or the current one; with neither
    /// flag, what `Config::infer` finds (a kubeconfig, else the pod's
    /// service account).
    ///
    /// # Errors
    /// No kubeconfig nor service account, an unreadable kubeconfig, or a
    /// context it does not have.
    pub async fn config(&self) -> Result<(kube::Config, Target), ClusterError> {
        let source = self.source();
        let failed = |cause: String, context: Option<String>| ClusterError::Config {
            cause,
            target: Target {
                server: String::new(),
                kubeconfig: Some(source.clone()),
                context,
            },
        };
        let read = match &self.kubeconfig {
            Some(path) => Kubeconfig::read_from(path),
            None => Kubeconfig::read(),
        };
        let kubeconfig = match read {
            Ok(kubeconfig) => kubeconfig,
            Err(error) if self.kubeconfig.is_some() || self.context.is_some() => {
                return Err(failed(config_cause(&error), self.context.clone()));
            }
            Err(error) => {
                // No flag: kube's own inference, which falls back to the
                // pod's service account.
                let config = kube::Config::infer()
                    .await
                    .map_err(|_| failed(config_cause(&error), None))?;
                let target = Target {
                    server: server_of(&config),
                    kubeconfig: None,
                    context: None,
                };
                return Ok((config, target));
            }
        };
        let context = self
            .context
            .clone()
            .or_else(|| kubeconfig.current_context.clone());
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|e| failed(config_cause(&e), context.clone()))?;
        let target = Target {
            server: server_of(&config),
            kubeconfig: Some(source),
            context,
        };
        Ok((config, target))
    }

    /// The client of a command: every `Client::try_default` and
    /// `Config::infer` of the commands is this.
    ///
    /// # Errors
    /// As [`ClusterFlags::config`], or a configuration the client cannot
    /// use (a certificate it cannot read).
    pub async fn connect(&self, retry: Retry) -> Result<Connection, ClusterError> {
        self.connect_paced(
            retry,
            &crate::pace::PaceFlags {
                kube_api_qps: 0.0,
                ..crate::pace::PaceFlags::default()
            },
        )
        .await
    }

    /// [`ClusterFlags::connect`], with every request paced by `pace`
    /// (`--kube-api-qps`, `--kube-api-burst`): the controllers' client.
    ///
    /// # Errors
    /// As [`ClusterFlags::connect`].
    pub async fn connect_paced(
        &self,
        retry: Retry,
        pace: &crate::pace::PaceFlags,
    ) -> Result<Connection, ClusterError> {
        let (mut config, target) = self.config().await?;
        if retry == Retry::Off {
            config.default_retry = false;
        }
        let client = pace.client(config).map_err(|e| explain(&e, &target))?;
        Ok(Connection { client, target })
    }
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target {
            server: "127.0.0.1:1".into(),
            kubeconfig: Some("/tmp/kc".into()),
            context: Some("dev".into()),
        }
    }

    #[test]
    fn a_status_reads_as_kubectl_prints_it() {
        let status =
            kube::core::Status::failure("nodes \"x\" not found", "NotFound").with_code(404);
        let error = kube::Error::Api(Box::new(status));
        let words = explain(&error, &target());
        assert_eq!(
            words.to_string(),
            "Error from server (NotFound): nodes \"x\" not found"
        );
        assert!(words.is_not_found());
        assert_eq!(words, ClusterError::not_found("nodes", "x"));
    }

    #[test]
    fn a_refused_connection_names_the_server_and_the_kubeconfig() {
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(
            explain(&io, &target()).to_string(),
            "The connection to the server 127.0.0.1:1 was refused - did you specify the right \
             host or port? (kubeconfig: /tmp/kc; context: dev)"
        );
        let pod = Target {
            kubeconfig: None,
            ..target()
        };
        assert!(explain(&io, &pod)
            .to_string()
            .ends_with("port? (in-cluster service account)"));
    }
}
