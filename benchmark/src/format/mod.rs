//! File formats: flux Parquet, unet3d NPZ, retinanet JPEG and resnet50 /
//! cosmoflow TFRecord, writing (datagen) and parsing.
//! Sits on [`crate::storage`] only: reads are `RandomAccess` calls, writes
//! `Storage::create` streams.
//!
//! ```text
//!  datagen ─► write_parquet_file / write_npz_file ─► Storage::create (streamed)
//!  readers ─► parquet::read_layout / npz::read_layout (footer / central directory,
//!             bounds-checked) ─► byte ranges of row groups / the `x` member
//! ```
//!
//! Random data comes from [`gen`] (wyrand, one u64 per two f32), so datagen is
//! bound by memory bandwidth, not by the generator.
pub mod r#gen;
pub mod jpeg;
pub mod npz;
pub mod parquet;
pub mod tfrecord;
pub mod thrift;

pub use npz::{npz_dims, write_npz_file};
pub use parquet::write_parquet_file;

/// Dataset file format (`dataset.format`): the crate's one format enum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FormatKind {
    /// Apache Parquet (flux).
    Parquet,
    /// NumPy `.npz` (unet3d).
    Npz,
    /// One JPEG image per file (retinanet).
    Jpeg,
    /// TensorFlow TFRecord of `tf.train.Example` records (resnet50, cosmoflow).
    Tfrecord,
}

impl FormatKind {
    /// The format a DLIO `dataset.format` value names (`None`: unsupported).
    pub fn from_dlio_name(name: &str) -> Option<Self> {
        match name {
            "parquet" => Some(FormatKind::Parquet),
            "npz" => Some(FormatKind::Npz),
            "jpeg" => Some(FormatKind::Jpeg),
            "tfrecord" => Some(FormatKind::Tfrecord),
            _ => None,
        }
    }

    /// File extension without the dot, as DLIO names files.
    pub fn extension(self) -> &'static str {
        match self {
            FormatKind::Parquet => "parquet",
            FormatKind::Npz => "npz",
            FormatKind::Jpeg => "jpeg",
            FormatKind::Tfrecord => "tfrecord",
        }
    }
}

/// Columns of a flux-style Parquet file: every column is a float32 list of
/// fixed size (size 1 = a plain float32 column, as DLIO writes it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FluxSchema {
    /// `(column name, number of f32 per row)`.
    pub columns: Vec<(String, usize)>,
}

impl FluxSchema {
    /// The flux_b200 schema of DLIO's `dataset.parquet.columns`
    /// (541,208 f32 = 2,164,832 B per row).
    pub fn flux_b200() -> Self {
        Self {
            columns: [
                ("t5_encodings", 524_328),
                ("clip_encodings", 409),
                ("mean", 8232),
                ("logvar", 8232),
                ("timestamp", 7),
            ]
            .into_iter()
            .map(|(n, s)| (n.to_owned(), s))
            .collect(),
        }
    }

    /// Value bytes per row (sum of sizes × 4).
    pub fn row_bytes(&self) -> u64 {
        self.columns.iter().map(|(_, n)| *n as u64 * 4).sum()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn flux_row_bytes() {
        assert_eq!(FluxSchema::flux_b200().row_bytes(), 2_164_832);
        assert_eq!(FormatKind::Parquet.extension(), "parquet");
        assert_eq!(FormatKind::Npz.extension(), "npz");
        for k in [
            FormatKind::Parquet,
            FormatKind::Npz,
            FormatKind::Jpeg,
            FormatKind::Tfrecord,
        ] {
            assert_eq!(FormatKind::from_dlio_name(k.extension()), Some(k));
        }
        assert_eq!(FormatKind::from_dlio_name("hdf5"), None);
    }
}
