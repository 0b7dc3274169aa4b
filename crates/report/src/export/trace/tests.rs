use super::*;

fn thread(tid: u32, on: Vec<u64>, sleeping: Vec<u64>) -> ThreadSeries {
    ThreadSeries {
        pid: 1,
        tid,
        comm: format!("t{tid}"),
        on_cpu_ns: on,
        sleeping_ns: sleeping,
        ..ThreadSeries::default()
    }
}

const CLOCK: Clock = Clock {
    offset_ns: 0,
    width_ns: 1_000_000_000,
    end_ns: 1_500_000_000,
};

#[test]
fn a_second_is_laid_out_in_state_order_and_scaled_when_overfull() {
    let mut layout = Layout::default();
    // Second 0: 300 ms on CPU, 3 s of sleep ended in it (overfull);
    // second 1: ends at 1.5 s, 100 ms on CPU.
    layout.add_thread(
        &thread(2, vec![300_000_000, 100_000_000], vec![3_000_000_000, 0]),
        &CLOCK,
    );
    let s = &layout.slices;
    assert_eq!(s.len(), 3);
    assert_eq!(
        (s[0].state, s[0].start, s[0].drawn),
        (State::OnCpu, 0, 90_909_090)
    );
    assert_eq!((s[1].state, s[1].start), (State::Sleeping, 90_909_090));
    assert_eq!(s[1].measured, 3_000_000_000);
    assert!(s[1].start + s[1].drawn <= 1_000_000_000);
    assert_eq!(
        (s[2].bucket, s[2].start, s[2].drawn),
        (1, 1_000_000_000, 100_000_000)
    );
    // A second past the end: nothing.
    assert_eq!(CLOCK.span(2), None);
    assert_eq!(CLOCK.span(1), Some((1_000_000_000, 1_500_000_000)));
}

/// A counter falls to 0 after a process's last active second; a
/// series stored far past the recording (a damaged file) costs
/// nothing and draws nothing.
#[test]
fn counters_fall_to_zero_when_a_process_goes_quiet() {
    use storprof_session::model::{SessionInfo, TimeSeries};
    let mut far = thread(3, vec![1], vec![]);
    far.pid = 2;
    far.first_bucket = u32::MAX - 1;
    let session = Session {
        info: SessionInfo {
            duration_s: 3.0,
            ..SessionInfo::default()
        },
        timeseries: Some(TimeSeries {
            bucket_ns: 1_000_000_000,
            threads: vec![thread(2, vec![500_000_000], vec![]), far],
            ..TimeSeries::default()
        }),
        ..Session::default()
    };
    let v: Value = serde_json::from_slice(&render(&session, &ThreadRoles::new()).unwrap()).unwrap();
    let counters: Vec<(u64, f64, f64)> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "C")
        .map(|e| {
            (
                e["pid"].as_u64().unwrap(),
                e["ts"].as_f64().unwrap(),
                e["args"]["CPUs"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(counters, [(1, 0.0, 0.5), (1, 1_000_000.0, 0.0)]);
}

#[test]
fn a_flow_anchors_on_the_state_then_any_slice_then_a_marker() {
    let mut layout = Layout::default();
    layout.add_thread(&thread(2, vec![0, 10], vec![500, 0]), &CLOCK);
    let sleeping = layout.anchor((1, 2), 0, State::Sleeping, &CLOCK).unwrap();
    assert_eq!(layout.slices[sleeping].state, State::Sleeping);
    let any = layout.anchor((1, 2), 1, State::Sleeping, &CLOCK).unwrap();
    assert_eq!(layout.slices[any].state, State::OnCpu);
    let marker = layout.anchor((1, 3), 1, State::OnCpu, &CLOCK).unwrap();
    assert_eq!(layout.slices[marker].state, State::WakeMarker);
    assert_eq!(layout.slices[marker].start, 1_000_000_000);
    // The marker is reused by the next flow of that thread and second.
    assert_eq!(layout.anchor((1, 3), 1, State::OnCpu, &CLOCK), Some(marker));
    assert_eq!(layout.anchor((1, 3), 5, State::OnCpu, &CLOCK), None);
}
