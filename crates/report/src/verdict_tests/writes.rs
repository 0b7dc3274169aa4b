//! The write rules on synthetic sessions: each fires on its own kind of
//! session and not on the others, and read sessions keep their verdicts.
use storprof_analysis::{
    Thresholds,
    features::*,
    frames::HotFrames,
    verdict::{Decision, Figure, Note, VerdictId, decide},
};
use storprof_session::{
    load::Session,
    model::{DeviceStats, OffCpuNs, Stacking, SyscallStats, ThreadStats},
};

const GIB: u64 = 1 << 30;
const S: u64 = 1_000_000_000;

/// One checkpoint writer ("ckpt") alive 10 s that wrote 4 GiB, a vda
/// that wrote `device_write` bytes at `util`.
fn writer_session(
    on_cpu_s: u64,
    d_state_s: u64,
    syscalls: Vec<SyscallStats>,
    device_write: u64,
    util: f64,
) -> Session {
    let mut s = Session::default();
    s.info.freq_hz = 100;
    s.info.duration_s = 10.0;
    s.info.num_cpus = 2;
    s.info
        .features
        .insert("syscall_timing".into(), "blocked".into());
    s.threads = vec![ThreadStats {
        pid: 20,
        tid: 20,
        comm: "ckpt".into(),
        on_cpu_ns: on_cpu_s * S,
        off_cpu_ns: OffCpuNs {
            uninterruptible: d_state_s * S,
            sleeping: (10 - on_cpu_s - d_state_s) * S,
            ..Default::default()
        },
        write_bytes: 4 * GIB,
        syscalls,
        ..Default::default()
    }];
    s.io.devices = vec![DeviceStats {
        name: "vda".into(),
        dev: "254:0".into(),
        write_bytes: device_write,
        write_requests: device_write / (1 << 20),
        busy_ns: (util * 10.0 * 1e9) as u64,
        utilization: util,
        ..Default::default()
    }];
    s
}

fn sync_call(name: &str, nr: u32, count: u64, total_s: u64) -> SyscallStats {
    SyscallStats {
        nr,
        name: name.into(),
        count,
        total_ns: total_s * S,
        ..Default::default()
    }
}

fn decision(s: &Session) -> (Features, Decision) {
    let t = Thresholds::default();
    let f = Features::extract(s, &t);
    let d = decide(&f, &HotFrames::default(), &t);
    (f, d)
}

fn fired(d: &Decision, id: VerdictId) -> bool {
    d.primary.verdict == id && d.primary.fired
        || d.runners_up.iter().any(|r| r.verdict == id && r.fired)
}

fn writeback_session(wait_us: u64) -> Session {
    let mut s = writer_session(1, 9, vec![sync_call("fsync", 74, 4, 0)], 4 * GIB, 0.95);
    s.offcpu.stacks = vec![
        (
            "ckpt;main;write_shard;vfs_write_[k];generic_perform_write_[k];\
             balance_dirty_pages_ratelimited_flags_[k];balance_dirty_pages_[k];io_schedule_timeout_[k]"
                .into(),
            wait_us,
        ),
        ("ckpt;main;__x64_sys_fsync_[k];do_fsync_[k];folio_wait_writeback_[k]".into(), 500_000),
    ];
    s
}

/// The split of [`writeback_session`]'s writer: 1 s on CPU (no
/// samples: other kernel), 8 s throttled in balance_dirty_pages (inside
/// write), 0.5 s in fsync's writeback wait (counted as fsync time, 0 s
/// here: the call's time is what it is), 0.25 s blocked in write for
/// something else, the rest other off-CPU time.
#[test]
fn the_writer_time_split_comes_from_the_write_features() {
    let mut s = writeback_session(8_000_000);
    s.offcpu.stacks.push((
        "ckpt;main;write_shard;vfs_write_[k];ext4_buffered_write_iter_[k];down_write_[k]".into(),
        250_000,
    ));
    let (f, _) = decision(&s);
    let w = f.writes.as_ref().unwrap();
    let split = &w.time_split;
    let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(near(split.on_cpu_other_kernel, 0.1), "{split:?}");
    assert!(
        near(split.on_cpu_user + split.on_cpu_write_path, 0.0),
        "{split:?}"
    );
    assert!(near(split.writeback_wait, w.writer_writeback_wait_share));
    assert!(near(split.writeback_wait, 0.8), "{split:?}");
    assert!(near(split.dirty_throttle, 0.8), "{split:?}");
    assert!(near(split.write_blocked, 0.025), "{split:?}");
    assert!(near(split.fsync_blocked, w.writer_sync_share));
    assert!(near(
        split.other_off_cpu,
        1.0 - 0.1 - 0.8 - 0.025 - split.fsync_blocked
    ));
    // No per-thread stacks: no per-writer rows.
    assert!(w.writers.is_empty());
}

/// Two writers of one name: each row has its own thread's waits.
#[test]
fn each_writer_gets_its_own_split_from_its_thread_stacks() {
    let mut s = writer_session(1, 9, Vec::new(), 4 * GIB, 0.95);
    let mut second = s.threads[0].clone();
    second.tid = 21;
    second.write_bytes = 2 * GIB;
    s.threads.push(second);
    s.offcpu_threads.stacks = vec![
        (
            "ckpt;[20/20];vfs_write_[k];balance_dirty_pages_[k];schedule_[k]".into(),
            6_000_000,
        ),
        (
            "ckpt;[20/21];vfs_write_[k];down_write_[k];schedule_[k]".into(),
            3_000_000,
        ),
    ];
    s.oncpu_threads.stacks = vec![
        ("ckpt;[20/20];make_data".into(), 50),
        ("ckpt;[20/21];make_data".into(), 50),
    ];
    let (f, _) = decision(&s);
    let w = f.writes.as_ref().unwrap();
    assert_eq!(w.writers.len(), 2);
    let (first, other) = (&w.writers[0], &w.writers[1]);
    assert_eq!((first.tid, other.tid), (20, 21));
    assert!((first.split.dirty_throttle - 0.6).abs() < 1e-9, "{first:?}");
    assert_eq!(first.split.write_blocked, 0.0);
    assert_eq!(other.split.dirty_throttle, 0.0);
    assert!((other.split.write_blocked - 0.3).abs() < 1e-9, "{other:?}");
    assert!((first.thread_s - 10.0).abs() < 1e-9);
}

#[test]
fn dirty_page_figures_from_the_vmstat_series() {
    let mut s = writeback_session(8_000_000);
    s.timeseries = Some(storprof_session::model::TimeSeries {
        bucket_ns: S,
        host_cpu: None,
        vmstat: Some(storprof_session::model::VmstatSeries {
            dirty_bytes: vec![10 << 20, 30 << 20, 20 << 20],
            writeback_bytes: vec![0, 4 << 20, 2 << 20],
            dirtied_bytes: vec![10 << 20, 20 << 20, 0],
            written_bytes: vec![0, 0, 10 << 20],
        }),
        ..Default::default()
    });
    let (f, _) = decision(&s);
    let d = f.writes.unwrap().dirty.unwrap();
    assert_eq!((d.dirty_peak_mib, d.dirty_mean_mib), (30.0, 20.0));
    assert_eq!((d.writeback_peak_mib, d.writeback_mean_mib), (4.0, 2.0));
    assert_eq!((d.dirtied_mib, d.written_mib), (30.0, 10.0));
    // Without the series: none.
    let (f, _) = decision(&writeback_session(8_000_000));
    assert!(f.writes.unwrap().dirty.is_none());
}

#[test]
fn dirty_throttled_writers_are_writeback_bound() {
    let (f, d) = decision(&writeback_session(8_000_000));
    let w = f.writes.as_ref().unwrap();
    assert!(w.write_dominated);
    assert_eq!(w.writer_comms, vec!["ckpt".to_string()]);
    // The wait inside fsync is fsync's, not writeback's.
    assert!((w.writer_writeback_wait_share - 0.8).abs() < 1e-9, "{w:?}");
    assert!((w.writer_dirty_throttle_share - 0.8).abs() < 1e-9);
    assert_eq!(d.primary.verdict, VerdictId::WritebackBound);
    assert!(d.primary.fired);
    assert!(!fired(&d, VerdictId::FsyncBound));
    assert!(!fired(&d, VerdictId::WriteGeneratorBound));
    let v = crate::wording::verdict(&d);
    assert!(
        v.headline.contains("the device is the limit"),
        "{}",
        v.headline
    );
    assert!(
        v.evidence
            .iter()
            .any(|e| e.key == "writer_writeback_wait_share")
    );
    assert!(!v.headline.contains("only reached memory"));
}

#[test]
fn brief_throttling_is_not_writeback_bound() {
    let (_, d) = decision(&writeback_session(1_000_000));
    assert!(!fired(&d, VerdictId::WritebackBound));
}

fn fsync_session(sync_s: u64) -> Session {
    let mut s = writer_session(1, 8, vec![sync_call("fsync", 74, 8, sync_s)], 4 * GIB, 0.9);
    s.offcpu.stacks = vec![(
        "ckpt;main;__x64_sys_fsync_[k];do_fsync_[k];file_write_and_wait_range_[k];\
         __filemap_fdatawait_range_[k];folio_wait_writeback_[k];io_schedule_[k]"
            .into(),
        sync_s * 1_000_000,
    )];
    s
}

#[test]
fn writers_waiting_in_fsync_are_fsync_bound() {
    let (f, d) = decision(&fsync_session(7));
    let w = f.writes.as_ref().unwrap();
    assert!((w.writer_sync_share - 0.7).abs() < 1e-9, "{w:?}");
    assert_eq!(w.writer_sync_calls, 8);
    assert_eq!(w.writer_writeback_wait_share, 0.0);
    assert_eq!(d.primary.verdict, VerdictId::FsyncBound);
    assert!(d.primary.fired);
    assert!(!fired(&d, VerdictId::WritebackBound));
    assert!(!w.only_in_memory);
    // Short fsyncs are not the limit.
    let (_, d) = decision(&fsync_session(1));
    assert!(!fired(&d, VerdictId::FsyncBound));
}

fn generator_session(sync: Vec<SyscallStats>, device_write: u64) -> Session {
    let mut s = writer_session(9, 0, sync, device_write, 0.05);
    s.threads[0].samples_user = 800;
    s.threads[0].samples_kernel = 100;
    s.oncpu.stacks = vec![
        ("ckpt;main;fill_block;sha256_block".into(), 800),
        (
            "ckpt;main;write_shard;vfs_write_[k];generic_perform_write_[k];rep_movs_alternative_[k]"
                .into(),
            100,
        ),
    ];
    s
}

#[test]
fn writers_busy_making_data_are_write_generator_bound() {
    let (f, d) = decision(&generator_session(
        vec![sync_call("fdatasync", 75, 4, 0)],
        4 * GIB,
    ));
    let w = f.writes.as_ref().unwrap();
    assert!((w.writer_on_cpu_share - 0.9).abs() < 1e-9);
    assert!((w.own_work_share() - 8.0 / 9.0).abs() < 1e-9);
    // The read rules see the busy writer as a CPU-bound "reader": the
    // write finding still comes first.
    assert_eq!(d.primary.verdict, VerdictId::WriteGeneratorBound);
    assert!(d.primary.fired);
    assert!(!fired(&d, VerdictId::FsyncBound));
    assert!(
        !d.notes
            .iter()
            .any(|n| matches!(n, Note::WritesOnlyInMemory { .. }))
    );
}

#[test]
fn a_busy_device_is_not_a_slow_generator() {
    let mut s = generator_session(vec![sync_call("fsync", 74, 4, 0)], 4 * GIB);
    s.io.devices[0].utilization = 0.9;
    let (_, d) = decision(&s);
    assert!(!fired(&d, VerdictId::WriteGeneratorBound));
}

#[test]
fn unsynced_writes_that_stayed_in_the_page_cache_are_called_so() {
    let (f, d) = decision(&generator_session(Vec::new(), 100 << 20));
    let w = f.writes.as_ref().unwrap();
    assert!(w.only_in_memory, "{w:?}");
    assert!(
        d.notes
            .iter()
            .any(|n| matches!(n, Note::WritesOnlyInMemory { .. }))
    );
    let v = crate::wording::verdict(&d);
    assert!(v.headline.contains("only reached memory"), "{}", v.headline);
    assert!(v.notes.iter().any(|n| n.contains("only reached memory")));
    // An fsync, or the devices writing most of it, is not memory only.
    let (f, _) = decision(&generator_session(vec![sync_call("fsync", 74, 1, 0)], 0));
    assert!(!f.writes.unwrap().only_in_memory);
    let (f, _) = decision(&generator_session(Vec::new(), 3 * GIB));
    assert!(!f.writes.unwrap().only_in_memory);
}

/// A checkpoint that reads its shards back reads as much as it writes:
/// the write rules stay out, the read rules decide.
#[test]
fn read_back_sessions_are_not_write_dominated() {
    let mut s = fsync_session(7);
    s.threads[0].read_bytes = 4 * GIB;
    let (f, d) = decision(&s);
    assert!(!f.writes.unwrap().write_dominated);
    assert!(!d.primary.verdict.is_write());
    for id in [
        VerdictId::WritebackBound,
        VerdictId::FsyncBound,
        VerdictId::WriteGeneratorBound,
    ] {
        assert!(!fired(&d, id));
    }
}

/// `name` (dev `dev`) on `lower` ((name, dev) nearest first), reached
/// by `via`.
fn stacked(name: &str, dev: &str, lower: &[(&str, &str)], via: Stacking) -> DeviceStats {
    DeviceStats {
        name: name.into(),
        dev: dev.into(),
        sits_on: lower
            .iter()
            .map(|(n, d)| storprof_session::model::LowerDevice {
                name: (*n).into(),
                dev: (*d).into(),
                via,
            })
            .collect(),
        ..Default::default()
    }
}

/// The loop scenario of tests/write_scenarios.rs: the writer's ext4 is
/// on loop0, whose image file is on vda, so vda writes the bytes again
/// (plus a little of its own) and is the busier of the two.
#[test]
fn a_disk_carrying_a_loop_image_gives_way_to_the_loop_device() {
    let mut s = writeback_session(8_000_000);
    let vda = s.io.devices[0].clone();
    let mut lo = stacked("loop0", "7:0", &[("vda", "254:0")], Stacking::LoopImage);
    lo.write_bytes = 4 * GIB;
    lo.utilization = 0.3;
    s.io.devices = vec![
        lo,
        DeviceStats {
            write_bytes: 4 * GIB + (100 << 20),
            ..vda.clone()
        },
    ];
    let (f, d) = decision(&s);
    let w = f.writes.as_ref().unwrap();
    assert_eq!(w.top_write_device.as_ref().unwrap().name, "loop0");
    // The image's bytes once: loop0's, and vda's own 100 MiB.
    assert_eq!(w.device_write_bytes, 4 * GIB + (100 << 20));
    let vda_feature = f.devices.iter().find(|d| d.name == "vda").unwrap();
    assert_eq!(
        vda_feature.carries,
        [CarriedDevice {
            name: "loop0".into(),
            via: Stacking::LoopImage
        }]
    );
    assert!(
        f.devices
            .iter()
            .find(|d| d.name == "loop0")
            .unwrap()
            .carries
            .is_empty()
    );
    // The verdict's device figures and headline name the loop device.
    assert!(fired(&d, VerdictId::WritebackBound));
    let finding = std::iter::once(&d.primary)
        .chain(&d.runners_up)
        .find(|r| r.verdict == VerdictId::WritebackBound)
        .unwrap();
    assert!(
        finding
            .figures
            .iter()
            .any(|fig| matches!(fig, Figure::DeviceWriteRate { device, .. } if device == "loop0")),
        "{:?}",
        finding.figures
    );
    let summary = crate::wording::summary(finding, d.basis);
    assert!(
        summary.contains("loop0") && !summary.contains("vda"),
        "{summary}"
    );

    // A disk with more writes of its own than the loop device's stays
    // the one named; a session recorded before stacking was read (no
    // sits_on) names the busiest writer, as before.
    let mut own = s.clone();
    own.io.devices[1].write_bytes = 9 * GIB;
    let (f, _) = decision(&own);
    let w = f.writes.as_ref().unwrap();
    assert_eq!(w.top_write_device.as_ref().unwrap().name, "vda");
    assert_eq!(w.device_write_bytes, 9 * GIB);
    let mut old = s.clone();
    old.io.devices[0].sits_on.clear();
    let (f, _) = decision(&old);
    let w = f.writes.as_ref().unwrap();
    assert_eq!(w.top_write_device.as_ref().unwrap().name, "vda");
    assert_eq!(w.device_write_bytes, 8 * GIB + (100 << 20));
    assert!(f.devices.iter().all(|d| d.carries.is_empty()));
}

/// Reads on a file system on dm-0 (on md0, on vda and vdb) on which a
/// loop device's image also lives: each lower device carries only the
/// device right on it, the read total counts each byte once, and the
/// device read from is the top one.
#[test]
fn stacked_reads_name_the_top_device_and_count_once() {
    let mut s = writeback_session(0);
    let mut lo = stacked(
        "loop0",
        "7:0",
        &[
            ("dm-0", "253:0"),
            ("md0", "9:0"),
            ("vda", "254:0"),
            ("vdb", "254:16"),
        ],
        Stacking::LoopImage,
    );
    lo.read_bytes = 2 * GIB;
    let mut dm = stacked(
        "dm-0",
        "253:0",
        &[("md0", "9:0"), ("vda", "254:0"), ("vdb", "254:16")],
        Stacking::Member,
    );
    dm.read_bytes = 2 * GIB;
    let mut md = stacked(
        "md0",
        "9:0",
        &[("vda", "254:0"), ("vdb", "254:16")],
        Stacking::Member,
    );
    md.read_bytes = 2 * GIB;
    let disk = |name: &str, dev: &str| DeviceStats {
        name: name.into(),
        dev: dev.into(),
        read_bytes: GIB,
        utilization: 0.9,
        ..Default::default()
    };
    s.io.devices = vec![lo, dm, md, disk("vda", "254:0"), disk("vdb", "254:16")];
    let (f, _) = decision(&s);
    assert_eq!(f.top_device.as_ref().unwrap().name, "loop0");
    // No traced reads: all devices' reads, stacked ones once.
    assert_eq!(f.device_read_bytes, 2 * GIB);
    let carried = |name: &str| -> Vec<String> {
        f.devices
            .iter()
            .find(|d| d.name == name)
            .unwrap()
            .carries
            .iter()
            .map(|c| c.name.clone())
            .collect()
    };
    assert_eq!(carried("dm-0"), ["loop0"]);
    assert_eq!(carried("md0"), ["dm-0"]);
    assert_eq!(carried("vda"), ["md0"]);
    assert_eq!(carried("vdb"), ["md0"]);
    assert!(carried("loop0").is_empty());
}

/// Pages a buffered writer added to the page cache are not storage
/// supplying reads: the hit ratio and "storage supplied" see only the
/// read misses.
#[test]
fn buffered_writes_pages_are_not_read_misses() {
    let mut s = writeback_session(0);
    s.threads[0].read_bytes = 64 << 20;
    s.io.page_cache.page_size = 4096;
    // 16 MiB of reads missed, 4 GiB of pages came from writes.
    s.io.page_cache.misses_pages = 4096;
    s.io.page_cache.write_pages = (4 * GIB) / 4096;
    let (f, _) = decision(&s);
    assert_eq!(f.page_cache_miss_bytes, 16 << 20);
    assert_eq!(f.page_cache_write_bytes, 4 * GIB);
    assert!((f.page_cache_hit_ratio.unwrap() - 0.75).abs() < 1e-9);
    let line = crate::report::read_supply_line(&f);
    assert!(line.contains("storage supplied 16.0 MiB"), "{line}");
    assert!(
        line.contains("Buffered writes added 4096.0 MiB of new pages"),
        "{line}"
    );
    // Without write pages (or in an older session) the line is as it was.
    s.io.page_cache.write_pages = 0;
    let (f, _) = decision(&s);
    let line = crate::report::read_supply_line(&f);
    assert!(!line.contains("Buffered"), "{line}");
}
