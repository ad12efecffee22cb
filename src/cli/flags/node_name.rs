//! `dry-run --nodes`: Node names as the apiserver validates them (a
//! lowercase RFC 1123 subdomain), refused in its words when the command
//! line is parsed, and each once: a pod made for a node that cannot exist,
//! or twice for one node, is a question no cluster would ask.

/// apimachinery's `dns1123SubdomainFmt`.
const FORMAT: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";

/// apimachinery's `DNS1123SubdomainMaxLength`.
const MAX_LENGTH: usize = 253;

/// Whether `name` matches [`FORMAT`] in full.
fn is_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.split('.').all(|label| {
            let bytes = label.as_bytes();
            let alphanumeric = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
            bytes.first().is_some_and(alphanumeric)
                && bytes.last().is_some_and(alphanumeric)
                && bytes.iter().all(|b| alphanumeric(b) || *b == b'-')
        })
}

/// The value parser of one `--nodes` name.
///
/// # Errors
/// What the apiserver answers to creating a Node of that name, in its
/// words (`The Node "bad node!" is invalid: metadata.name: Invalid value:
/// ...`).
pub fn parse(name: &str) -> Result<String, String> {
    if name.is_empty() {
        return Err(
            "The Node \"\" is invalid: metadata.name: Required value: name or generateName is \
             required"
                .to_owned(),
        );
    }
    let mut problems = Vec::new();
    if name.len() > MAX_LENGTH {
        problems.push(format!("must be no more than {MAX_LENGTH} characters"));
    }
    if !is_subdomain(name) {
        problems.push(format!(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
             characters, '-' or '.', and must start and end with an alphanumeric character \
             (e.g. 'example.com', regex used for validation is '{FORMAT}')"
        ));
    }
    let errors: Vec<String> = problems
        .iter()
        .map(|p| format!("metadata.name: Invalid value: {name:?}: {p}"))
        .collect();
    match errors.as_slice() {
        [] => Ok(name.to_owned()),
        [one] => Err(format!("The Node {name:?} is invalid: {one}")),
        several => Err(format!(
            "The Node {name:?} is invalid: [{}]",
            several.join(", ")
        )),
    }
}

/// The first name given twice, when one is.
#[must_use]
pub fn repeated(names: &[String]) -> Option<&str> {
    let mut seen = std::collections::HashSet::new();
    names
        .iter()
        .find(|n| !seen.insert(n.as_str()))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_are_refused_as_the_apiserver_refuses_them() {
        assert_eq!(parse("node-a.zone-1").as_deref(), Ok("node-a.zone-1"));
        assert_eq!(parse("10.0.0.1").as_deref(), Ok("10.0.0.1"));
        for bad in ["bad node!", "Node-A", "-a", "a-", "a..b", ".a", "a_b"] {
            assert_eq!(
                parse(bad),
                Err(format!(
                    "The Node {bad:?} is invalid: metadata.name: Invalid value: {bad:?}: a \
                     lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
                     characters, '-' or '.', and must start and end with an alphanumeric \
                     character (e.g. 'example.com', regex used for validation is \
                     '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                )),
                "{bad}"
            );
        }
        let long = "a".repeat(254);
        assert_eq!(
            parse(&long),
            Err(format!(
                "The Node {long:?} is invalid: metadata.name: Invalid value: {long:?}: must be \
                 no more than 253 characters"
            ))
        );
        assert!(parse(&"A".repeat(254)).is_err_and(|e| e.contains("is invalid: [metadata")));
        assert_eq!(
            parse(""),
            Err(
                "The Node \"\" is invalid: metadata.name: Required value: name or \
                 generateName is required"
                    .to_owned()
            )
        );
    }

    #[test]
    fn a_name_given_twice_is_found() {
        let names = |n: &[&str]| n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(repeated(&names(&["a", "b", "a"])), Some("a"));
        assert_eq!(repeated(&names(&["a", "b"])), None);
    }
}
