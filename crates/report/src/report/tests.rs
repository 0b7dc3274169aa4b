use super::{checkpoint_note, command_ending, render_markdown};
use crate::diagnosis::diagnose;
use storprof_analysis::Thresholds;
use storprof_session::{
    load::Session,
    model::{
        DeviceStats, LowerDevice, OffCpuNs, SessionInfo, Stacking, ThreadStats, TimeSeries,
        VmstatSeries,
    },
};

/// A writer that wrote 4 GiB in 10 s, 8 s of it throttled in
/// balance_dirty_pages, on a device whose writes took 1-2 ms, with a
/// vmstat series, and a reader that read 64 MiB.
fn write_session() -> Session {
    const S: u64 = 1_000_000_000;
    let mut s = Session::default();
    s.info.freq_hz = 100;
    s.info.duration_s = 10.0;
    s.info
        .features
        .insert("syscall_timing".into(), "blocked".into());
    let thread = |tid: u32, comm: &str, write: u64, read: u64| ThreadStats {
        pid: 20,
        tid,
        comm: comm.into(),
        on_cpu_ns: S,
        off_cpu_ns: OffCpuNs {
            uninterruptible: 9 * S,
            ..Default::default()
        },
        write_bytes: write,
        read_bytes: read,
        ..Default::default()
    };
    s.threads = vec![
        thread(20, "ckpt", 4 << 30, 0),
        thread(21, "log", 0, 64 << 20),
    ];
    s.offcpu.stacks = vec![(
        "ckpt;main;vfs_write_[k];balance_dirty_pages_[k];schedule_[k]".into(),
        8_000_000,
    )];
    s.io.devices = vec![DeviceStats {
        name: "loop0".into(),
        dev: "7:0".into(),
        read_bytes: 1 << 20,
        read_requests: 4,
        write_bytes: 100 << 20,
        write_requests: 100,
        latency_log2_ns: [vec![0; 16], vec![4], vec![0; 3], vec![100]].concat(),
        read_latency_log2_ns: [vec![0; 16], vec![4]].concat(),
        write_latency_log2_ns: [vec![0; 20], vec![100]].concat(),
        busy_ns: 9 * S,
        utilization: 0.9,
        ..Default::default()
    }];
    s.timeseries = Some(TimeSeries {
        bucket_ns: S,
        host_cpu: None,
        vmstat: Some(VmstatSeries {
            dirty_bytes: vec![8 << 20, 16 << 20],
            writeback_bytes: vec![1 << 20, 3 << 20],
            dirtied_bytes: vec![24 << 20, 8 << 20],
            written_bytes: vec![8 << 20, 8 << 20],
        }),
        ..Default::default()
    });
    s
}

#[test]
fn write_sessions_show_the_writers_split_device_writes_and_dirty_pages() {
    let s = write_session();
    let md = render_markdown(&s, &diagnose(&s, &Thresholds::default()));
    assert!(md.contains("## Writers"), "{md}");
    // The writer's row: 10% on CPU (no samples: other kernel), 80%
    // throttled, the rest (D sleep outside these stacks) other.
    assert!(
        md.contains(
            "| all writers (1 thread(s): ckpt) | 4096.0 | 10.0 | 0.0% | 0.0% | 10.0% | 0.0% \
             | 0.0% | 80.0% (80.0%) | 10.0% |"
        ),
        "{md}"
    );
    // Reads ≤ 131 µs (bucket 16), writes ≤ 2097 µs (bucket 20), both
    // in the whole-device figure.
    assert!(
        md.contains(
            "| `loop0` | 1.0 | 0.10 | 4 | ≤ 131 / ≤ 131 µs | 100.0 | 10.00 | 100 \
             | ≤ 2097 / ≤ 2097 µs | 90.0% | ≤ 2097 / ≤ 2097 µs |"
        ),
        "{md}"
    );
    assert!(
        md.contains(
            "Dirty page cache (system-wide, /proc/vmstat each second): peak 16.0 MiB, \
             mean 12.0 MiB; under writeback: peak 3.0 MiB, mean 2.0 MiB; 32.0 MiB dirtied \
             and 16.0 MiB written back during the recording."
        ),
        "{md}"
    );
}

/// loop0's image lives on vda, which wrote its bytes again: vda's row
/// says so, and the line under the table explains the counting.
#[test]
fn a_disk_carrying_a_loop_image_says_so_in_the_device_table() {
    let mut s = write_session();
    s.io.devices[0].sits_on = vec![LowerDevice {
        name: "vda".into(),
        dev: "254:0".into(),
        via: Stacking::LoopImage,
    }];
    s.io.devices.push(DeviceStats {
        name: "vda".into(),
        dev: "254:0".into(),
        write_bytes: 101 << 20,
        write_requests: 50,
        ..Default::default()
    });
    let md = render_markdown(&s, &diagnose(&s, &Thresholds::default()));
    assert!(
        md.contains("| `vda` (carries `loop0`'s image file) |"),
        "{md}"
    );
    assert!(md.contains("| `loop0` |"), "{md}");
    assert!(md.contains("device totals count them once"), "{md}");
    // Without stacking read, neither.
    s.io.devices[0].sits_on.clear();
    let md = render_markdown(&s, &diagnose(&s, &Thresholds::default()));
    assert!(md.contains("| `vda` |") && !md.contains("carries"), "{md}");
}

#[test]
fn read_sessions_have_no_writers_section_nor_dirty_line() {
    let mut s = write_session();
    s.threads[0].write_bytes = 0;
    s.threads[1].read_bytes = 4 << 30;
    let md = render_markdown(&s, &diagnose(&s, &Thresholds::default()));
    assert!(!md.contains("## Writers"), "{md}");
    assert!(!md.contains("Dirty page cache"), "{md}");
}

#[test]
fn a_checkpoint_says_it_is_partial() {
    let mut i = storprof_session::model::SessionInfo {
        duration_s: 61.4,
        ..Default::default()
    };
    assert_eq!(checkpoint_note(&i), None);
    i.end_reason = "checkpoint".to_string();
    let note = checkpoint_note(&i).unwrap_or_default();
    assert!(note.starts_with("**Partial session.**"), "{note}");
    assert!(note.contains("61 s in"), "{note}");
}

#[test]
fn how_the_command_ended_is_said_only_when_storprof_ended_it() {
    let mut i = SessionInfo::default();
    // An older session, or a command that exited by itself.
    assert_eq!(command_ending(&i), None);
    i.ended_by = Some("exit".into());
    i.exit_code = Some(0);
    assert_eq!(command_ending(&i), None);
    i.ended_by = Some("duration-sigkill-after-grace".into());
    i.grace_s = Some(5.0);
    i.exit_code = None;
    i.exit_signal = Some(9);
    assert_eq!(
        command_ending(&i).as_deref(),
        Some(
            "The command ignored SIGTERM at --duration and was killed with SIGKILL \
             after the 5 s grace period."
        )
    );
    i.ended_by = Some("duration-sigterm".into());
    i.exit_signal = Some(15);
    assert_eq!(
        command_ending(&i).as_deref(),
        Some(
            "At --duration the command was sent SIGTERM and ended within the 5 s grace \
             period (signal 15)."
        )
    );
}

fn fixture(name: &str) -> Session {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/sessions")
        .join(name);
    storprof_session::load::load(&dir).unwrap()
}

#[test]
fn what_would_help_is_in_every_output_of_a_fitted_recording() {
    let s = fixture("real-threads-lock-contention");
    let d = diagnose(&s, &Thresholds::default());
    let md = render_markdown(&s, &d);
    assert!(md.contains("## What would help (projected)"), "{md}");
    assert!(md.contains("\n| lock | "), "{md}");
    let json: serde_json::Value = serde_json::from_str(&super::verdict_json(&d).unwrap()).unwrap();
    let rows = json["what_would_help"]["projections"].as_array().unwrap();
    assert!(rows.iter().any(|r| r["lever"] == "read-threads"
        && r["factor"] == 2.0
        && r["projected_au_percentage"].is_number()
        && r["low"].is_number()
        && r["reason"].is_string()));
    let term = super::render_terminal(&d);
    let helps: Vec<&str> = term.lines().filter(|l| l.contains("would help:")).collect();
    assert_eq!(helps.len(), 2, "{term}");
    assert!(helps[0].contains("would help: lock → AU "), "{term}");
}

#[test]
fn a_recording_without_a_projection_says_why_and_the_terminal_stays_quiet() {
    let s = fixture("real-arrow-workers-no-trainer");
    let d = diagnose(&s, &Thresholds::default());
    let md = render_markdown(&s, &d);
    assert!(
        md.contains("## What would help (projected)\n\nno projection: no consumer"),
        "{md}"
    );
    let json: serde_json::Value = serde_json::from_str(&super::verdict_json(&d).unwrap()).unwrap();
    assert!(
        json["what_would_help"]["none"]
            .as_str()
            .unwrap()
            .starts_with("no projection")
    );
    assert!(!super::render_terminal(&d).contains("would help"));
}
