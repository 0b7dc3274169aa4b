//! A local S3 server for the integration tests: `moto_server`
//! (preinstalled) on 127.0.0.1, killed when the handle drops.
//!
//! The server picks its own port (`-p 0`) and the test reads it back from
//! the line moto prints once it listens. A port picked by the test and
//! handed to moto was racy under parallel test threads: between the test
//! releasing it and moto binding it, another test's server or TCP proxy
//! could take it; moto then failed to start while the readiness check
//! connected to the other test's listener, and requests got empty replies.
use std::{
    io::{BufRead, BufReader},
    net::{TcpListener, TcpStream},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

/// How long moto may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Moto {
    child: Child,
    pub port: u16,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nothing listens on (bound and released at once), for the
/// server-down cases. Never hand it to a server: see the module's note.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(1)
}

/// The port of werkzeug's "Running on http://127.0.0.1:PORT" line.
fn listening_port(line: &str) -> Option<u16> {
    let url = line.split("Running on http://127.0.0.1:").nth(1)?;
    let digits: String = url.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().filter(|&port| port != 0)
}

/// Starts moto_server (with `env`) on a port of its own, or `None` with a
/// printed reason when it cannot start.
pub fn start_moto(env: &[(&str, &str)]) -> Option<Moto> {
    let mut cmd = Command::new("moto_server");
    cmd.args(["-H", "127.0.0.1", "-p", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skipping: cannot start moto_server ({e}); pip install 'moto[server]'");
            return None;
        }
    };
    let stderr = child.stderr.take()?;
    let (found, port) = mpsc::channel();
    std::thread::spawn(move || {
        let mut found = Some(found);
        // Read to the end: moto logs every request on stderr, and a full
        // pipe would stall it.
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Some(port) = listening_port(&line)
                && let Some(found) = found.take()
            {
                let _ = found.send(port);
            }
        }
    });
    let port = port.recv_timeout(START_TIMEOUT);
    let moto = Moto {
        child,
        port: *port.as_ref().unwrap_or(&0),
    };
    if port.is_err() {
        eprintln!("skipping: moto_server did not say where it listens within {START_TIMEOUT:?}");
        return None;
    }
    // Printed once the socket listens; a connection confirms it.
    let t = Instant::now();
    while t.elapsed() < START_TIMEOUT {
        if TcpStream::connect(("127.0.0.1", moto.port)).is_ok() {
            return Some(moto);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("skipping: moto_server did not accept on {}", moto.port);
    None
}

#[test]
fn reads_the_listening_port() {
    assert_eq!(
        listening_port(" * Running on http://127.0.0.1:38373"),
        Some(38373)
    );
    assert_eq!(listening_port("Press CTRL+C to quit"), None);
    assert_eq!(listening_port(" * Running on http://127.0.0.1:0"), None);
}
