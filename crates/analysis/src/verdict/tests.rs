use super::*;

/// Every variant has exactly one rule, whose name is its serialized name
/// and whose finding carries its id. The match makes a new variant a
/// compile error here until it is listed.
#[test]
fn every_id_has_one_rule_named_as_serialized() {
    let variants = |id: VerdictId| match id {
        VerdictId::CpuBoundReader
        | VerdictId::StorageBound
        | VerdictId::PageCacheServed
        | VerdictId::ComputeBound
        | VerdictId::CpuStarved
        | VerdictId::LockContention
        | VerdictId::MemoryPressure
        | VerdictId::NetworkBound
        | VerdictId::Stalled
        | VerdictId::WritebackBound
        | VerdictId::FsyncBound
        | VerdictId::WriteGeneratorBound
        | VerdictId::CheckpointBound => id,
    };
    let f = Features::default();
    let t = Thresholds::default();
    for (i, rule) in RULES.iter().enumerate() {
        assert_eq!(variants(rule.id), VerdictId::ALL[i]);
        assert_eq!(RULES.iter().filter(|r| r.id == rule.id).count(), 1);
        assert_eq!(
            serde_json::to_string(&rule.id).ok(),
            Some(format!("\"{}\"", rule.name))
        );
        assert_eq!((rule.score)(&f, &HotFrames::default(), &t).verdict, rule.id);
    }
}

/// Own time that writes a few MiB (a real trainer's pipes and logs,
/// 1 MiB/s) is not a checkpoint; the same time writing 1.5 GB, or
/// waiting in fsync, is.
#[test]
fn checkpoint_bound_needs_the_own_time_to_be_writing() {
    use crate::features::{ConsumerFeature, ConsumerWrites};
    let with = |mib: u64, own_io_share: f64| Features {
        consumer: Some(ConsumerFeature {
            comm: "dlio_benchmark".into(),
            writes: Some(ConsumerWrites {
                write_bytes: mib << 20,
                window_s: 15.0,
                compute_share: 0.32,
                data_wait_share: 0.337,
                own_share: 0.343,
                own_io_share,
            }),
            ..ConsumerFeature::default()
        }),
        ..Features::default()
    };
    let fired = |f: &Features| rule_checkpoint_bound(f, &Thresholds::default()).fired;
    assert!(!fired(&with(5, 0.0)), "5 MiB over 5 s of own CPU");
    assert!(fired(&with(1500, 0.0)), "1.5 GB over 5 s of own CPU");
    assert!(fired(&with(5, 0.3)), "5 MiB with the own time in fsync");
}

/// A device whose reads' queue time was recorded shows it beside their
/// device time; one recorded before that shows neither.
#[test]
fn storage_evidence_splits_a_reads_queue_time_from_its_device_time() {
    use crate::features::DeviceFeature;
    let mut f = Features {
        reader_blocked_io_share: 0.95,
        top_device: Some(DeviceFeature {
            name: "vda".into(),
            utilization: 0.02,
            read_latency_p50_us: Some(1048.576),
            read_queue_p50_us: Some(4.096),
            ..DeviceFeature::default()
        }),
        ..Features::default()
    };
    let split = |f: &Features| {
        rule_storage_bound(f, &Thresholds::default())
            .figures
            .into_iter()
            .find(|fig| matches!(fig, Figure::DeviceReadSplit { .. }))
    };
    let Some(fig) = split(&f) else {
        panic!("no split in the storage-bound evidence");
    };
    assert_eq!(fig.key(), "device_read_queue_p50_us");
    assert!((fig.value() - 4.096).abs() < 1e-9);
    if let Some(d) = f.top_device.as_mut() {
        d.read_queue_p50_us = None;
    }
    assert_eq!(split(&f), None);
}
