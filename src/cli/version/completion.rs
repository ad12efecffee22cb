//! `nodescope completion SHELL`: clap_complete's scripts, from the same
//! command definition that parses, so they never name a flag that is gone.

use clap::{Args, ValueEnum};
use std::io::Write;

/// `nodescope completion`.
#[derive(Debug, Args, Clone)]
pub struct CompletionArgs {
    /// The shell: source the script, as `source <(nodescope completion
    /// bash)`, or save it where the shell loads completions.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// The shells `completion` writes for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// Writes the completion script of `command` (the whole CLI) for `shell`.
///
/// # Errors
/// When `out` fails (made whole first: clap_complete panics on a write
/// error, such as a closed pipe).
pub fn run_completion(
    args: &CompletionArgs,
    command: &mut clap::Command,
    out: &mut impl Write,
) -> Result<(), String> {
    let shell = match args.shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut script = Vec::new();
    clap_complete::generate(shell, command, "nodescope", &mut script);
    out.write_all(&script)
        .map_err(|e| format!("writing the output: {e}"))
}
