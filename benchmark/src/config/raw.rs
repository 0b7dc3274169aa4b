//! The workload as a YAML tree: parsed from the embedded file or
//! `--config`, `--param` overrides set key by key, every leaf checked
//! against DLIO's known keys and their types.
use super::*;

/// A workload configuration as a YAML tree, before typing.
#[derive(Clone, Debug)]
pub struct RawConfig {
    root: Mapping,
    /// Where the tree came from, for messages ("flux_b200 (embedded)", a file path).
    pub source: String,
}

impl RawConfig {
    /// The embedded configuration for a workload and accelerator.
    pub fn embedded(workload: Workload, acc: Accelerator) -> Result<Self, BenchError> {
        let text = embedded_workload_yaml(workload, acc)?;
        Self::parse(text, &format!("{workload}_{acc} (embedded)"))
    }

    /// Load a DLIO workload YAML file.
    pub fn from_file(path: &Path) -> Result<Self, BenchError> {
        let text = std::fs::read_to_string(path).map_err(|source| BenchError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parse YAML text; `source` names it in errors. Every key is validated.
    pub fn parse(text: &str, source: &str) -> Result<Self, BenchError> {
        let value: Value = serde_yaml::from_str(text)
            .map_err(|e| BenchError::usage("--config", format!("{source}: not valid YAML: {e}")))?;
        let root = match value {
            Value::Mapping(m) => m,
            Value::Null => Mapping::new(),
            _ => {
                return Err(BenchError::usage(
                    "--config",
                    format!("{source}: a DLIO workload YAML must be a mapping"),
                ));
            }
        };
        // Hydra configs nest the workload under `workload:`; accept both.
        let root = match root.get("workload") {
            Some(Value::Mapping(inner)) if root.len() == 1 => inner.clone(),
            _ => root,
        };
        let cfg = RawConfig {
            root,
            source: source.to_string(),
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Apply one `KEY=VALUE` override (DLIO dotted key, YAML value).
    pub fn apply_param(&mut self, param: &str) -> Result<(), BenchError> {
        let Some((key, value)) = param.split_once('=') else {
            return Err(BenchError::BadParam {
                key: param.to_string(),
                reason: "expected KEY=VALUE, e.g. dataset.num_files_train=64".into(),
            });
        };
        let key = normalize_key(key.trim());
        let value: Value = if value.trim().is_empty() {
            Value::Null
        } else {
            serde_yaml::from_str(value).unwrap_or_else(|_| Value::String(value.to_string()))
        };
        self.set(&key, value)
    }

    /// Set a dotted key, checking it and its value.
    pub fn set(&mut self, key: &str, value: Value) -> Result<(), BenchError> {
        let key = normalize_key(key);
        if keys::spec(&key).is_none() {
            return Err(unknown_key(&key));
        }
        check_value(&key, &value)?;
        // An alias is stored under its DLIO key so there is one place to read.
        let key = if key == "dataset.parquet_row_group_size" {
            "dataset.parquet.row_group_size".to_string()
        } else {
            key
        };
        let parts: Vec<&str> = key.split('.').collect();
        let mut node = &mut self.root;
        for part in &parts[..parts.len() - 1] {
            let k = Value::String((*part).to_string());
            let entry = node
                .entry(k)
                .or_insert_with(|| Value::Mapping(Mapping::new()));
            if !entry.is_mapping() {
                // A scalar time spec (`computation_time: 1.35`) becomes `{mean: 1.35}`
                // when a sub-key (`.stdev`) is set, as DLIO itself converts it.
                let old = std::mem::replace(entry, Value::Mapping(Mapping::new()));
                if let (Value::Mapping(m), false) = (&mut *entry, old.is_null()) {
                    m.insert(Value::String("mean".into()), old);
                }
            }
            let Value::Mapping(m) = entry else {
                return Err(BenchError::usage("--param", format!("cannot set '{key}'")));
            };
            node = m;
        }
        node.insert(Value::String(parts[parts.len() - 1].to_string()), value);
        Ok(())
    }

    /// Value at a dotted key, if set.
    pub fn get(&self, key: &str) -> Option<&Value> {
        let mut node = &self.root;
        let parts: Vec<&str> = key.split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            let v = node.get(*part)?;
            if i + 1 == parts.len() {
                return Some(v);
            }
            node = v.as_mapping()?;
        }
        None
    }

    /// The tree as YAML text (written to the results dir as the effective config).
    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(&self.root).unwrap_or_default()
    }

    /// The tree as hydra's composed `config.yaml` holds it, under `workload:`
    /// (what DLIO writes to `<run>/dlio_config/config.yaml` and mlpstorage's
    /// report generator reads back).
    pub fn to_hydra_yaml(&self) -> String {
        let mut top = Mapping::new();
        top.insert(
            Value::String("workload".into()),
            Value::Mapping(self.root.clone()),
        );
        serde_yaml::to_string(&top).unwrap_or_default()
    }

    /// The tree as JSON (mlpstorage's metadata `parameters`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.root).unwrap_or_default()
    }

    /// Keys set in this config that storprof accepts but does not act on.
    pub fn ignored_keys(&self) -> Vec<String> {
        let mut leaves = Vec::new();
        flatten(&self.root, "", &mut leaves);
        leaves
            .into_iter()
            .filter(|(k, _)| keys::spec(k).is_some_and(|s| s.effect == Effect::Ignored))
            .map(|(k, _)| k)
            .collect()
    }

    fn validate(&self) -> Result<(), BenchError> {
        let mut leaves = Vec::new();
        flatten(&self.root, "", &mut leaves);
        for (key, value) in leaves {
            if keys::spec(&key).is_none() {
                let mut err = unknown_key(&key);
                if let BenchError::UnknownParam { hint, .. } = &mut err {
                    hint.push_str(&format!(" (in {})", self.source));
                }
                return Err(err);
            }
            check_value(&key, value)?;
        }
        Ok(())
    }

    /// Type the configuration, filling DLIO's defaults.
    pub fn to_config(&self) -> Result<DlioConfig, BenchError> {
        DlioConfig::from_raw(self)
    }
}

/// A key as `RawConfig` stores it: without hydra's `+`/`++` and `workload.`.
pub(crate) fn normalize_key(key: &str) -> String {
    let key = key.trim_start_matches('+');
    key.strip_prefix("workload.").unwrap_or(key).to_string()
}

pub(super) fn unknown_key(key: &str) -> BenchError {
    let near = keys::suggestions(key);
    let hint = if near.is_empty() {
        String::new()
    } else {
        format!(
            "; did you mean {}?",
            near.iter()
                .map(|k| format!("'{k}'"))
                .collect::<Vec<_>>()
                .join(" or ")
        )
    };
    BenchError::UnknownParam {
        key: key.to_string(),
        hint,
    }
}

pub(super) fn flatten<'a>(map: &'a Mapping, prefix: &str, out: &mut Vec<(String, &'a Value)>) {
    for (k, v) in map {
        let name = match k {
            Value::String(s) => s.clone(),
            other => serde_yaml::to_string(other)
                .unwrap_or_default()
                .trim()
                .to_string(),
        };
        let key = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}.{name}")
        };
        match v {
            Value::Mapping(m)
                if !keys::is_whole_value(&key)
                    && (keys::is_section(&key) || keys::spec(&key).is_none()) =>
            {
                flatten(m, &key, out)
            }
            _ => out.push((key, v)),
        }
    }
}

pub(super) fn bad(key: &str, reason: impl Into<String>) -> BenchError {
    BenchError::BadParam {
        key: key.to_string(),
        reason: reason.into(),
    }
}

pub(super) fn describe(v: &Value) -> String {
    serde_yaml::to_string(v)
        .unwrap_or_default()
        .trim()
        .to_string()
}

pub(super) fn check_value(key: &str, value: &Value) -> Result<(), BenchError> {
    let Some(spec) = keys::spec(key) else {
        return Err(unknown_key(key));
    };
    if value.is_null() {
        return Err(bad(key, "a value is required"));
    }
    match spec.ty {
        KeyType::UInt => match value.as_u64() {
            Some(_) => Ok(()),
            None => Err(bad(
                key,
                format!("expected a non-negative integer, got '{}'", describe(value)),
            )),
        },
        KeyType::Int => match value.as_i64() {
            Some(_) => Ok(()),
            None => Err(bad(
                key,
                format!("expected an integer, got '{}'", describe(value)),
            )),
        },
        KeyType::Float => match value.as_f64() {
            Some(f) if f.is_finite() => Ok(()),
            _ => Err(bad(
                key,
                format!("expected a number, got '{}'", describe(value)),
            )),
        },
        KeyType::Bool => match value.as_bool() {
            Some(_) => Ok(()),
            None => Err(bad(
                key,
                format!("expected True or False, got '{}'", describe(value)),
            )),
        },
        KeyType::Str => match value {
            Value::String(_) | Value::Number(_) | Value::Bool(_) => Ok(()),
            _ => Err(bad(
                key,
                format!("expected a string, got '{}'", describe(value)),
            )),
        },
        KeyType::Enum(choices) => match value.as_str() {
            Some(s) if choices.contains(&s.to_ascii_lowercase().as_str()) => Ok(()),
            _ => Err(bad(
                key,
                format!(
                    "expected one of {}, got '{}'",
                    choices.join(", "),
                    describe(value)
                ),
            )),
        },
        KeyType::TimeSpec => time_spec(key, value).map(|_| ()),
        KeyType::List => match value {
            Value::Sequence(_) => Ok(()),
            _ => Err(bad(
                key,
                format!("expected a list, got '{}'", describe(value)),
            )),
        },
        KeyType::Any => Ok(()),
    }
}
