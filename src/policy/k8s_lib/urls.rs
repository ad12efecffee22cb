//! The Kubernetes URL library: `url(string)`, `isURL(string)` and the
//! `getScheme`, `getHost`, `getHostname`, `getPort`, `getEscapedPath` and
//! `getQuery` methods.
//!
//! Kubernetes validates with Go's `url.ParseRequestURI` (absolute URI or
//! absolute path) and reads the parts from `url.Parse`. The `url` crate
//! implements the WHATWG standard instead, which rewrites what it parses
//! (drops default ports, adds `/` paths, lowercases hosts), so the parts
//! would differ from what the API server reports. The small parser in
//! [`go_url`] reproduces Go's splitting and escaping rules instead.

mod go_url;

use super::{add_named_type, opaque_val};
use cel::common::types::{CelBool, CelList, CelMap, CelMapKey, CelString, Type};
use cel::common::value::Val;
use cel::{DeclarationError, Env, ExecutionError};
use std::collections::HashMap;

pub use go_url::{GoUrl, UrlError};

/// The CEL type of URLs, named as in Kubernetes.
pub static URL_TYPE: Type = Type::new_unspecified_type("kubernetes.URL");

/// A URL value in CEL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url(pub GoUrl);

opaque_val!(Url, &URL_TYPE);

/// Registers the URL type and functions on `env`.
pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    add_named_type(env, &URL_TYPE)?;
    cel::add_overload!(env, fn url_from_string: (CelString) -> Result<Url>,
        name = "url", id = "string_to_url")?;
    cel::add_overload!(env, fn is_url: (CelString) -> CelBool, name = "isURL", id = "is_url_string")?;
    cel::add_member_overload!(env, fn get_scheme: (Url) -> CelString, id = "url_get_scheme")?;
    cel::add_member_overload!(env, fn get_host: (Url) -> CelString, id = "url_get_host")?;
    cel::add_member_overload!(env, fn get_hostname: (Url) -> CelString,
        id = "url_get_hostname")?;
    cel::add_member_overload!(env, fn get_port: (Url) -> CelString, id = "url_get_port")?;
    cel::add_member_overload!(env, fn get_escaped_path: (Url) -> CelString,
        id = "url_get_escaped_path")?;
    cel::add_member_overload!(env, fn get_query: (Url) -> CelMap, id = "url_get_query")?;
    Ok(())
}

fn url_from_string(raw: &CelString<'_>) -> Result<Url, ExecutionError> {
    GoUrl::parse_request_uri(raw.inner())
        .map(Url)
        .map_err(|e| ExecutionError::function_error("url", e))
}

fn is_url(raw: &CelString<'_>) -> CelBool {
    CelBool::from(GoUrl::parse_request_uri(raw.inner()).is_ok())
}

fn text(s: impl Into<String>) -> CelString<'static> {
    CelString::from(s.into())
}

fn get_scheme(url: &Url) -> CelString<'static> {
    text(url.0.scheme())
}

fn get_host(url: &Url) -> CelString<'static> {
    text(url.0.host())
}

fn get_hostname(url: &Url) -> CelString<'static> {
    text(url.0.hostname())
}

fn get_port(url: &Url) -> CelString<'static> {
    text(url.0.port())
}

fn get_escaped_path(url: &Url) -> CelString<'static> {
    text(url.0.escaped_path())
}

fn get_query(url: &Url) -> CelMap<'static> {
    let mut map: HashMap<CelMapKey<'static>, Box<dyn Val + 'static>> = HashMap::new();
    for (key, values) in url.0.query() {
        let values: Vec<Box<dyn Val + 'static>> = values
            .into_iter()
            .map(|v| Box::new(text(v)) as Box<dyn Val>)
            .collect();
        map.insert(CelMapKey::from(key), Box::new(CelList::from(values)));
    }
    CelMap::from(map)
}

#[cfg(test)]
mod tests {
    use crate::policy::k8s_lib::test_support::{assert_error, assert_true};

    #[test]
    fn is_url_accepts_absolute_uris_and_absolute_paths_only() {
        assert_true("isURL('https://user:pass@example.com:80/path?query=val#fragment')");
        assert_true("isURL('/absolute-path')");
        assert_true("!isURL('https://a:b:c/')");
        assert_true("!isURL('../relative-path')");
        assert_error("url('../relative-path')", "invalid URI for request");
    }

    #[test]
    fn scheme_host_hostname_and_port_follow_the_kubernetes_examples() {
        assert_true("url('/path').getScheme() == ''");
        assert_true("url('https://example.com/').getScheme() == 'https'");
        assert_true("url('https://example.com:80/').getHost() == 'example.com:80'");
        assert_true("url('https://example.com/').getHost() == 'example.com'");
        assert_true("url('https://[::1]:80/').getHost() == '[::1]:80'");
        assert_true("url('https://[::1]/').getHost() == '[::1]'");
        assert_true("url('/path').getHost() == ''");
        assert_true("url('https://example.com:80/').getHostname() == 'example.com'");
        assert_true("url('https://127.0.0.1:80/').getHostname() == '127.0.0.1'");
        assert_true("url('https://[::1]:80/').getHostname() == '::1'");
        assert_true("url('/path').getHostname() == ''");
        assert_true("url('https://example.com:80/').getPort() == '80'");
        assert_true("url('http://example.com:80/').getPort() == '80'");
        assert_true("url('https://example.com/').getPort() == ''");
        assert_true("url('/path').getPort() == ''");
    }

    #[test]
    fn escaped_path_is_percent_encoded_as_go_does() {
        assert_true("url('https://example.com/path').getEscapedPath() == '/path'");
        assert_true(
            "url('https://example.com/path with spaces/').getEscapedPath() == '/path%20with%20spaces/'",
        );
        assert_true("url('https://example.com').getEscapedPath() == ''");
        assert_true("url('https://example.com/a%2Fb').getEscapedPath() == '/a%2Fb'");
    }

    #[test]
    fn query_is_a_map_of_lists_of_unescaped_strings() {
        assert_true(
            "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}",
        );
        assert_true(
            "url('https://example.com/path?key with spaces=value with spaces').getQuery() \
             == {'key with spaces': ['value with spaces']}",
        );
        assert_true("url('https://example.com/path?').getQuery() == {}");
        assert_true("url('https://example.com/path').getQuery() == {}");
        assert_true(
            "url('https://example.com/?a=1+2&b=%41').getQuery() == {'a': ['1 2'], 'b': ['A']}",
        );
        assert_true("url('https://example.com/path?x=1#frag').getQuery() == {'x': ['1']}");
    }

    #[test]
    fn urls_compare_equal_when_parsed_from_the_same_text() {
        assert_true("url('https://example.com/') == url('https://example.com/')");
        assert_true("type(url('/a')) == kubernetes.URL");
    }
}
