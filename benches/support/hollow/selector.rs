//! Label and field selectors as kube-apiserver evaluates them, for the
//! queries the components send. A selector this cannot evaluate is an
//! error the server answers 400 and the bench reports: ignoring it would
//! serve more objects than the component asked for and measure that.

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq)]
pub enum Label {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    Absent(String),
}

/// One requirement of a field selector (`=`, `==` or `!=`).
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub path: String,
    pub value: String,
    pub equal: bool,
}

/// The fields the hollow objects index (anything else is refused).
pub const FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "status.phase",
];

/// Splits at top-level commas (not those inside `in (a,b)`).
fn terms(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(text[start..].trim());
    out.into_iter().filter(|t| !t.is_empty()).collect()
}

fn set(text: &str) -> Result<Vec<String>, String> {
    let inner = text
        .trim()
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| format!("set {text:?} is not (a,b)"))?;
    Ok(inner.split(',').map(|v| v.trim().to_owned()).collect())
}

pub fn labels(text: &str) -> Result<Vec<Label>, String> {
    terms(text)
        .into_iter()
        .map(|t| {
            if let Some(key) = t.strip_prefix('!') {
                return Ok(Label::Absent(key.trim().to_owned()));
            }
            if let Some((k, v)) = t.split_once("!=") {
                return Ok(Label::NotEquals(k.trim().to_owned(), v.trim().to_owned()));
            }
            if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
                return Ok(Label::Equals(k.trim().to_owned(), v.trim().to_owned()));
            }
            if let Some((k, v)) = t.split_once(" notin ") {
                return Ok(Label::NotIn(k.trim().to_owned(), set(v)?));
            }
            if let Some((k, v)) = t.split_once(" in ") {
                return Ok(Label::In(k.trim().to_owned(), set(v)?));
            }
            if t.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
            {
                return Ok(Label::Exists(t.to_owned()));
            }
            Err(format!("label selector term {t:?} not understood"))
        })
        .collect()
}

pub fn fields(text: &str) -> Result<Vec<Field>, String> {
    terms(text)
        .into_iter()
        .map(|t| {
            let (path, value, equal) = if let Some((k, v)) = t.split_once("!=") {
                (k, v, false)
            } else if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
                (k, v, true)
            } else {
                return Err(format!("field selector term {t:?} not understood"));
            };
            let path = path.trim();
            if !FIELDS.contains(&path) {
                return Err(format!(
                    "field selector on {path:?}: the hollow apiserver indexes only {FIELDS:?}"
                ));
            }
            Ok(Field {
                path: path.to_owned(),
                value: value.trim().to_owned(),
                equal,
            })
        })
        .collect()
}

/// Whether `labels` (key, value pairs) satisfy every requirement.
pub fn matches_labels(selector: &[Label], labels: &[(String, String)]) -> bool {
    let get = |k: &str| labels.iter().find(|(key, _)| key == k).map(|(_, v)| v);
    selector.iter().all(|r| match r {
        Label::Equals(k, v) => get(k) == Some(v),
        Label::NotEquals(k, v) => get(k) != Some(v),
        Label::In(k, vs) => get(k).is_some_and(|v| vs.contains(v)),
        Label::NotIn(k, vs) => get(k).is_none_or(|v| !vs.contains(v)),
        Label::Exists(k) => get(k).is_some(),
        Label::Absent(k) => get(k).is_none(),
    })
}

/// Whether the object's indexed `field` values satisfy every requirement.
pub fn matches_fields(selector: &[Field], field: impl Fn(&str) -> String) -> bool {
    selector
        .iter()
        .all(|f| (field(&f.path) == f.value) == f.equal)
}
