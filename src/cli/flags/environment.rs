//! A flag's value that came from its environment variable is blamed on the
//! variable: clap names the flag either way (`invalid value '0' for
//! '--reload-interval'`), and a user who never typed `--reload-interval`
//! then looks for it in vain on the command line.

use clap::error::{ContextKind, ContextValue, ErrorKind};

/// `error`'s message with the flag it names replaced by its environment
/// variable, when the value came from there: the flag is not on the
/// command line `args`, and its variable is set. `None` otherwise.
#[must_use]
pub fn blame_environment(
    error: &clap::Error,
    command: &clap::Command,
    args: &[std::ffi::OsString],
) -> Option<String> {
    if !matches!(
        error.kind(),
        ErrorKind::ValueValidation | ErrorKind::InvalidValue
    ) {
        return None;
    }
    let Some(ContextValue::String(named)) = error.get(ContextKind::InvalidArg) else {
        return None;
    };
    let flag = named.split_whitespace().next()?;
    let long = flag.strip_prefix("--")?;
    let typed = args.iter().any(|arg| {
        let arg = arg.to_string_lossy();
        arg == flag || arg.starts_with(&format!("{flag}="))
    });
    if typed {
        return None;
    }
    let variable = variable_of(command, long)?;
    let rendered = error.render().to_string();
    Some(rendered.replacen(
        &format!("'{named}'"),
        &format!("{variable} (the environment variable of {flag})"),
        1,
    ))
}

/// The set environment variable of `--long` in `command` or any of its
/// subcommands.
fn variable_of(command: &clap::Command, long: &str) -> Option<String> {
    let own = command.get_arguments().find_map(|arg| {
        let variable = arg.get_env()?;
        (arg.get_long() == Some(long) && std::env::var_os(variable).is_some())
            .then(|| variable.to_string_lossy().into_owned())
    });
    own.or_else(|| {
        command
            .get_subcommands()
            .find_map(|sub| variable_of(sub, long))
    })
}
