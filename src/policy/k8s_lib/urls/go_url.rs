//! A URL splitter with the rules of Go's `net/url`, for the parts the
//! Kubernetes URL library exposes. Only what `url.ParseRequestURI`,
//! `url.Parse`, `EscapedPath`, `Hostname`, `Port` and `Query` do is
//! reproduced; no normalisation happens, as in Go.

/// Why a string is not a URL Kubernetes accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// An ASCII control character, which Go refuses anywhere in a URL.
    #[error("URL parse error: invalid control character in URL")]
    ControlCharacter,
    /// The empty string.
    #[error("URL parse error: empty url")]
    Empty,
    /// Starts with `:`.
    #[error("URL parse error: missing protocol scheme")]
    MissingScheme,
    /// Neither an absolute URI nor an absolute path.
    #[error("URL parse error: invalid URI for request")]
    NotAbsolute,
    /// A malformed `%XX` escape.
    #[error("URL parse error: invalid URL escape {0:?}")]
    Escape(String),
    /// A character not allowed in a host name.
    #[error("URL parse error: invalid character {0:?} in host name")]
    HostCharacter(char),
    /// A port that is not all digits, as in `https://a:b:c/`.
    #[error("URL parse error: invalid port {0:?} after host")]
    Port(String),
    /// `[` without its `]`.
    #[error("URL parse error: missing ']' in host")]
    MissingBracket,
    /// A character not allowed in the user information.
    #[error("URL parse error: net/url: invalid userinfo")]
    UserInfo,
}

/// The parts of a parsed URL, as Go's `url.URL` holds them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GoUrl {
    scheme: String,
    host: String,
    path: String,
    raw_path: String,
    raw_query: String,
}

/// Which part of a URL is being escaped; Go's `encoding` modes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    UserPassword,
    QueryComponent,
    Fragment,
}

impl GoUrl {
    /// Validates `raw` as `url.ParseRequestURI` does, then splits it as
    /// `url.Parse` does (which, unlike the former, strips the fragment).
    pub fn parse_request_uri(raw: &str) -> Result<Self, UrlError> {
        parse(raw, true)?;
        let (without_fragment, fragment) = match raw.split_once('#') {
            Some((u, f)) => (u, Some(f)),
            None => (raw, None),
        };
        if let Some(fragment) = fragment {
            unescape(fragment, Mode::Fragment)?;
        }
        parse(without_fragment, false)
    }

    /// The scheme, lowercased; empty for an absolute path.
    pub fn scheme(&self) -> &str {
        &self.scheme
    }

    /// The host with its port, IPv6 addresses in brackets.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The host without port or brackets.
    pub fn hostname(&self) -> &str {
        let (host, _) = split_host_port(&self.host);
        host.strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host)
    }

    /// The port, empty when absent.
    pub fn port(&self) -> &str {
        split_host_port(&self.host).1
    }

    /// The path, percent-encoded: as written when that is a valid encoding.
    pub fn escaped_path(&self) -> String {
        if !self.raw_path.is_empty()
            && valid_encoded(&self.raw_path)
            && unescape(&self.raw_path, Mode::Path).is_ok_and(|p| p == self.path)
        {
            return self.raw_path.clone();
        }
        if self.path == "*" {
            return "*".to_owned();
        }
        escape(&self.path, Mode::Path)
    }

    /// The query parameters, each key with its values in order. Pairs that
    /// do not unescape, or contain `;`, are skipped, as Go does.
    pub fn query(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for pair in self.raw_query.split('&') {
            if pair.is_empty() || pair.contains(';') {
                continue;
            }
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let (Ok(key), Ok(value)) = (
                unescape(key, Mode::QueryComponent),
                unescape(value, Mode::QueryComponent),
            ) else {
                continue;
            };
            match out.iter_mut().find(|(k, _)| *k == key) {
                Some((_, values)) => values.push(value),
                None => out.push((key, vec![value])),
            }
        }
        out
    }
}

/// Go's `url.parse`.
fn parse(raw: &str, via_request: bool) -> Result<GoUrl, UrlError> {
    if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err(UrlError::ControlCharacter);
    }
    if raw.is_empty() && via_request {
        return Err(UrlError::Empty);
    }
    let mut url = GoUrl::default();
    if raw == "*" {
        url.path = "*".to_owned();
        return Ok(url);
    }
    let (scheme, mut rest) = split_scheme(raw)?;
    url.scheme = scheme.to_ascii_lowercase();
    if rest.ends_with('?') && rest.matches('?').count() == 1 {
        rest = &rest[..rest.len() - 1];
    } else if let Some((before, query)) = rest.split_once('?') {
        url.raw_query = query.to_owned();
        rest = before;
    }
    if !rest.starts_with('/') {
        if !url.scheme.is_empty() {
            // An opaque URL such as `mailto:a@b`: no host, no path.
            return Ok(url);
        }
        if via_request {
            return Err(UrlError::NotAbsolute);
        }
    }
    let authority_allowed = !url.scheme.is_empty() || (!via_request && !rest.starts_with("///"));
    if authority_allowed && rest.starts_with("//") {
        let after = &rest[2..];
        let (authority, path) = match after.find('/') {
            Some(i) => (&after[..i], &after[i..]),
            None => (after, ""),
        };
        url.host = parse_authority(authority)?;
        rest = path;
    }
    url.path = unescape(rest, Mode::Path)?;
    if escape(&url.path, Mode::Path) != rest {
        url.raw_path = rest.to_owned();
    }
    Ok(url)
}

/// Go's `getScheme`: the scheme and what follows its `:`, or no scheme.
fn split_scheme(raw: &str) -> Result<(&str, &str), UrlError> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i == 0 => return Ok(("", raw)),
            b'0'..=b'9' | b'+' | b'-' | b'.' => {}
            b':' if i == 0 => return Err(UrlError::MissingScheme),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

/// The host of `authority`, its user information validated and dropped.
fn parse_authority(authority: &str) -> Result<String, UrlError> {
    let host = match authority.rfind('@') {
        Some(i) => {
            let user = &authority[..i];
            if !user.bytes().all(valid_userinfo_byte) {
                return Err(UrlError::UserInfo);
            }
            unescape(user, Mode::UserPassword)?;
            &authority[i + 1..]
        }
        None => authority,
    };
    parse_host(host)
}

fn valid_userinfo_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b >= 0x80 || b"-._:~!$&'()*+,;=%@".contains(&b)
}

fn parse_host(host: &str) -> Result<String, UrlError> {
    if host.starts_with('[') {
        let close = host.rfind(']').ok_or(UrlError::MissingBracket)?;
        let port = &host[close + 1..];
        if !valid_optional_port(port) {
            return Err(UrlError::Port(port.to_owned()));
        }
    } else if let Some(i) = host.rfind(':') {
        let port = &host[i..];
        if !valid_optional_port(port) {
            return Err(UrlError::Port(port.to_owned()));
        }
    }
    unescape(host, Mode::Host)
}

/// Empty, or `:` followed by digits only.
fn valid_optional_port(port: &str) -> bool {
    match port.strip_prefix(':') {
        Some(digits) => digits.bytes().all(|b| b.is_ascii_digit()),
        None => port.is_empty(),
    }
}

/// Go's `net.SplitHostPort`-like split used by `Hostname` and `Port`.
fn split_host_port(host: &str) -> (&str, &str) {
    let Some(colon) = host.rfind(':') else {
        return (host, "");
    };
    if let Some(close) = host.rfind(']') {
        if close > colon {
            return (host, "");
        }
    }
    (&host[..colon], &host[colon + 1..])
}

/// Go's `shouldEscape`.
fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if mode == Mode::Host && b"!$&'()*+,;=:[]<>\"".contains(&c) {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => return false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => {
            return match mode {
                Mode::Path => c == b'?',
                Mode::UserPassword => matches!(c, b'@' | b'/' | b'?' | b':'),
                Mode::QueryComponent => true,
                Mode::Fragment => false,
                Mode::Host => true,
            };
        }
        _ => {}
    }
    !(mode == Mode::Fragment && matches!(c, b'!' | b'(' | b')' | b'*'))
}

/// Go's `validEncoded` for paths.
fn valid_encoded(s: &str) -> bool {
    s.bytes()
        .all(|c| b"!$&'()*+,;=:@[]%".contains(&c) || !should_escape(c, Mode::Path))
}

fn hex_value(c: u8) -> Option<u8> {
    (c as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

/// Go's `unescape`: decodes `%XX` (and `+` in query components), refusing
/// malformed escapes and, in hosts, characters a host may not contain.
fn unescape(s: &str, mode: Mode) -> Result<String, UrlError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let escape = s.get(i..(i + 3).min(s.len())).unwrap_or("");
                let digits = bytes.get(i + 1..i + 3);
                let (hi, lo) = match digits {
                    Some(&[h, l]) => match (hex_value(h), hex_value(l)) {
                        (Some(h), Some(l)) => (h, l),
                        _ => return Err(UrlError::Escape(escape.to_owned())),
                    },
                    _ => return Err(UrlError::Escape(escape.to_owned())),
                };
                if mode == Mode::Host && hi < 8 && escape != "%25" {
                    return Err(UrlError::Escape(escape.to_owned()));
                }
                out.push(hi << 4 | lo);
                i += 3;
            }
            b'+' if mode == Mode::QueryComponent => {
                out.push(b' ');
                i += 1;
            }
            c => {
                if mode == Mode::Host && c < 0x80 && should_escape(c, mode) {
                    return Err(UrlError::HostCharacter(char::from(c)));
                }
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Go's `escape` for paths and query components.
fn escape(s: &str, mode: Mode) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(s.len());
    for &c in s.as_bytes() {
        if !should_escape(c, mode) {
            out.push(char::from(c));
        } else if c == b' ' && mode == Mode::QueryComponent {
            out.push('+');
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(c >> 4)]));
            out.push(char::from(HEX[usize::from(c & 15)]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{GoUrl, UrlError};

    #[test]
    fn a_port_that_is_not_numeric_is_rejected() {
        assert_eq!(
            GoUrl::parse_request_uri("https://a:b:c/"),
            Err(UrlError::Port(":c".to_owned()))
        );
    }

    #[test]
    fn a_relative_path_is_not_a_request_uri() {
        assert_eq!(
            GoUrl::parse_request_uri("../relative-path"),
            Err(UrlError::NotAbsolute)
        );
        assert_eq!(GoUrl::parse_request_uri(""), Err(UrlError::Empty));
        assert_eq!(GoUrl::parse_request_uri(":x"), Err(UrlError::MissingScheme));
    }

    #[test]
    fn control_characters_and_bad_escapes_are_rejected() {
        assert_eq!(
            GoUrl::parse_request_uri("https://example.com/\n"),
            Err(UrlError::ControlCharacter)
        );
        assert!(matches!(
            GoUrl::parse_request_uri("https://example.com/%zz"),
            Err(UrlError::Escape(_))
        ));
        assert!(matches!(
            GoUrl::parse_request_uri("https://exa mple.com/"),
            Err(UrlError::HostCharacter(' '))
        ));
    }

    #[test]
    fn user_information_is_not_part_of_the_host() {
        let url =
            GoUrl::parse_request_uri("https://user:pass@example.com:80/path?query=val#fragment");
        assert_eq!(url.as_ref().map(GoUrl::host), Ok("example.com:80"));
        assert_eq!(url.as_ref().map(GoUrl::scheme), Ok("https"));
    }

    #[test]
    fn a_non_utf8_escape_does_not_panic() {
        let url = GoUrl::parse_request_uri("https://example.com/%ff");
        assert_eq!(url.map(|u| u.escaped_path()), Ok("/%ff".to_owned()));
    }
}
