// Tests may unwrap: a failure is a test failure.
#![allow(clippy::expect_used)]
use super::flame::{Names, ReaderSide, build_tree, flame, node_count, thread_frame};
use super::*;
use storprof_analysis::{self, Thresholds};
use storprof_session::model::{DeviceSeries, ThreadSeries, ThreadStats};

/// A deterministic pseudo-random sequence (no dependency, same every run).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn folded(lines: Vec<(String, u64)>) -> FoldedStacks {
    FoldedStacks { stacks: lines }
}

/// A recording of `hours` with 1-second buckets: 48 threads with a value in
/// every bucket, two devices, and 40,000 distinct on-CPU and off-CPU stacks
/// of up to 40 frames over 3,000 function names.
pub(super) fn long_session(hours: u64) -> Session {
    let buckets = (hours * 3600) as usize;
    let mut rng = Lcg(7);
    let comms = ["python3", "pt_data_worker", "reader", "trainer", "gc", "io"];
    let mut threads = Vec::new();
    let mut series = Vec::new();
    for t in 0..48u32 {
        let comm = comms[(t % 6) as usize].to_string();
        let on: Vec<u64> = (0..buckets).map(|_| rng.below(1_000_000_000)).collect();
        let read: Vec<u64> = (0..buckets).map(|_| rng.below(64 << 20)).collect();
        threads.push(ThreadStats {
            pid: 100 + t / 8,
            tid: 1000 + t,
            comm: comm.clone(),
            on_cpu_ns: on.iter().sum(),
            read_bytes: read.iter().sum(),
            ..ThreadStats::default()
        });
        series.push(ThreadSeries {
            pid: 100 + t / 8,
            tid: 1000 + t,
            comm,
            first_bucket: 0,
            on_cpu_ns: on,
            read_bytes: read,
            ..ThreadSeries::default()
        });
    }
    let devices = ["vda", "nvme0n1"]
        .iter()
        .map(|name| DeviceSeries {
            name: name.to_string(),
            read_bytes: (0..buckets).map(|_| rng.below(512 << 20)).collect(),
            write_bytes: vec![0; buckets],
            busy_ns: Vec::new(),
        })
        .collect();
    let stacks = |rng: &mut Lcg| {
        let mut lines = Vec::new();
        for _ in 0..40_000 {
            let depth = 3 + rng.below(38) as usize;
            let mut frames = vec![comms[rng.below(6) as usize].to_string()];
            for d in 0..depth {
                // Mostly one of a few hot functions per depth, else one of
                // 3,000: hot paths with a long tail, like a real profile.
                let name = if rng.below(10) < 9 {
                    format!("hot_{d}_{}", rng.below(2))
                } else {
                    format!("func_{}", rng.below(3000))
                };
                frames.push(name);
            }
            lines.push((frames.join(";"), 1 + rng.below(1000)));
        }
        folded(lines)
    };
    let oncpu = stacks(&mut rng);
    let offcpu = stacks(&mut rng);
    let duration_s = buckets as f64;
    Session {
        info: storprof_session::model::SessionInfo {
            format_version: 2,
            storprof_version: "test".into(),
            hostname: "synthetic".into(),
            kernel: "6.18".into(),
            num_cpus: 2,
            start_unix_ns: 1,
            end_unix_ns: 1 + buckets as u64 * 1_000_000_000,
            duration_s,
            freq_hz: 99,
            command: vec!["python3".into(), "train.py".into()],
            ..Default::default()
        },
        threads,
        timeseries: Some(TimeSeries {
            bucket_ns: 1_000_000_000,
            start_unix_ns: 1,
            buckets: buckets as u32,
            threads: series,
            devices,
            host_cpu: None,
            vmstat: None,
        }),
        oncpu,
        offcpu,
        ..Session::default()
    }
}

fn check_tree(n: &Node, names: &[String], threshold: u64) {
    let sum: u64 = n.children.iter().map(|c| c.value).sum();
    assert!(sum <= n.value, "children hold more than their parent");
    for c in &n.children {
        let name = &names[c.name as usize];
        if !name.starts_with("[pruned ") {
            assert!(c.value >= threshold, "{name}: {} < {threshold}", c.value);
        }
        check_tree(c, names, threshold);
    }
}

#[test]
fn a_twelve_hour_recording_gives_a_page_under_5_mib() {
    let session = long_session(12);
    let analysis = crate::diagnosis::diagnose(&session, &Thresholds::default());
    let options = HtmlOptions::default();
    let data = build_data(&session, &analysis, &options);
    let page = render(&session, &analysis, &options);
    eprintln!(
        "12-hour synthetic session: report.html {} bytes; timeline {} buckets -> {} points; \
         on-CPU {} frames, {} pruned ({:.2}% of samples)",
        page.len(),
        data.timeline.buckets,
        data.timeline.points,
        data.flame.oncpu.frames,
        data.flame.oncpu.pruned_frames,
        data.flame.oncpu.pruned_share * 100.0
    );
    assert!(page.len() < 5 << 20, "report.html is {} bytes", page.len());
    let t = &data.timeline;
    assert_eq!(t.buckets, 43_200);
    assert_eq!(t.factor, 36);
    assert!(t.points <= options.max_timeline_points);
    for p in &t.panels {
        for s in &p.series {
            assert_eq!(s.mean.len(), t.points, "{}", s.label);
            assert_eq!(s.min.len(), t.points, "{}", s.label);
            assert_eq!(s.max.len(), t.points, "{}", s.label);
        }
    }
    for f in [&data.flame.oncpu, &data.flame.offcpu] {
        assert!(f.pruned_frames > 0);
        assert!(node_count(&f.root) <= options.max_flame_nodes);
        assert_eq!(f.root.value, f.total);
        let sum: u64 = f.root.children.iter().map(|c| c.value).sum();
        assert_eq!(sum, f.total, "pruning lost samples");
        check_tree(
            &f.root,
            &data.flame.names,
            (f.total as f64 * f.prune_share).ceil() as u64,
        );
    }
}

#[test]
fn pruned_frames_are_merged_into_one_frame_per_parent() {
    let stacks = folded(vec![
        ("a;b;x".into(), 998),
        ("a;c".into(), 1),
        ("a;d;e".into(), 1),
    ]);
    let tree = build_tree(&stacks, &ReaderSide::Nobody);
    let options = HtmlOptions {
        prune_share: 0.01,
        ..HtmlOptions::default()
    };
    let mut names = Names::default();
    names.get(ROOT_NAME);
    let f = flame(&tree, "samples", &mut names, &options, false);
    assert_eq!(f.frames, 6, "a, b, x, c, d, e");
    assert_eq!(f.pruned_frames, 3, "c, d and e");
    assert!((f.pruned_share - 0.002).abs() < 1e-12);
    let a = &f.root.children[0];
    assert_eq!(names.list[a.name as usize], "a");
    let kids: Vec<(&str, u64)> = a
        .children
        .iter()
        .map(|c| (names.list[c.name as usize].as_str(), c.value))
        .collect();
    assert_eq!(kids, [("b", 998), ("[pruned 3 frames, 0.20%]", 2)]);
}

#[test]
fn a_tree_with_too_many_frames_is_pruned_at_a_larger_share() {
    let mut rng = Lcg(3);
    let lines = (0..5000)
        .map(|i| {
            (
                format!("t;f{};g{}", i % 300, rng.below(50)),
                1 + rng.below(10),
            )
        })
        .collect();
    let tree = build_tree(&folded(lines), &ReaderSide::Nobody);
    let options = HtmlOptions {
        prune_share: 0.0,
        max_flame_nodes: 200,
        ..HtmlOptions::default()
    };
    let mut names = Names::default();
    names.get(ROOT_NAME);
    let f = flame(&tree, "samples", &mut names, &options, false);
    assert!(node_count(&f.root) <= 200, "{}", node_count(&f.root));
    assert!(f.prune_share > 0.0);
    assert_eq!(
        f.root.children.iter().map(|c| c.value).sum::<u64>(),
        f.total
    );
}

#[test]
fn the_differential_tree_splits_reader_samples_from_the_rest() {
    let stacks = folded(vec![
        ("reader;main;decode".into(), 30),
        ("reader;main;read".into(), 10),
        ("trainer;main;step".into(), 60),
    ]);
    let is_reader = |c: &str| c == "reader";
    let tree = build_tree(&stacks, &ReaderSide::Comms(&is_reader));
    assert_eq!((tree.value, tree.reader), (100, 40));
    let main = &tree.children["main"];
    assert_eq!((main.value, main.reader), (100, 40));
    assert_eq!(main.children["step"].reader, 0);
    assert_eq!(main.children["decode"].reader, 30);
    let mut names = Names::default();
    names.get(ROOT_NAME);
    let f = flame(&tree, "samples", &mut names, &HtmlOptions::default(), true);
    assert_eq!(f.base_share, Some(0.4));
    assert_eq!(f.root.reader, Some(40));
    assert_eq!(
        serde_json::to_string(&f.root.children[0].children[0]).unwrap(),
        format!("[{},30,[],30]", names.index["decode"])
    );
}

#[test]
fn per_thread_stacks_split_by_thread_id_and_merge_across_threads() {
    let stacks = folded(vec![
        ("python;[10/11];main;decode".into(), 30),
        ("python;[10/12];main;decode".into(), 20),
        ("python;[10/10];main;step".into(), 50),
        ("python;not-a-thread;main".into(), 7),
    ]);
    let is_loader = |pid: u32, tid: u32| pid == 10 && tid == 11;
    let tree = build_tree(&stacks, &ReaderSide::Threads(&is_loader));
    assert_eq!(
        (tree.value, tree.reader),
        (100, 30),
        "the malformed line is skipped"
    );
    let decode = &tree.children["main"].children["decode"];
    assert_eq!((decode.value, decode.reader), (50, 30));
    assert_eq!(thread_frame("[1/2]"), Some((1, 2)));
    assert_eq!(thread_frame("[1/x]"), None);
}

#[test]
fn downsampling_keeps_mean_min_and_max_per_group() {
    let (mean, min, max) = downsample(&[1.0, 5.0, 3.0, 7.0, 2.0], 2);
    assert_eq!(mean, [3.0, 5.0, 2.0]);
    assert_eq!(min, [1.0, 3.0, 2.0]);
    assert_eq!(max, [5.0, 7.0, 2.0]);
    let (mean, min, max) = downsample(&[1.234, 2.0], 1);
    assert_eq!(mean, [1.23, 2.0]);
    assert!(min.is_empty() && max.is_empty());
    assert_eq!(downsample_factor(43_200, 1200), 36);
    assert_eq!(downsample_factor(1000, 1200), 1);
    assert_eq!(downsample_factor(1201, 1200), 2);
    assert_eq!(downsample_factor(0, 1200), 1);
}

#[test]
fn frame_names_cannot_close_the_data_element() {
    let mut session = Session::default();
    let evil = "</script><script>alert(1)</script><!--";
    session.oncpu = folded(vec![(format!("python3;{evil};x\u{2028}y & z"), 5)]);
    let analysis = crate::diagnosis::diagnose(&session, &Thresholds::default());
    let page = render(&session, &analysis, &HtmlOptions::default());
    assert!(
        !page.contains("<script>alert"),
        "the name escaped its string"
    );
    assert_eq!(
        page.matches("</script>").count(),
        2,
        "data and code elements only"
    );
    assert!(!page.contains('\u{2028}'));
    let (_, data, _) = split_page(&page).unwrap();
    let value: serde_json::Value = serde_json::from_str(data).unwrap();
    let names = value["flame"]["names"].as_array().unwrap();
    assert!(names.iter().any(|n| n == evil));
    assert!(names.iter().any(|n| n == "x\u{2028}y & z"));
}

#[test]
fn the_page_has_every_slot_filled_once() {
    let page = page_from_json("{}");
    assert!(page.starts_with("<!DOCTYPE html>"));
    for slot in [CSS_SLOT, DATA_SLOT, JS_SLOT] {
        assert!(TEMPLATE.matches(slot).count() == 1, "{slot}");
        assert!(!page.contains(slot), "{slot} left in the page");
    }
    assert!(page.contains(CSS) && page.contains(JS));
    // Nothing of ours may close a script element or load anything.
    assert!(!JS.contains("</script") && !JS.contains("<!--"));
    for remote in ["http://", "https://", "src=", "@import", "url("] {
        let hits: Vec<_> = page
            .match_indices(remote)
            .filter(|(i, _)| !page[*i..].starts_with("http://www.w3.org/2000/svg"))
            .collect();
        assert!(hits.is_empty(), "{remote} in the page");
    }
}

#[test]
fn bundle_redaction_of_the_page_keeps_our_data_and_hides_secrets() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/sessions/real-storage-bound");
    let mut session = storprof_session::load::load(&dir).unwrap();
    let analysis = crate::diagnosis::diagnose(&session, &Thresholds::default());
    let page = render(&session, &analysis, &HtmlOptions::default());
    let redacted = redact_page(&page, super::super::redact::redact_json).unwrap();
    let data =
        |p: &str| -> serde_json::Value { serde_json::from_str(split_page(p).unwrap().1).unwrap() };
    // Key order may change (serde_json's map is sorted); nothing else may.
    assert_eq!(
        data(&redacted),
        data(&page),
        "redaction changed the data of a page without secrets"
    );
    assert_eq!(
        split_page(&redacted).unwrap().0,
        split_page(&page).unwrap().0
    );
    assert_eq!(
        split_page(&redacted).unwrap().2,
        split_page(&page).unwrap().2
    );
    session
        .warnings
        .push("export AWS_SECRET_ACCESS_KEY=hunter2abc".into());
    let page = render(&session, &analysis, &HtmlOptions::default());
    assert!(page.contains("hunter2abc"));
    let redacted = redact_page(&page, super::super::redact::redact_json).unwrap();
    assert!(!redacted.contains("hunter2abc"));
    assert!(split_page("<html>not ours</html>").is_none());
}
