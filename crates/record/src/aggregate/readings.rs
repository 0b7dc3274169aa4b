//! A per-bucket series from a counter file read once per time-series
//! bucket (`/proc/stat`, `/proc/vmstat`): the first reading is the
//! baseline, each later one closes a bucket; a failed reading (None)
//! closes its bucket with what the closing function makes of it (zeros
//! for increases) and the next reading starts from it.

/// The buckets closed so far, `N` values each.
#[derive(Debug)]
pub struct Readings<C, const N: usize> {
    last: Option<C>,
    readings: u32,
    /// Some reading succeeded: the series is worth storing.
    any: bool,
    buckets: Vec<[u64; N]>,
}

impl<C, const N: usize> Default for Readings<C, N> {
    fn default() -> Self {
        Self {
            last: None,
            readings: 0,
            any: false,
            buckets: Vec::new(),
        }
    }
}

impl<C, const N: usize> Readings<C, N> {
    /// Closes a bucket at the reading `now` with `close(last, now)` (the
    /// first call only sets the baseline).
    pub fn push(&mut self, now: Option<C>, close: impl FnOnce(Option<&C>, Option<&C>) -> [u64; N]) {
        self.any |= now.is_some();
        if self.readings > 0 {
            self.buckets.push(close(self.last.as_ref(), now.as_ref()));
        }
        self.last = now;
        self.readings = self.readings.saturating_add(1);
    }

    /// Value `i` of every bucket times `scale`; None when no reading
    /// succeeded.
    pub fn column(&self, i: usize, scale: u64) -> Option<Vec<u64>> {
        self.any.then(|| {
            self.buckets
                .iter()
                .map(|b| b[i].saturating_mul(scale))
                .collect()
        })
    }
}

/// The increase of the counter `field` from `last` to `now`; 0 without
/// both (no baseline: not the increase over two buckets).
pub fn increase<C>(last: Option<&C>, now: Option<&C>, field: impl Fn(&C) -> u64) -> u64 {
    match (last, now) {
        (Some(a), Some(b)) => field(b).saturating_sub(field(a)),
        _ => 0,
    }
}
