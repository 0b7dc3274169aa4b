use super::*;

fn opts(folder: &Path) -> CheckpointOptions {
    CheckpointOptions {
        folder: folder.to_path_buf(),
        scale: 1e6,
        num_checkpoints_write: 1,
        num_checkpoints_read: 1,
        block_size: 1 << 16,
        print: false,
        generator_probe: Duration::from_millis(5),
        results_dir: folder.parent().map(|p| p.join("results")),
        ..CheckpointOptions::default()
    }
}

#[test]
fn foreign_files_are_refused_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("ck");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("notes.txt"), b"mine").unwrap();
    let e = run_checkpoint(&opts(&folder), &Threads(8)).unwrap_err();
    assert!(
        matches!(&e, BenchError::ForeignFiles { count: 1, example, .. } if example == "notes.txt"),
        "{e}"
    );
    // A foreign entry named like a checkpoint directory is refused even with --force.
    std::fs::create_dir(folder.join("global_epoch1_step1")).unwrap();
    let force = CheckpointOptions {
        force: true,
        ..opts(&folder)
    };
    let e = run_checkpoint(&force, &Threads(8)).unwrap_err();
    assert!(matches!(e, BenchError::ForeignFiles { .. }), "{e}");
    assert_eq!(std::fs::read(folder.join("notes.txt")).unwrap(), b"mine");
}

#[test]
fn earlier_run_needs_force() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("ck");
    let o = CheckpointOptions {
        results_dir: Some(dir.path().join("results")),
        ..opts(&folder)
    };
    run_checkpoint(&o, &Threads(8)).unwrap();
    let e = run_checkpoint(&o, &Threads(8)).unwrap_err();
    assert!(
        matches!(e, BenchError::ExistingCheckpoint { files: 16, .. }),
        "{e}"
    );
    let again = CheckpointOptions { force: true, ..o };
    assert!(run_checkpoint(&again, &Threads(8)).unwrap().is_some());
}

#[test]
fn no_space_is_refused_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("ck");
    // Unscaled llama3-1t, 10 checkpoints: ~150 TiB.
    let o = CheckpointOptions {
        model: LlamaModel::Llama3_1t,
        scale: 1.0,
        num_checkpoints_write: 10,
        ..opts(&folder)
    };
    let e = run_checkpoint(&o, &Threads(1024)).unwrap_err();
    match e {
        BenchError::NoSpace {
            needed, available, ..
        } => {
            assert!(needed > available);
            assert!(needed > 100 << 40, "{needed}");
        }
        e => panic!("{e}"),
    }
    assert!(std::fs::read_dir(&folder).unwrap().next().is_none());
}

#[test]
fn bad_options_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("ck");
    for o in [
        CheckpointOptions {
            scale: 0.5,
            ..opts(&folder)
        },
        CheckpointOptions {
            block_size: 1000,
            ..opts(&folder)
        },
        CheckpointOptions {
            num_checkpoints_read: 2,
            ..opts(&folder)
        },
    ] {
        assert!(matches!(
            run_checkpoint(&o, &Threads(8)),
            Err(BenchError::BadParam { .. })
        ));
    }
    let seventy = CheckpointOptions {
        model: LlamaModel::Llama3_70b,
        ..opts(&folder)
    };
    let e = run_checkpoint(&seventy, &Threads(6)).unwrap_err();
    assert!(matches!(e, BenchError::BadLayout { ranks: 6, .. }), "{e}");
    assert!(!folder.exists());
}
