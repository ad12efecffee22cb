//! The value parsers of every numeric and duration flag, so that a flag is
//! range-checked when the command line is parsed (exit 2, before anything
//! connects) and its message states the range it really takes.
//!
//! Beside them, the flags several commands take alike, each defined once
//! for every command that has it, so that the names, the defaults and the
//! checks cannot drift apart: upstream VPA's
//! `--feature-gates` ([`feature_gates`]) and `--vpa-object-namespace`
//! ([`vpa_namespaces`]), `--missing-node-recommendation`
//! ([`missing_node`]), and the webhook's gates and boost cap, which
//! `serve` and `dry-run` share ([`mutation`]).

pub mod environment;
pub mod feature_gates;
pub mod missing_node;
pub mod mutation;
pub mod node_name;
pub mod vpa_namespaces;

use std::time::Duration;

/// Go's `time.ParseDuration` syntax, as upstream's flags take it: `0`, or
/// one or more decimal numbers each with a unit (`ns`, `us`/`µs`, `ms`,
/// `s`, `m`, `h`), such as `30s`, `1.5h`, `1h30m` or `12h0m0s`. Not
/// negative. Hand-written: humantime also takes `1d`, `2min` and spaces but
/// refuses `1.5h` and `12h0m0s`, and the one Go port on crates.io
/// (go-parse-duration 0.1.1) is unmaintained and returns signed nanoseconds.
///
/// # Errors
/// Anything else, saying what is wrong and quoting the text.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    const SYNTAX: &str = "such as 30s, 1.5m, 1h30m or 12h0m0s (units ns, us, ms, s, m, h)";
    if text.starts_with('-') {
        return Err(format!("{text:?}: a duration cannot be negative"));
    }
    let body = text.strip_prefix('+').unwrap_or(text);
    if body == "0" {
        return Ok(Duration::ZERO);
    }
    if body.is_empty() {
        return Err(format!("expected a duration {SYNTAX}"));
    }
    let digits_end = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let mut rest = body;
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let (whole, after) = rest.split_at(digits_end(rest));
        let (fraction, after) = match after.strip_prefix('.') {
            Some(a) => a.split_at(digits_end(a)),
            None => ("", after),
        };
        if whole.is_empty() && fraction.is_empty() {
            return Err(format!("{text:?} is not a duration {SYNTAX}"));
        }
        let unit_end = after
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_end);
        let nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => {
                return Err(format!(
                    "{text:?} has a number without a unit: write {whole}s for seconds ({SYNTAX})"
                ))
            }
            other => {
                return Err(format!(
                    "{text:?} has unknown unit {other:?}: a duration is written {SYNTAX}"
                ))
            }
        };
        let too_long = || format!("{text:?} is longer than a duration can be (about 292 years)");
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| too_long())?
        };
        // Digits past the 25th cannot change a nanosecond of an hour, and
        // keep the arithmetic within u128; Go truncates the same way.
        let fraction = &fraction[..fraction.len().min(25)];
        let part = if fraction.is_empty() {
            0
        } else {
            let scale = 10u128.pow(u32::try_from(fraction.len()).unwrap_or(25));
            fraction.parse::<u128>().map_err(|_| too_long())? * nanos / scale
        };
        total = whole
            .checked_mul(nanos)
            .and_then(|n| n.checked_add(part))
            .and_then(|n| n.checked_add(total))
            .filter(|n| *n <= i64::MAX as u128)
            .ok_or_else(too_long)?;
        rest = after;
    }
    Ok(Duration::from_nanos(
        u64::try_from(total).unwrap_or(u64::MAX),
    ))
}

/// A duration longer than zero: an interval of 0s would spin.
///
/// # Errors
/// As [`parse_duration`], or zero.
pub fn interval(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        d if d.is_zero() => Err(format!(
            "{text:?}: the interval must be longer than 0 (such as 10s)"
        )),
        d => Ok(d),
    }
}

/// `--log-level`: a tracing filter (`info`, `info,nodescope=debug`).
///
/// # Errors
/// When the filter does not parse, naming it; when it is empty; when a
/// directive without `=` is not a level: tracing reads a bare word as a
/// module name (`warning` as the module `warning` at trace), which turns
/// every other log line off, failed reloads included.
pub fn log_filter(text: &str) -> Result<String, String> {
    const EXAMPLE: &str = "such as info, or info,nodescope=debug";
    const LEVELS: &str = r#""off", "error", "warn", "info", "debug", "trace""#;
    // Checked here, where a typo can still be named, rather than when the
    // logger starts, where it could only fall back to `info` unsaid.
    tracing_subscriber::EnvFilter::try_new(text)
        .map_err(|e| format!("{text:?} is not a log filter ({e}); {EXAMPLE}"))?;
    let directives = text.split(',').map(str::trim).filter(|d| !d.is_empty());
    let mut any = false;
    for directive in directives {
        any = true;
        let bare = !directive.contains(['=', '[']);
        if bare
            && directive
                .parse::<tracing_subscriber::filter::LevelFilter>()
                .is_err()
        {
            return Err(format!(
                "{text:?} is not a log filter ({directive:?} is not a level: expected one of \
                 {LEVELS}, or MODULE=LEVEL); {EXAMPLE}"
            ));
        }
    }
    if !any {
        return Err(format!(
            "{text:?} is not a log filter (it names no level, so nothing would be logged); {EXAMPLE}"
        ));
    }
    Ok(text.to_owned())
}

/// A Lease's duration: whole seconds, at least 2s (`leaseDurationSeconds`
/// is an integer, and the leader renews a third of it, at least a second,
/// before expiry); checked here so that a wrong one stops the command
/// before it connects.
///
/// # Errors
/// As [`parse_duration`], or below 2s, or not whole seconds.
pub fn lease_duration(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d.as_secs() < 2 || d.subsec_nanos() != 0 {
        return Err(format!(
            "{text:?}: a Lease duration is whole seconds, at least 2s (such as 15s)"
        ));
    }
    Ok(d)
}

/// The path of `--store file:PATH`; `file:` alone names nothing.
///
/// # Errors
/// `file:` without a path.
pub fn store_file(value: &str) -> Result<&std::path::Path, String> {
    match value.strip_prefix("file:").unwrap_or(value) {
        "" => Err("--store file: needs a path, as in file:./dir".to_owned()),
        path => Ok(std::path::Path::new(path)),
    }
}

fn number<T: std::str::FromStr>(
    text: &str,
    expected: &str,
    ok: impl Fn(&T) -> bool,
) -> Result<T, String> {
    text.parse::<T>()
        .ok()
        .filter(ok)
        .ok_or_else(|| format!("expected {expected}, not {text:?}"))
}

/// A fraction in (0, 1] (`--eviction-tolerance`).
///
/// # Errors
/// Anything else, NaN and infinities included.
pub fn fraction(text: &str) -> Result<f64, String> {
    number(text, "a fraction in (0, 1]", |v: &f64| {
        *v > 0.0 && *v <= 1.0
    })
}

/// A percentile in [0, 1].
///
/// # Errors
/// Anything else, NaN included.
pub fn percentile(text: &str) -> Result<f64, String> {
    number(text, "a percentile in [0, 1]", |v: &f64| {
        (0.0..=1.0).contains(v)
    })
}

/// A finite number above 0.
///
/// # Errors
/// Zero, a negative number, NaN, an infinity, or not a number.
pub fn positive(text: &str) -> Result<f64, String> {
    number(text, "a finite number > 0", |v: &f64| {
        v.is_finite() && *v > 0.0
    })
}

/// A finite number, 0 or more.
///
/// # Errors
/// A negative number, NaN, an infinity, or not a number.
pub fn non_negative(text: &str) -> Result<f64, String> {
    number(text, "a finite number >= 0", |v: &f64| {
        v.is_finite() && *v >= 0.0
    })
}

/// Any finite number (`--eviction-rate-limit`, where 0 or less means none).
///
/// # Errors
/// NaN, an infinity, or not a number.
pub fn finite(text: &str) -> Result<f64, String> {
    number(text, "a finite number", |v: &f64| v.is_finite())
}

/// A ratio of at least 1 (`--oom-bump-up-ratio`: memory after an OOM kill
/// never shrinks).
///
/// # Errors
/// Below 1, NaN, an infinity, or not a number.
pub fn ratio(text: &str) -> Result<f64, String> {
    number(text, "a finite number >= 1", |v: &f64| {
        v.is_finite() && *v >= 1.0
    })
}

/// A whole number of 1 or more (`--min-replicas`).
///
/// # Errors
/// Anything else.
pub fn count(text: &str) -> Result<usize, String> {
    number(text, "a whole number >= 1", |v: &usize| *v >= 1)
}

/// A whole number of 1 or more, as `u32`.
///
/// # Errors
/// Anything else.
pub fn count_u32(text: &str) -> Result<u32, String> {
    number(text, "a whole number >= 1", |v: &u32| *v >= 1)
}

/// A whole number of 1 or more, as `u64`.
///
/// # Errors
/// Anything else.
pub fn count_u64(text: &str) -> Result<u64, String> {
    number(text, "a whole number >= 1", |v: &u64| *v >= 1)
}

/// A whole number of 1 or more, as `i64` (upstream's int flags).
///
/// # Errors
/// Anything else.
pub fn count_i64(text: &str) -> Result<i64, String> {
    number(text, "a whole number >= 1", |v: &i64| *v >= 1)
}

/// Whole seconds, 1 or more (serve's timeouts and reload intervals).
///
/// # Errors
/// Anything else.
pub fn seconds(text: &str) -> Result<u64, String> {
    number(text, "a whole number of seconds >= 1", |v: &u64| *v >= 1)
}

/// Whole seconds, 0 or more (`--drain-timeout`: 0 drains nothing).
///
/// # Errors
/// Anything else.
pub fn seconds_or_zero(text: &str) -> Result<u64, String> {
    number(text, "a whole number of seconds >= 0", |_: &u64| true)
}

/// Bytes, 1 or more (`--max-body-bytes`).
///
/// # Errors
/// Anything else.
pub fn bytes(text: &str) -> Result<usize, String> {
    number(text, "a whole number of bytes >= 1", |v: &usize| *v >= 1)
}

/// A listen address: `HOST:PORT`, or upstream's `:PORT` (Go's form, where
/// no host means every interface), so that a Deployment written for
/// upstream's `--address=:8943` runs unchanged. Without a host it binds
/// `0.0.0.0`, as nodescope's defaults do: binding `[::]` would fail on
/// nodes with IPv6 disabled.
///
/// # Errors
/// Anything else, quoting the text.
pub fn listen_address(text: &str) -> Result<std::net::SocketAddr, String> {
    let full = match text.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => text.to_owned(),
    };
    full.parse().map_err(|_| {
        format!("expected HOST:PORT or :PORT (such as 0.0.0.0:8943 or :8943), not {text:?}")
    })
}

#[cfg(test)]
mod tests;

/// A Kubernetes quantity such as `4` or `2500m`, not negative.
///
/// # Errors
/// Text that is not a quantity, or a negative one.
pub fn quantity(text: &str) -> Result<crate::quantity::Quantity, String> {
    let q = text
        .parse::<crate::quantity::Quantity>()
        .map_err(|e| e.to_string())?;
    if q.sign() < 0 {
        return Err(format!(
            "expected a quantity >= 0 (0: no cap), not {text:?}"
        ));
    }
    Ok(q)
}

/// A label value (`recommend --recommender-name`, which its checkpoints
/// carry as one): 1 to 63 letters, digits, `-`, `_` or `.`, beginning and
/// ending with a letter or digit.
///
/// # Errors
/// Anything else.
pub fn label_value(text: &str) -> Result<String, String> {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let valid = text.len() <= 63
        && edge(text.chars().next())
        && edge(text.chars().last())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if valid {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "expected a label value (1 to 63 letters, digits, '-', '_' or '.', beginning and \
             ending with a letter or digit), not {text:?}"
        ))
    }
}
