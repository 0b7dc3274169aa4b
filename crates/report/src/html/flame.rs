//! The flamegraphs' data for report.html: folded stacks into a pruned
//! tree per kind (on-CPU, off-CPU, reader-vs-rest diff).
use super::*;

/// Interns frame names for the flamegraphs.
#[derive(Default)]
pub(crate) struct Names {
    pub(crate) index: BTreeMap<String, u32>,
    pub(crate) list: Vec<String>,
}

impl Names {
    pub(crate) fn get(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = u32::try_from(self.list.len()).unwrap_or(u32::MAX);
        self.index.insert(name.to_string(), i);
        self.list.push(name.to_string());
        i
    }
}

/// The unpruned tree while it is built: children by name.
#[derive(Default)]
pub(crate) struct Building {
    pub(crate) value: u64,
    pub(crate) reader: u64,
    pub(crate) children: BTreeMap<String, Building>,
}

impl Building {
    fn add(&mut self, frames: &[&str], value: u64, reader: u64) {
        self.value = self.value.saturating_add(value);
        self.reader = self.reader.saturating_add(reader);
        if let Some((first, rest)) = frames.split_first() {
            self.children
                .entry((*first).to_string())
                .or_default()
                .add(rest, value, reader);
        }
    }

    fn count(&self) -> usize {
        self.children.values().map(|c| 1 + c.count()).sum()
    }
}

/// Which stacks the differential view counts as the reader side.
pub(crate) enum ReaderSide<'a> {
    /// None (the plain flamegraphs).
    Nobody,
    /// Threads by name (`comm;...` stacks, the comm left out).
    Comms(&'a dyn Fn(&str) -> bool),
    /// Threads by id (`comm;[pid/tid];...` stacks, both left out).
    Threads(&'a dyn Fn(u32, u32) -> bool),
}

/// `[pid/tid]`, the second frame of per-thread folded stacks.
pub(crate) use storprof_session::load::thread_ids as thread_frame;

/// Builds the tree of `stacks`; for the differential view, `side` says
/// which stacks are the reader side and which leading frames (the thread's
/// name and id) are left out, so that frames merge across threads.
pub(crate) fn build_tree(stacks: &FoldedStacks, side: &ReaderSide) -> Building {
    let mut root = Building::default();
    for (stack, count) in &stacks.stacks {
        let frames: Vec<&str> = stack.split(';').filter(|f| !f.is_empty()).collect();
        let (reader, rest) = match side {
            ReaderSide::Nobody => (false, frames.as_slice()),
            ReaderSide::Comms(is_reader) => match frames.split_first() {
                Some((comm, rest)) => (is_reader(comm), rest),
                None => continue,
            },
            ReaderSide::Threads(is_reader) => match frames.get(1).and_then(|f| thread_frame(f)) {
                Some((pid, tid)) => (is_reader(pid, tid), &frames[2..]),
                None => continue,
            },
        };
        root.add(rest, *count, if reader { *count } else { 0 });
    }
    root
}

/// Prunes `tree` at `share` of its total into a [`Node`] tree; returns it
/// with the number of frames merged and their value.
pub(crate) fn prune(
    tree: &Building,
    share: f64,
    names: &mut Names,
    diff: bool,
) -> (Node, usize, u64) {
    let threshold = (tree.value as f64 * share).ceil() as u64;
    let mut pruned_frames = 0;
    let mut pruned_value = 0;
    let root = prune_node(
        tree,
        0,
        threshold.max(1),
        tree.value,
        names,
        diff,
        &mut pruned_frames,
        &mut pruned_value,
    );
    (root, pruned_frames, pruned_value)
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn prune_node(
    b: &Building,
    name: u32,
    threshold: u64,
    total: u64,
    names: &mut Names,
    diff: bool,
    pruned_frames: &mut usize,
    pruned_value: &mut u64,
) -> Node {
    let mut children = Vec::new();
    let (mut merged, mut merged_value, mut merged_reader) = (0usize, 0u64, 0u64);
    for (child_name, child) in &b.children {
        if child.value < threshold {
            merged += 1 + child.count();
            merged_value = merged_value.saturating_add(child.value);
            merged_reader = merged_reader.saturating_add(child.reader);
        } else {
            let idx = names.get(child_name);
            children.push(prune_node(
                child,
                idx,
                threshold,
                total,
                names,
                diff,
                pruned_frames,
                pruned_value,
            ));
        }
    }
    if merged > 0 {
        *pruned_frames += merged;
        *pruned_value = pruned_value.saturating_add(merged_value);
        let label = format!(
            "[pruned {merged} frames, {:.2}%]",
            merged_value as f64 / total.max(1) as f64 * 100.0
        );
        children.push(Node {
            name: names.get(&label),
            value: merged_value,
            reader: diff.then_some(merged_reader),
            children: Vec::new(),
        });
    }
    Node {
        name,
        value: b.value,
        reader: diff.then_some(b.reader),
        children,
    }
}

pub(crate) fn node_count(n: &Node) -> usize {
    n.children.iter().map(|c| 1 + node_count(c)).sum()
}

/// One flamegraph from a built tree, pruned to fit the options.
pub(crate) fn flame(
    tree: &Building,
    unit: &str,
    names: &mut Names,
    options: &HtmlOptions,
    diff: bool,
) -> Flame {
    let mut share = options.prune_share.max(0.0);
    loop {
        // A fresh table per attempt would renumber the names: prune into a
        // scratch table and copy the winner's names in.
        let mut scratch = Names::default();
        scratch.get(ROOT_NAME);
        let (root, pruned_frames, pruned_value) = prune(tree, share, &mut scratch, diff);
        if node_count(&root) <= options.max_flame_nodes || share >= 1.0 {
            let root = renumber(&root, &scratch, names);
            return Flame {
                unit: unit.to_string(),
                total: tree.value,
                root,
                frames: tree.count(),
                pruned_frames,
                pruned_share: pruned_value as f64 / tree.value.max(1) as f64,
                prune_share: share,
                base_share: diff.then(|| tree.reader as f64 / tree.value.max(1) as f64),
            };
        }
        share = if share <= 0.0 { 1e-4 } else { share * 2.0 };
    }
}

pub(crate) fn renumber(n: &Node, from: &Names, to: &mut Names) -> Node {
    let name = from.list.get(n.name as usize).map_or(0, |s| to.get(s));
    Node {
        name,
        value: n.value,
        reader: n.reader,
        children: n.children.iter().map(|c| renumber(c, from, to)).collect(),
    }
}

/// The three flamegraphs (on-CPU, off-CPU, readers vs the rest).
pub fn flames(session: &Session, analysis: &Diagnosis, options: &HtmlOptions) -> Flames {
    let mut names = Names::default();
    // Index 0 is the root's name, in every table.
    names.get(ROOT_NAME);
    let oncpu = flame(
        &build_tree(&session.oncpu, &ReaderSide::Nobody),
        "samples",
        &mut names,
        options,
        false,
    );
    let offcpu = flame(
        &build_tree(&session.offcpu, &ReaderSide::Nobody),
        "us",
        &mut names,
        options,
        false,
    );
    // The reader side: the wait-for graph's loader threads when it found
    // any (per-thread stacks), else the reader threads by name.
    let loaders: Vec<(u32, u32, &str)> = analysis
        .wait
        .as_ref()
        .map(|w| {
            w.roles
                .iter()
                .filter(|r| r.role == Role::Loader)
                .map(|r| (r.pid, r.tid, r.comm.as_str()))
                .collect()
        })
        .unwrap_or_default();
    let readers = &analysis.features.reader_comms;
    let is_loader = |pid: u32, tid: u32| loaders.iter().any(|l| l.0 == pid && l.1 == tid);
    let is_reader = |comm: &str| readers.iter().any(|r| r == comm);
    let (diff_tree, diff_label, side_name) =
        if !loaders.is_empty() && !session.oncpu_threads.is_empty() {
            let mut shown: Vec<String> = loaders
                .iter()
                .take(6)
                .map(|(pid, tid, comm)| model::thread_label(comm, *pid, *tid))
                .collect();
            if loaders.len() > shown.len() {
                shown.push(format!("{} more", loaders.len() - shown.len()));
            }
            (
                build_tree(&session.oncpu_threads, &ReaderSide::Threads(&is_loader)),
                format!(
                    "on-CPU samples of the loader threads of the wait-for graph ({}) against \
                     every other traced thread",
                    shown.join(", ")
                ),
                "loader threads",
            )
        } else {
            (
                build_tree(&session.oncpu, &ReaderSide::Comms(&is_reader)),
                format!(
                    "on-CPU samples of the reader threads by name ({}) against every other \
                     traced thread",
                    readers.join(", ")
                ),
                "reader threads",
            )
        };
    let (diff, diff_absent) = if loaders.is_empty() && readers.is_empty() {
        (None, Some("no reader threads were found".to_string()))
    } else if diff_tree.value == 0 {
        (None, Some("no on-CPU samples".to_string()))
    } else if diff_tree.reader == 0 {
        (
            None,
            Some(format!("the {side_name} have no on-CPU samples")),
        )
    } else if diff_tree.reader == diff_tree.value {
        (
            None,
            Some(format!(
                "every on-CPU sample belongs to the {side_name}: nothing to compare with"
            )),
        )
    } else {
        (
            Some(flame(&diff_tree, "samples", &mut names, options, true)),
            None,
        )
    };
    Flames {
        names: names.list,
        oncpu,
        offcpu,
        diff,
        diff_absent,
        diff_label,
    }
}
