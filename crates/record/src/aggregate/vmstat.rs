//! The system's dirty and writeback page cache over the recording, from
//! `/proc/vmstat` read once per time-series bucket.
use storprof_session::model::VmstatSeries;

use super::readings::{Readings, increase};

/// The `/proc/vmstat` fields the series uses, in pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VmstatCounters {
    pub nr_dirty: u64,
    pub nr_writeback: u64,
    /// Monotonic counters: pages dirtied / written back since boot.
    pub nr_dirtied: u64,
    pub nr_written: u64,
}

/// The counters from the text of `/proc/vmstat`; None when one is missing.
pub fn parse_vmstat(text: &str) -> Option<VmstatCounters> {
    let mut found = [None; 4];
    for line in text.lines() {
        let Some((name, value)) = line.split_once(' ') else {
            continue;
        };
        let slot = match name {
            "nr_dirty" => 0,
            "nr_writeback" => 1,
            "nr_dirtied" => 2,
            "nr_written" => 3,
            _ => continue,
        };
        found[slot] = value.trim().parse::<u64>().ok();
    }
    Some(VmstatCounters {
        nr_dirty: found[0]?,
        nr_writeback: found[1]?,
        nr_dirtied: found[2]?,
        nr_written: found[3]?,
    })
}

/// The series built one reading at a time, in step with
/// [`super::SeriesBuilder`] (first reading the baseline): per bucket the dirty and
/// writeback pages at its end, and the pages dirtied and written during it.
#[derive(Debug, Default)]
pub struct VmstatBuilder {
    readings: Readings<VmstatCounters, 4>,
}

impl VmstatBuilder {
    /// Closes a bucket at this reading (the first call sets the baseline).
    pub fn push(&mut self, now: Option<VmstatCounters>) {
        self.readings.push(now, |last, now| {
            let gauge = |f: fn(&VmstatCounters) -> u64| now.map_or(0, f);
            [
                gauge(|c| c.nr_dirty),
                gauge(|c| c.nr_writeback),
                increase(last, now, |c| c.nr_dirtied),
                increase(last, now, |c| c.nr_written),
            ]
        });
    }

    /// The series in bytes, None when no reading succeeded.
    pub fn series(&self, page_size: u64) -> Option<VmstatSeries> {
        let column = |i| self.readings.column(i, page_size);
        Some(VmstatSeries {
            dirty_bytes: column(0)?,
            writeback_bytes: column(1)?,
            dirtied_bytes: column(2)?,
            written_bytes: column(3)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_counters_are_read_and_a_missing_one_is_none() {
        let text =
            "nr_free_pages 100\nnr_dirty 12\nnr_writeback 3\nnr_dirtied 1000\nnr_written 900\n";
        assert_eq!(
            parse_vmstat(text),
            Some(VmstatCounters {
                nr_dirty: 12,
                nr_writeback: 3,
                nr_dirtied: 1000,
                nr_written: 900
            })
        );
        assert_eq!(
            parse_vmstat("nr_dirty 12\nnr_writeback 3\nnr_dirtied 1\n"),
            None
        );
        assert_eq!(
            parse_vmstat("nr_dirty x\nnr_writeback 3\nnr_dirtied 1\nnr_written 1"),
            None
        );
    }

    #[test]
    fn buckets_hold_gauges_at_their_end_and_counter_increases() {
        let c = |dirty, wb, dirtied, written| {
            Some(VmstatCounters {
                nr_dirty: dirty,
                nr_writeback: wb,
                nr_dirtied: dirtied,
                nr_written: written,
            })
        };
        let mut b = VmstatBuilder::default();
        assert_eq!(b.series(4096), None);
        b.push(c(1, 0, 100, 100));
        b.push(c(10, 2, 150, 110));
        b.push(None);
        b.push(c(4, 1, 200, 180));
        b.push(c(0, 0, 200, 200));
        let s = b.series(4096).unwrap();
        assert_eq!(s.dirty_bytes, vec![10 * 4096, 0, 4 * 4096, 0]);
        assert_eq!(s.writeback_bytes, vec![2 * 4096, 0, 4096, 0]);
        // The bucket after a failed reading has no baseline: 0, not the
        // increase over two buckets.
        assert_eq!(s.dirtied_bytes, vec![50 * 4096, 0, 0, 0]);
        assert_eq!(s.written_bytes, vec![10 * 4096, 0, 0, 20 * 4096]);
    }

    #[test]
    fn no_successful_reading_stores_nothing() {
        let mut b = VmstatBuilder::default();
        b.push(None);
        b.push(None);
        assert_eq!(b.series(4096), None);
    }
}
