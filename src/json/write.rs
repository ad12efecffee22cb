//! Writing JSON straight to bytes: strings, flat string objects and JSON
//! Pointer tokens. Responses and patches are small and shaped alike on every
//! request, so they are written in one pass instead of through a
//! `serde_json::Value` tree.

/// Appends `/` and `token` escaped as RFC 6901 says (`~` as `~0`, `/` as `~1`).
pub fn push_token(path: &mut String, token: &str) {
    path.push('/');
    if !token.contains(['~', '/']) {
        path.push_str(token);
        return;
    }
    for c in token.chars() {
        match c {
            '~' => path.push_str("~0"),
            '/' => path.push_str("~1"),
            c => path.push(c),
        }
    }
}

/// Writes `s` as a JSON string: plain text is copied at once, anything that
/// needs escaping goes through serde_json's escaper.
pub fn write_json_str(out: &mut Vec<u8>, s: &str) {
    let plain = s
        .bytes()
        .all(|b| b >= 0x20 && b != b'"' && b != b'\\' && b != 0x7f);
    if plain {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // Writing a str into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

/// Writes a JSON object of string keys and values, in the order given.
pub fn write_json_object<'s>(out: &mut Vec<u8>, entries: impl Iterator<Item = (&'s str, &'s str)>) {
    out.push(b'{');
    for (i, (key, value)) in entries.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json_str(out, key);
        out.push(b':');
        write_json_str(out, value);
    }
    out.push(b'}');
}
