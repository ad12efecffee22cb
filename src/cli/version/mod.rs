//! `nodescope version` (kubectl's shape: the version, the git commit and
//! the build date, stamped by build.rs) and `nodescope completion SHELL`
//! ([`completion`]): what the binary says about itself rather than about a
//! cluster.

pub mod completion;

pub use completion::{run_completion, CompletionArgs, Shell};

use clap::{Args, ValueEnum};
use serde::Serialize;
use std::io::Write;

/// `nodescope version`.
#[derive(Debug, Args, Clone)]
pub struct VersionArgs {
    /// `json` or `yaml` for scripts, as `kubectl version -o`; three lines
    /// for people when omitted.
    #[arg(short = 'o', long = "output", value_enum)]
    pub output: Option<VersionFormat>,
}

/// `-o` of `version`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum VersionFormat {
    Json,
    Yaml,
}

/// What `version` reports, under `clientVersion` as kubectl's does.
#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Info {
    pub major: &'static str,
    pub minor: &'static str,
    pub git_version: String,
    pub git_commit: &'static str,
    pub build_date: &'static str,
    pub platform: String,
}

/// This binary's version, commit and build date.
#[must_use]
pub fn info() -> Info {
    Info {
        major: env!("CARGO_PKG_VERSION_MAJOR"),
        minor: env!("CARGO_PKG_VERSION_MINOR"),
        git_version: format!("v{}", env!("CARGO_PKG_VERSION")),
        git_commit: env!("NODESCOPE_GIT_COMMIT"),
        build_date: env!("NODESCOPE_BUILD_DATE"),
        platform: format!(
            "{}/{}",
            std::env::consts::OS,
            go_arch(std::env::consts::ARCH, cfg!(target_endian = "little"))
        ),
    }
}

/// Rust's name of an architecture as Go's `GOARCH` spells it, so that
/// `platform` reads as kubectl's (`linux/amd64`, not `linux/x86_64`). A name
/// Go has no other word for is kept; Go names little-endian POWER and MIPS
/// apart (`ppc64le`, `mips64le`), where Rust names the endianness elsewhere.
#[must_use]
pub fn go_arch(rust: &str, little_endian: bool) -> &str {
    match (rust, little_endian) {
        ("x86_64", _) => "amd64",
        ("x86", _) => "386",
        ("aarch64", _) => "arm64",
        ("loongarch64", _) => "loong64",
        ("powerpc64", true) => "ppc64le",
        ("powerpc64", false) => "ppc64",
        ("mips64", true) => "mips64le",
        ("mips", true) => "mipsle",
        (other, _) => other,
    }
}

/// Writes the version as `-o` asks.
///
/// # Errors
/// When `out` fails.
pub fn run_version(args: &VersionArgs, out: &mut impl Write) -> Result<(), String> {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Report {
        client_version: Info,
    }
    let info = info();
    let text = match args.output {
        None => format!(
            "Version: {}\nGit commit: {}\nBuild date: {}\n",
            info.git_version, info.git_commit, info.build_date
        ),
        Some(VersionFormat::Json) => {
            serde_json::to_string_pretty(&Report {
                client_version: info,
            })
            .map_err(|e| e.to_string())?
                + "\n"
        }
        Some(VersionFormat::Yaml) => serde_saphyr::to_string(&Report {
            client_version: info,
        })
        .map_err(|e| e.to_string())?,
    };
    out.write_all(text.as_bytes())
        .map_err(|e| format!("writing the output: {e}"))
}

#[cfg(test)]
mod tests {
    use super::go_arch;

    #[test]
    fn architectures_are_named_as_go_names_them() {
        assert_eq!(go_arch("x86_64", true), "amd64");
        assert_eq!(go_arch("aarch64", true), "arm64");
        assert_eq!(go_arch("x86", true), "386");
        assert_eq!(go_arch("powerpc64", true), "ppc64le");
        assert_eq!(go_arch("powerpc64", false), "ppc64");
        assert_eq!(go_arch("arm", true), "arm");
        assert_eq!(go_arch("s390x", false), "s390x");
    }
}
