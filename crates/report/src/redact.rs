//! Secrets out of everything storprof shows or packs: the recorded command
//! (in report.md, system.json, the bundle), the session's JSON files and
//! the text and config files copied into a bundle.
//!
//! What counts as a secret: the value of a name that looks like KEY,
//! SECRET, TOKEN, PASSWORD or credentials, in these forms:
//! - argv words: `NAME=VALUE`, `--name VALUE`, `--name=VALUE`;
//! - a word holding a whole command line (`sh -c '...'`, `bash -lc "..."`):
//!   the same forms inside it, quotes understood, nested quotes too; this
//!   is how the arguments and environment of the processes a shell starts
//!   reach a session at all;
//! - config and log lines: YAML `name: value` (also `- name: value`), INI
//!   and TOML `name = value`, `.env` `NAME="a b"`, JSON `"name": "value"`,
//!   HTTP `Authorization: Bearer X`;
//! - JSON documents: values under secret-looking keys at any depth, and
//!   every string as text;
//! - URLs: the password of `scheme://user:password@host` (and the user too
//!   for object-store schemes, where it is the access key id), and query
//!   parameters with secret-looking names (presigned S3 URLs'
//!   `X-Amz-Credential`, `X-Amz-Signature`, `X-Amz-Security-Token`; Azure
//!   SAS `sig`).
//!
//! Short options (`-p VALUE`) are left alone: their meaning depends on the
//! program (`-p` is a port as often as a password). Redaction errs on the
//! side of hiding: an option such as `--sort-key` loses its value too.

/// What replaces a secret value.
pub const REDACTED: &str = "<redacted>";

/// Fragments of names whose values are secrets (compared upper-case, with
/// `-` and `.` read as `_`).
const SECRET_NAME_PARTS: &[&str] = &[
    "KEY",
    "SECRET",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "AUTHORIZATION",
    "SIGNATURE",
    "COOKIE",
];

/// URL query parameters that are secrets although their names do not say
/// so (Azure shared access signatures).
const SECRET_QUERY_NAMES: &[&str] = &["sig"];

/// URL schemes whose user part is an access key id, not a user name.
const KEY_ID_SCHEMES: &[&str] = &[
    "s3", "s3a", "s3n", "gs", "gcs", "az", "abfs", "abfss", "wasb", "wasbs",
];

/// Words after `Authorization:` that name the scheme; the secret follows.
const AUTH_SCHEMES: &[&str] = &["bearer", "basic", "token", "digest", "aws4-hmac-sha256"];

/// True when a variable/option/key name looks like it holds a secret.
pub fn is_secret_name(name: &str) -> bool {
    let upper: String = name
        .trim_start_matches(['-', '+'])
        .chars()
        .map(|c| match c {
            '-' | '.' => '_',
            c => c.to_ascii_uppercase(),
        })
        .collect();
    SECRET_NAME_PARTS.iter().any(|p| upper.contains(p))
}

/// Ends a URL: whitespace, quotes and the characters that close it in
/// markup or code.
fn ends_url(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '"' | '\'' | '`' | '<' | '>' | ')' | ']' | '}' | ',' | ';'
        )
}

/// Redacts credentials in every URL of `s`: `user:password@` becomes
/// `user:<redacted>@` (`<redacted>:<redacted>@` for object-store schemes),
/// and secret query parameters lose their values.
pub fn redact_url_password(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(sep) = rest.find("://") {
        let scheme_start = rest[..sep]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        let scheme = rest[scheme_start..sep].to_ascii_lowercase();
        out.push_str(&rest[..sep + 3]);
        let after = &rest[sep + 3..];
        let url_end = after.find(ends_url).unwrap_or(after.len());
        out.push_str(&redact_one_url(&scheme, &after[..url_end]));
        rest = &after[url_end..];
    }
    out.push_str(rest);
    out
}

/// `url` is what follows `scheme://`, up to the end of the URL.
fn redact_one_url(scheme: &str, url: &str) -> String {
    let authority_end = url.find(['/', '?', '#']).unwrap_or(url.len());
    let (authority, path) = url.split_at(authority_end);
    let authority = match authority.rfind('@') {
        Some(at) => {
            let (userinfo, host) = authority.split_at(at);
            match userinfo.split_once(':') {
                Some(_) if KEY_ID_SCHEMES.contains(&scheme) => {
                    format!("{REDACTED}:{REDACTED}{host}")
                }
                Some((user, _)) => format!("{user}:{REDACTED}{host}"),
                None => authority.to_string(),
            }
        }
        None => authority.to_string(),
    };
    let Some(q) = path.find('?') else {
        return authority + path;
    };
    let (before_query, query) = path.split_at(q + 1);
    let (query, fragment) = query.split_at(query.find('#').unwrap_or(query.len()));
    let params: Vec<String> = query
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((name, _))
                if is_secret_name(name)
                    || SECRET_QUERY_NAMES.contains(&name.to_ascii_lowercase().as_str()) =>
            {
                format!("{name}={REDACTED}")
            }
            _ => param.to_string(),
        })
        .collect();
    format!("{authority}{before_query}{}{fragment}", params.join("&"))
}

/// `NAME` of a `NAME=VALUE` word whose name looks secret (a name holds no
/// whitespace: `echo a b=c` is not an assignment of `echo a b`).
fn secret_assignment(word: &str) -> Option<&str> {
    let (name, _) = word.split_once('=')?;
    (!name.is_empty() && !name.contains(char::is_whitespace) && is_secret_name(name))
        .then_some(name)
}

/// What to do with each word of an argv or command line: Some(text)
/// replaces the word, None keeps it (URLs inside are still redacted).
fn redact_words(words: &[&str]) -> Vec<Option<String>> {
    let mut out: Vec<Option<String>> = Vec::with_capacity(words.len());
    // The next word is a secret value (after `--password`, `password:`,
    // `password =`), and after `Authorization: Bearer` the one after too.
    let mut redact_next = false;
    let mut after_auth_name = false;
    let mut i = 0;
    while i < words.len() {
        let word = words[i];
        i += 1;
        if redact_next {
            redact_next = false;
            // `--token --other`: the next word is an option, not a value.
            if !word.starts_with('-') || word == "-" {
                if after_auth_name && AUTH_SCHEMES.contains(&word.to_ascii_lowercase().as_str()) {
                    // `Authorization: Bearer X`: keep the scheme, hide X.
                    redact_next = true;
                    out.push(None);
                } else {
                    out.push(Some(REDACTED.to_string()));
                }
                after_auth_name = false;
                continue;
            }
            after_auth_name = false;
        }
        let has_space = word.contains(char::is_whitespace);
        // `sh -c '...'`, `bash -lc "..."`, `python3 -c "..."`: a program.
        if has_space && i >= 2 && is_dash_c(words[i - 2]) {
            out.push(redacted_line(word));
            continue;
        }
        if let Some(name) = secret_assignment(word) {
            out.push(Some(format!("{name}={REDACTED}")));
            continue;
        }
        if has_space {
            out.push(redacted_line(word));
            continue;
        }
        let name = word.strip_suffix(':').unwrap_or(word);
        let is_option = word.starts_with('-') && !word.contains('=') && word.len() > 2;
        let is_key = word.ends_with(':') && !name.contains(':');
        let assigns = words.get(i) == Some(&"=");
        if (is_option || is_key || assigns) && is_secret_name(name) {
            if assigns {
                // `name = value`: keep `=`, hide the value.
                out.push(None);
                out.push(None);
                i += 1;
            } else {
                out.push(None);
            }
            after_auth_name = name
                .trim_matches(['"', '\''])
                .eq_ignore_ascii_case("authorization");
            redact_next = true;
            continue;
        }
        out.push(None);
    }
    out
}

/// A word holding a command line, redacted; None when nothing in it was
/// (the word is then kept as written: prose with an apostrophe, read as an
/// unclosed quote, keeps it).
fn redacted_line(word: &str) -> Option<String> {
    let redacted = redact_command_line(word);
    (redacted != word).then_some(redacted)
}

/// `-c` or a cluster of short options ending the shell's (`-lc`, `-ec`):
/// the next word is a command line.
fn is_dash_c(word: &str) -> bool {
    word.strip_prefix('-').is_some_and(|flags| {
        !flags.starts_with('-')
            && flags.ends_with('c')
            && flags.chars().all(|c| c.is_ascii_alphabetic())
    })
}

/// Redacts secrets in an argv (see the module docs for the forms).
pub fn redact_args(args: &[String]) -> Vec<String> {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    redact_words(&words)
        .into_iter()
        .zip(args)
        .map(|(replaced, arg)| replaced.unwrap_or_else(|| redact_url_password(arg)))
        .collect()
}

/// One shell word of a command line: its span in the line and its text
/// with quotes and backslashes removed.
struct ShellWord {
    start: usize,
    end: usize,
    text: String,
}

/// Splits a command line into words as a POSIX shell would (quotes and
/// backslashes; no expansions). An unclosed quote runs to the end.
fn shell_words(line: &str) -> Vec<ShellWord> {
    let mut words = Vec::new();
    let mut chars = line.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut text = String::new();
        let mut end = start;
        let mut quote: Option<char> = None;
        while let Some(&(i, c)) = chars.peek() {
            if quote.is_none() && c.is_whitespace() {
                break;
            }
            chars.next();
            end = i + c.len_utf8();
            match (quote, c) {
                (None, '\'' | '"') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                (None | Some('"'), '\\') => {
                    if let Some((j, escaped)) = chars.next() {
                        text.push(escaped);
                        end = j + escaped.len_utf8();
                    }
                }
                (_, c) => text.push(c),
            }
        }
        words.push(ShellWord { start, end, text });
    }
    words
}

/// Redacts a command line held in one string (`sh -c '...'`, a log line):
/// the argv forms on its shell words, whitespace and unredacted words kept
/// as written.
pub fn redact_command_line(line: &str) -> String {
    let words = shell_words(line);
    let texts: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
    let replaced = redact_words(&texts);
    let mut out = String::with_capacity(line.len());
    let mut pos = 0;
    for (word, replacement) in words.iter().zip(replaced) {
        out.push_str(&line[pos..word.start]);
        let raw = &line[word.start..word.end];
        match replacement {
            // A quoted word (a command line, a quoted value): keep its
            // quotes.
            Some(r)
                if raw.len() >= 2 && raw.starts_with(['\'', '"']) && raw.ends_with(&raw[..1]) =>
            {
                let q = &raw[..1];
                out.push_str(&format!("{q}{r}{q}"));
            }
            Some(r) => out.push_str(&r),
            None => out.push_str(&redact_url_password(raw)),
        }
        pos = word.end;
    }
    out.push_str(&line[pos..]);
    out
}

/// Redacts a JSON document: values under secret-looking keys, `command`
/// arrays of strings as argv, and every string as a command line.
pub fn redact_json(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                // A bare `key` names things (verdict.json's evidence keys,
                // object keys), it does not hold a secret.
                let secret_key = is_secret_name(k) && !k.eq_ignore_ascii_case("key");
                if secret_key && !matches!(v, Value::Object(_) | Value::Array(_)) {
                    *v = Value::String(REDACTED.to_string());
                } else if secret_key && v.is_array() {
                    // A list of secrets (`"api_keys": ["..", ".."]`).
                    redact_all_strings(v);
                } else if matches!(k.as_str(), "command" | "cmdline" | "argv" | "args")
                    && let Value::Array(items) = v
                    && items.iter().all(Value::is_string)
                {
                    let argv: Vec<String> = items
                        .iter()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect();
                    *items = redact_args(&argv).into_iter().map(Value::String).collect();
                } else {
                    redact_json(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_json),
        Value::String(s) => *s = redact_command_line(s),
        _ => {}
    }
}

fn redact_all_strings(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::String(s) => *s = REDACTED.to_string(),
        Value::Array(items) => items.iter_mut().for_each(redact_all_strings),
        Value::Object(map) => map.values_mut().for_each(redact_all_strings),
        _ => {}
    }
}

/// Redacts free text line by line: config lines (`name: value`,
/// `- name: value`, `name = value`), and every line as a command line.
pub fn redact_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        // YAML `key: value`, in a list item or not: the whole value goes
        // (it may hold spaces).
        if let Some((k, _)) = body.split_once(": ") {
            let key = k.trim_start().trim_start_matches("- ").trim();
            if !key.is_empty() && !key.contains(' ') && is_secret_name(key) {
                out.push_str(&format!("{k}: {REDACTED}{nl}"));
                continue;
            }
        }
        out.push_str(&redact_command_line(body));
        out.push_str(nl);
    }
    out
}

#[cfg(test)]
mod tests;
