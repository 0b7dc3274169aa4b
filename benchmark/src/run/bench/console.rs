//! Rank 0's `[OUTPUT]` lines as DLIO prints them, kept for `dlio.log`,
//! and a progress bar per epoch on a terminal.
use super::*;

/// Prints rank 0's `[OUTPUT]` lines as DLIO does, keeps them for `dlio.log`,
/// and shows a progress bar per epoch on a terminal.
pub(super) struct ConsoleObserver {
    started: DateTime<Local>,
    print: bool,
    progress: bool,
    lines: Mutex<Vec<String>>,
    bar: Mutex<Option<ProgressBar>>,
    batch: u64,
    comm_size: usize,
    time_spec: String,
    exclude: ExcludeSteps,
    /// One checkpoint's GiB (all writing ranks), for the throughput line.
    checkpoint_gib: f64,
}

impl ConsoleObserver {
    pub(super) fn new(
        opts: &BenchOptions,
        p: &Prepared,
        exclude: ExcludeSteps,
        reporter: bool,
    ) -> Self {
        ConsoleObserver {
            started: Local::now(),
            print: opts.print && reporter,
            progress: opts.progress && reporter,
            lines: Mutex::new(Vec::new()),
            bar: Mutex::new(None),
            batch: p.plan.batch_size,
            comm_size: p.plan.comm_size,
            time_spec: p.cfg.computation_time.dlio_repr(),
            exclude,
            checkpoint_gib: p.plan.checkpoints.as_ref().map_or(0.0, |c| {
                c.checkpoint_bytes(p.plan.comm_size) as f64 / (1u64 << 30) as f64
            }),
        }
    }

    pub(super) fn raw(&self, text: &str) {
        if let Ok(mut l) = self.lines.lock() {
            l.push(text.trim_end().to_string());
        }
        if self.print {
            let bar = self.bar.lock().ok().and_then(|b| b.clone());
            match bar {
                Some(b) => b.suspend(|| println!("{}", text.trim_end())),
                None => println!("{}", text.trim_end()),
            }
        }
    }

    pub(super) fn say(&self, t: &DateTime<Local>, msg: &str) {
        self.raw(&output::output_line(t, msg));
    }

    fn at(&self, secs: f64) -> DateTime<Local> {
        // The engine clock starts a moment after `started`; close enough for log stamps.
        self.started + chrono::Duration::microseconds((secs * 1e6) as i64)
    }

    pub(super) fn log_text(&self) -> String {
        self.lines
            .lock()
            .map(|l| l.join("\n") + "\n")
            .unwrap_or_default()
    }
}

impl TrainObserver for ConsoleObserver {
    fn epoch_started(&self, epoch: u32, steps: u64, at: f64) {
        let t = self.at(at);
        self.say(
            &t,
            &format!("Starting epoch {epoch}: {steps} steps expected"),
        );
        self.say(&t, "Starting block 1");
        if self.progress {
            let bar = ProgressBar::new(steps);
            if let Ok(style) = ProgressStyle::with_template(
                "epoch {msg} [{bar:30}] {pos}/{len} steps {elapsed_precise} (eta {eta})",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_message(epoch.to_string());
            if let Ok(mut b) = self.bar.lock() {
                *b = Some(bar);
            }
        }
    }

    fn step_done(&self, _epoch: u32, step: u64) {
        if let Ok(b) = self.bar.lock()
            && let Some(bar) = b.as_ref()
        {
            bar.set_position(step);
        }
    }

    fn checkpoint_saved(&self, c: &CheckpointSave) {
        let seconds = c.seconds();
        let gib = self.checkpoint_gib;
        self.say(
            &self.at(c.start),
            &format!(
                "Starting saving checkpoint {} after total step {} for epoch {}",
                c.number, c.step, c.epoch
            ),
        );
        self.say(
            &self.at(c.end),
            &format!(
                "Finished saving checkpoint {} for epoch {} in {seconds:.4} s; Throughput: {:.4} GB/s",
                c.number,
                c.epoch,
                if seconds > 0.0 { gib / seconds } else { 0.0 }
            ),
        );
    }

    fn epoch_ended(&self, epoch: RankEpoch) {
        if let Ok(mut b) = self.bar.lock()
            && let Some(bar) = b.take()
        {
            bar.finish_and_clear();
        }
        let m = block_metrics(&epoch.block, self.batch, self.exclude);
        let t = self.at(epoch.end);
        for msg in output::epoch_end_messages(&epoch, &m, self.comm_size, &self.time_spec) {
            self.say(&t, &msg);
        }
        if m.too_few_steps {
            log::warn!(
                "epoch {}: only {} steps; DLIO's metrics need at least 3 (the first is excluded, throughput uses len − 2)",
                epoch.epoch,
                m.steps
            );
        }
    }
}
