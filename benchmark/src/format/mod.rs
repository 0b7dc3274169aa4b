//! File formats: flux Parquet and unet3d NPZ, writing (datagen) and parsing.
//!
//! OWNER: formats/readers engineer.
