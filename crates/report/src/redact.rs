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
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    fn assert_hidden(text: &str, secrets: &[&str]) {
        for secret in secrets {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
    }

    #[test]
    fn secret_names() {
        for n in [
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ACCESS_KEY_ID",
            "AWS_SESSION_TOKEN",
            "--password",
            "--s3-secret-key",
            "++workload.storage.storage_options.secret_access_key",
            "db.passwd",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "Cookie",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in [
            "--data-dir",
            "dataset.num_files_train",
            "--reader",
            "PATH",
            "PWD",
        ] {
            assert!(!is_secret_name(n), "{n}");
        }
    }

    #[test]
    fn redacts_all_argument_forms() {
        let got = redact_args(&args(&[
            "env",
            "AWS_SECRET_ACCESS_KEY=abc123",
            "storprof",
            "bench",
            "--s3-secret-key",
            "hunter2",
            "--token=xyz",
            "--api-key",
            "--verbose",
            "++workload.storage.storage_options.access_key_id=AKIA123",
            "--endpoint",
            "http://user:pa55@minio:9000/bucket",
            "--data-dir",
            "/data/flux",
        ]));
        assert_hidden(
            &got.join(" "),
            &["abc123", "hunter2", "xyz", "AKIA123", "pa55"],
        );
        assert_eq!(got[1], "AWS_SECRET_ACCESS_KEY=<redacted>");
        assert_eq!(got[5], REDACTED);
        assert_eq!(got[6], "--token=<redacted>");
        // `--api-key --verbose`: the option after is kept.
        assert_eq!(got[8], "--verbose");
        assert_eq!(got[11], "http://user:<redacted>@minio:9000/bucket");
        assert_eq!(got[13], "/data/flux");
    }

    #[test]
    fn a_shell_command_line_in_one_argument_is_redacted_word_by_word() {
        // The processes a shell starts: their environment and arguments are
        // only in the shell's `-c` string.
        let script = "cd /data && env SECRET_TOKEN=tok-1 AWS_SECRET_ACCESS_KEY=\"aws 2\" \
                      ./child --password hunter2 --db-passwd='p w3' --data-dir /data \
                      s3://AKIAX:s3cret4@minio:9000/b";
        let got = redact_args(&args(&["sh", "-c", script]));
        assert_eq!(&got[..2], ["sh", "-c"]);
        assert_hidden(
            &got[2],
            &[
                "tok-1", "aws 2", "aws", "hunter2", "p w3", "s3cret4", "AKIAX",
            ],
        );
        assert_eq!(
            got[2],
            "cd /data && env SECRET_TOKEN=<redacted> AWS_SECRET_ACCESS_KEY=<redacted> \
             ./child --password <redacted> --db-passwd=<redacted> --data-dir /data \
             s3://<redacted>:<redacted>@minio:9000/b"
        );
        // Nested: bash -c inside sh -c.
        let nested = redact_args(&args(&[
            "sh",
            "-c",
            "bash -lc 'python3 train.py --api-token t0k3n' ; echo done",
        ]));
        assert_eq!(
            nested[2],
            "bash -lc 'python3 train.py --api-token <redacted>' ; echo done"
        );
    }

    #[test]
    fn urls_lose_passwords_key_ids_and_signed_query_parameters() {
        assert_eq!(
            redact_url_password("see https://u:p4ss@h/x and http://v:q@h2:80/ done"),
            "see https://u:<redacted>@h/x and http://v:<redacted>@h2:80/ done"
        );
        assert_eq!(
            redact_url_password("s3://AKIA1:wJal@bucket/key"),
            "s3://<redacted>:<redacted>@bucket/key"
        );
        let presigned = "https://b.s3.amazonaws.com/o?X-Amz-Algorithm=AWS4-HMAC-SHA256\
                         &X-Amz-Credential=AKIA2%2F2026&X-Amz-Signature=abcdef\
                         &X-Amz-Security-Token=FwoG&partNumber=1#frag";
        assert_eq!(
            redact_url_password(presigned),
            "https://b.s3.amazonaws.com/o?X-Amz-Algorithm=AWS4-HMAC-SHA256\
             &X-Amz-Credential=<redacted>&X-Amz-Signature=<redacted>\
             &X-Amz-Security-Token=<redacted>&partNumber=1#frag"
        );
        assert_eq!(
            redact_url_password("https://acct.blob.core.windows.net/c?sv=2022&sig=Zm9v"),
            "https://acct.blob.core.windows.net/c?sv=2022&sig=<redacted>"
        );
        // No credentials: unchanged.
        for s in [
            "http://host:9000/a@b",
            "file:///tmp/x",
            "no url",
            "user@host:path",
        ] {
            assert_eq!(redact_url_password(s), s);
        }
    }

    #[test]
    fn redacts_json_and_text() {
        let mut v = serde_json::json!({
            "command": ["storprof", "--password", "p"],
            "storage": {"secret_key": "s", "endpoint": "s3://a:b@host/x", "bucket": "data"},
            "list": [{"token": 5}],
            "api_keys": ["k1", "k2"],
            "note": "ran sh -c 'FOO_TOKEN=zz9 x'",
        });
        redact_json(&mut v);
        let s = v.to_string();
        assert!(
            !s.contains("\"p\"") && !s.contains("\"s\"") && !s.contains(":b@") && !s.contains(":5"),
            "{s}"
        );
        assert_hidden(&s, &["k1", "k2", "zz9"]);
        assert!(s.contains("\"bucket\":\"data\""));
        let t = redact_text("secret_key: abc\nrun FOO_TOKEN=zzz ok\nplain: value\n");
        assert_eq!(
            t,
            "secret_key: <redacted>\nrun FOO_TOKEN=<redacted> ok\nplain: value\n"
        );
    }

    #[test]
    fn config_files_of_every_common_kind() {
        // DLIO / hydra YAML, with a list item and an URL.
        let yaml = "storage:\n  storage_type: s3\n  storage_root: s3://AKIA3:y4ml@minio/b\n  \
                    storage_options:\n    access_key_id: AKIA4\n    secret_access_key: \"y a m l\"\n\
                    \x20 - password: li5t\n";
        let got = redact_text(yaml);
        assert_hidden(&got, &["AKIA3", "y4ml", "AKIA4", "y a m l", "li5t"]);
        assert!(got.contains("  storage_type: s3\n"), "{got}");
        // ~/.aws/credentials (INI), TOML, .env.
        let ini = "[default]\naws_access_key_id = AKIA5\naws_secret_access_key = 1n1\nregion = us-east-1\n";
        let got = redact_text(ini);
        assert_hidden(&got, &["AKIA5", "1n1"]);
        assert!(
            got.contains("aws_secret_access_key = <redacted>\n"),
            "{got}"
        );
        assert!(got.contains("region = us-east-1\n"), "{got}");
        let toml = "password = \"t o m l\"\nname = \"x\"\n";
        // The quotes stay: the file is still TOML.
        assert_eq!(
            redact_text(toml),
            "password = \"<redacted>\"\nname = \"x\"\n"
        );
        let env = "export AWS_SESSION_TOKEN='e n v'\nHF_TOKEN=hf_abc\nHOME=/root\n";
        let got = redact_text(env);
        assert_hidden(&got, &["e n v", "hf_abc"]);
        assert!(got.ends_with("HOME=/root\n"), "{got}");
        // A JSON line in a log and an HTTP header.
        let log = "{\"user\": \"u\", \"password\": \"j50n\"}\n\
                   curl -H 'Authorization: Bearer b34r3r' https://h/x\n";
        let got = redact_text(log);
        assert_hidden(&got, &["j50n", "b34r3r"]);
        assert!(got.contains("Bearer"), "{got}");
    }

    /// Redaction covers what storprof stores: the launched argv, names
    /// and frames. A reader of another process's environment or command
    /// line, or a dump of storprof's own environment (which holds the
    /// user's credentials under `sudo -E`), would store what it never
    /// sees; this test fails when code starts to read them.
    #[test]
    fn no_code_reads_environments_or_other_command_lines() {
        // Every crate of the workspace that a session's data passes through.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut dirs = vec![root.join("profiler/src"), root.join("crates")];
        let mut offenders = Vec::new();
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                if path.extension().is_none_or(|e| e != "rs")
                    || path.ends_with("report/src/redact.rs")
                {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                for pattern in ["/environ", "/cmdline", "env::vars()"] {
                    if text.contains(pattern) {
                        offenders.push(format!("{}: {pattern}", path.display()));
                    }
                }
            }
        }
        assert!(offenders.is_empty(), "{offenders:?}");
    }

    #[test]
    fn unclosed_quotes_and_odd_input_do_not_panic() {
        for s in [
            "'",
            "\"a",
            "\\",
            "a\\",
            "=",
            "--password",
            "x://",
            "://@",
            "é=ü --token",
        ] {
            let _ = redact_command_line(s);
            let _ = redact_text(s);
            let _ = redact_url_password(s);
        }
        assert_eq!(
            redact_command_line("--token 'unclosed"),
            "--token <redacted>"
        );
        // An apostrophe in prose is not a quote to take out.
        let prose = "readers inside read syscalls 96% of the readers' time";
        assert_eq!(redact_text(prose), prose);
        assert_eq!(
            redact_text("the user's password: hunter2 was set"),
            // (after a redaction, the apostrophe goes)
            "the users password: <redacted> was set"
        );
        // Quoted words keep their quotes (report.md's shell-quoted command).
        assert_eq!(
            redact_command_line("env 'AWS_SECRET_ACCESS_KEY=x y' run '--token=z'"),
            "env 'AWS_SECRET_ACCESS_KEY=<redacted>' run '--token=<redacted>'"
        );
    }
}
