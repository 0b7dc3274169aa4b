//! The scenarios whose data comes over the network: an HTTP server in a
//! network namespace behind a shaped veth link, read by urllib threads and
//! by a PyTorch trainer fetching its own samples.
use std::process::{Child, Command, Stdio};

use super::{
    scenarios::{npy_in_process, path_str, torch_data},
    *,
};

/// A network namespace with a veth link to it, shaped (tests/frameworks/
/// netns_link.sh), and an HTTP server serving `data` inside it; both go
/// when dropped. One at a time: the namespace's name and address are
/// fixed, and the scenarios run one after another.
struct ShapedServer {
    script: String,
    netns: &'static str,
    server: Child,
    url: String,
}

impl ShapedServer {
    fn start(ctx: &Ctx, data: &str, mbit: u32) -> ShapedServer {
        let script = ctx.script("netns_link.sh");
        let netns = "spframeworks";
        let out = Command::new("sh")
            .args([script.as_str(), "up", netns, &mbit.to_string()])
            .output()
            .expect("run netns_link.sh");
        assert!(
            out.status.success(),
            "netns_link.sh up failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let addr = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let server = Command::new("ip")
            .args(["netns", "exec", netns])
            .args(ctx.py(
                "http_loader.py",
                &["serve", "--data", data, "--port", "8000", "--bind", &addr],
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the HTTP server");
        // A client that does not wait for the server (the PyTorch dataset)
        // would be refused while it starts on a loaded machine.
        let listening = format!("{addr}:8000");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(&listening).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the HTTP server did not listen on {listening} within 10 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        ShapedServer {
            script,
            netns,
            server,
            url: format!("http://{addr}:8000"),
        }
    }
}

impl Drop for ShapedServer {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
        let _ = Command::new("sh")
            .args([self.script.as_str(), "down", self.netns])
            .status();
    }
}

/// Two urllib threads fetching 8 MiB objects through a 200 Mbit/s link:
/// network-bound when the consumer alone and the unshaped loader are both
/// far faster, and the loader's CPU is low.
pub(super) fn http_shaped_link(ctx: &Ctx, name: &str) -> Outcome {
    let data = ctx.work.join("http-data");
    ctx.prep("http_loader.py", &data, &[]);
    let data = path_str(&data);
    let client = |mode: &str, url: &str, extra: &[&str]| {
        let mut args = vec![mode, "--url", url, "--data", data.as_str()];
        args.extend(extra);
        ctx.py("http_loader.py", &args)
    };
    let free = {
        let link = ShapedServer::start(ctx, &data, 0);
        ctx.control(&client("loader", &link.url, &["--duration", "3"]))
            .0
    };
    let link = ShapedServer::start(ctx, &data, 200);
    let (l, runs) = ctx.control(&client("loader", &link.url, &["--duration", "3"]));
    let (c, _) = ctx.control(&client("consumer", &link.url, &["--duration", "3"]));
    // CPU while fetching: start-up (imports, the first connection) is not
    // the loader's work.
    let cpu = runs[0].cpu_s_timed.unwrap_or(runs[0].cpu_s) / runs[0].seconds.max(1e-9);
    let truth = truth_by_rates(name, l, c, "network-bound");
    assert!(
        free / l >= 1.5 && cpu < 0.5,
        "{name}: broken scenario: unshaped {free:.1}/s against shaped {l:.1}/s, loader CPU \
         {cpu:.2}"
    );
    let diagnosis = diagnose(ctx, name, &[], &client("job", &link.url, &[]));
    drop(link);
    Outcome {
        name: name.into(),
        truth,
        controls: format!(
            "loader {} (unshaped {}, CPU {cpu:.2}) / consumer {}",
            fmt_rate(l),
            fmt_rate(free),
            fmt_rate(c)
        ),
        diagnosis,
    }
}

/// A PyTorch trainer without workers (`num_workers=0`) whose dataset
/// fetches each 48 KiB sample over HTTP (urllib, with a timeout) through a
/// 20 Mbit/s link: its own thread waits on the socket inside `next()`, in
/// poll() rather than a receive. Network-bound when the consumer alone and
/// the unshaped loader are both far faster. The job trains 16 s: over 8 s
/// its kernel AU read 4.4-5.9 points above the workload's 10-11% (a short
/// run's edges, the first step the workload leaves out of its timing and
/// the final `gc.collect()`, weigh 1.3 points per 0.1 s there).
pub(super) fn torch_http_in_process(ctx: &Ctx, name: &str) -> Outcome {
    let data = torch_data(ctx);
    let with = |mode: &str, url: &str, extra: &[&str]| {
        let mut args = vec!["--batch-size", "8", "--url", url];
        args.extend(extra);
        npy_in_process(ctx, &data, mode, &args)
    };
    let loader = ["--epochs", "50", "--duration", "3"];
    let free = {
        let link = ShapedServer::start(ctx, &data, 0);
        ctx.control(&with("loader", &link.url, &loader)).0
    };
    let link = ShapedServer::start(ctx, &data, 20);
    let (l, _) = ctx.control(&with("loader", &link.url, &loader));
    let (c, _) = ctx.control(&with("consumer", &link.url, &["--duration", "3"]));
    let truth = truth_by_rates(name, l, c, "network-bound");
    assert!(
        free / l >= 1.5,
        "{name}: broken scenario: unshaped {free:.1}/s against shaped {l:.1}/s"
    );
    let job = with("job", &link.url, &["--duration", "16"]);
    let diagnosis = diagnose(ctx, name, &[], &job);
    drop(link);
    Outcome {
        name: name.into(),
        truth,
        controls: format!(
            "loader {} (unshaped {}) / consumer {}",
            fmt_rate(l),
            fmt_rate(free),
            fmt_rate(c)
        ),
        diagnosis,
    }
}
