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
    let ini =
        "[default]\naws_access_key_id = AKIA5\naws_secret_access_key = 1n1\nregion = us-east-1\n";
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
            // This test names the patterns it looks for.
            if path.extension().is_none_or(|e| e != "rs")
                || path.ends_with("report/src/redact/tests.rs")
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
