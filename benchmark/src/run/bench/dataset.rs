//! The dataset a run reads: its training directory and the files in it,
//! found from one listing as DLIO lays them out.
use super::*;

/// The dataset's training directory, `DIR/<model>/train`.
pub fn train_dir(data_dir: &Path, model: &str) -> PathBuf {
    data_dir.join(model).join("train")
}

/// The first `num_files_train` training files under `dir` (DLIO's layout:
/// directly in `train/`, or spread over `num_subfolders_train` subfolders),
/// ordered by file name as DLIO orders them, and their total size. Sizes come
/// from the listing, so a million-file dataset is not opened file by file,
/// and each path is built once from its listing entry.
pub fn list_training_files(
    storage: &dyn Storage,
    cfg: &DlioConfig,
    dir: &Path,
) -> Result<(Vec<String>, u64), BenchError> {
    let remote = storage.is_remote();
    let dir_s = dir.to_string_lossy().to_string();
    let ext = format!(".{}", cfg.format.extension());
    let folders: Vec<PathBuf> = if cfg.num_subfolders_train > 1 {
        (0..cfg.num_subfolders_train)
            .filter_map(|k| subfolder_of(k, cfg.num_subfolders_train))
            .map(|sub| dir.join(sub))
            .collect()
    } else {
        vec![dir.to_path_buf()]
    };
    // (file name, index of its folder, size)
    let mut entries: Vec<(String, u32, u64)> = Vec::new();
    for (k, folder) in folders.iter().enumerate() {
        let folder_s = folder.to_string_lossy().to_string();
        if !remote && !folder.is_dir() {
            let hint = if cfg.num_subfolders_train > 1 {
                format!(
                    "; dataset.num_subfolders_train={} needs {}/0.. subfolders",
                    cfg.num_subfolders_train, dir_s
                )
            } else {
                String::new()
            };
            return Err(BenchError::Dataset(format!(
                "no {ext} files in {folder_s} (generate them with `storprof datagen`){hint}"
            )));
        }
        let k = u32::try_from(k).map_err(|_| bad_subfolders(cfg))?;
        entries.extend(
            storage
                .list_sized(&folder_s)?
                .into_iter()
                .filter(|(n, _)| n.ends_with(&ext))
                .map(|(n, len)| (n, k, len)),
        );
    }
    if entries.is_empty() {
        return Err(BenchError::Dataset(format!(
            "no {ext} files in {dir_s} (generate them with `storprof datagen`)"
        )));
    }
    let want = usize::try_from(cfg.num_files_train).unwrap_or(usize::MAX);
    if entries.len() < want {
        return Err(BenchError::BadParam {
            key: "dataset.num_files_train".into(),
            reason: format!(
                "the workload expects {want} files but {dir_s} has {}; pass --param dataset.num_files_train={} \
                 or generate more data",
                entries.len(),
                entries.len()
            ),
        });
    }
    entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    entries.truncate(want);
    let mut bytes = 0u64;
    let files = entries
        .into_iter()
        .map(|(name, k, len)| {
            bytes = bytes.saturating_add(len);
            folders[k as usize]
                .join(name)
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    Ok((files, bytes))
}

fn bad_subfolders(cfg: &DlioConfig) -> BenchError {
    BenchError::BadParam {
        key: "dataset.num_subfolders_train".into(),
        reason: format!("{} subfolders is too many", cfg.num_subfolders_train),
    }
}
