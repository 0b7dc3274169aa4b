//! mlpstorage's dataset-size rule: how many files a closed run needs for
//! the client hosts' memory and the accelerators' batches.
/// mlpstorage's dataset-size rule (`calculate_training_data_size`, Rules 3.1.2).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct DatasetSizeRule {
    /// client_host_memory_in_gb × 2³⁰ × num_client_hosts.
    pub total_mem_bytes: f64,
    /// ceil(5 × total_mem / (spf × record_length_bytes)).
    pub min_files_bytes: u64,
    /// ceil(500 × num_processes × batch / spf).
    pub min_files_samples: u64,
    /// max of the two.
    pub num_files_train: u64,
}

impl DatasetSizeRule {
    /// Which term decided, in mlpstorage's words: "memory" (the dataset-size
    /// to memory-size ratio) or "steps" (the 500-step requirement).
    pub fn deciding_term(&self) -> &'static str {
        if self.min_files_bytes >= self.min_files_samples {
            "memory"
        } else {
            "steps"
        }
    }

    /// mlpstorage's `RESULT:` line for the deciding term.
    pub fn result_line(&self) -> &'static str {
        match self.deciding_term() {
            "memory" => "RESULT: Minimum file count dictated by dataset size to memory size ratio.",
            _ => {
                "RESULT: Minimum file count dictated by 500 step requirement of given accelerator count and batch size."
            }
        }
    }
}

/// Apply the rule. `record_bytes` is the real record length (Parquet: from the columns).
pub fn dataset_size_rule(
    client_memory_gb: f64,
    num_client_hosts: u64,
    num_processes: u64,
    batch_size: u64,
    samples_per_file: u64,
    record_bytes: f64,
) -> DatasetSizeRule {
    let total_mem = client_memory_gb * 1024f64.powi(3) * num_client_hosts as f64;
    let min_files_bytes =
        (5.0 * total_mem / (samples_per_file as f64 * record_bytes)).ceil() as u64;
    let min_files_samples = (500 * num_processes * batch_size).div_ceil(samples_per_file.max(1));
    DatasetSizeRule {
        total_mem_bytes: total_mem,
        min_files_bytes,
        min_files_samples,
        num_files_train: min_files_bytes.max(min_files_samples),
    }
}
