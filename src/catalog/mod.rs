//! GPU and model catalogs: data files embedded in the binary, plus the Hugging Face
//! `config.json` parser that turns a posted config into an [`Architecture`].

mod gpu;
pub mod hf_config;
mod model;

pub use gpu::{Gpu, GpuClass};
pub use model::{Architecture, MlpKind, ModelEntry, Moe, NormKind, Projection};

use std::collections::BTreeMap;

/// Both catalogs, parsed once at start-up from the embedded CSV files.
#[derive(Debug, Clone)]
pub struct Catalog {
    gpus: Vec<Gpu>,
    models: Vec<ModelEntry>,
    gpu_index: BTreeMap<String, usize>,
    model_index: BTreeMap<String, usize>,
}

/// The embedded data could not be parsed: a build-time bug, caught by the catalog tests.
#[derive(Debug, thiserror::Error)]
#[error("catalog data file {file}: {message}")]
pub struct CatalogError {
    pub file: &'static str,
    pub message: String,
}

impl Catalog {
    /// Parses the embedded `gpus.csv` and `models.csv`.
    pub fn embedded() -> Result<Self, CatalogError> {
        let gpus = gpu::parse(include_str!("data/gpus.csv"))?;
        let models = model::parse(include_str!("data/models.csv"))?;
        let gpu_index = gpus
            .iter()
            .enumerate()
            .map(|(i, g)| (g.id.clone(), i))
            .collect();
        let model_index = models
            .iter()
            .enumerate()
            .map(|(i, m)| (m.id.clone(), i))
            .collect();
        Ok(Self {
            gpus,
            models,
            gpu_index,
            model_index,
        })
    }

    pub fn gpus(&self) -> &[Gpu] {
        &self.gpus
    }

    pub fn models(&self) -> &[ModelEntry] {
        &self.models
    }

    pub fn gpu(&self, id: &str) -> Option<&Gpu> {
        self.gpu_index.get(id).map(|&i| &self.gpus[i])
    }

    pub fn model(&self, id: &str) -> Option<&ModelEntry> {
        self.model_index.get(id).map(|&i| &self.models[i])
    }

    /// Up to three known GPU ids closest to `id`, for "did you mean" answers.
    pub fn closest_gpus(&self, id: &str) -> Vec<String> {
        closest(id, self.gpu_index.keys())
    }

    /// Up to three known model ids closest to `id`.
    pub fn closest_models(&self, id: &str) -> Vec<String> {
        closest(id, self.model_index.keys())
    }
}

/// Ranks candidates by edit distance (ties broken by name) and keeps the best three.
fn closest<'a>(wanted: &str, candidates: impl Iterator<Item = &'a String>) -> Vec<String> {
    let wanted = wanted.to_ascii_lowercase();
    let mut scored: Vec<(usize, &String)> =
        candidates.map(|c| (edit_distance(&wanted, c), c)).collect();
    scored.sort();
    scored.into_iter().take(3).map(|(_, c)| c.clone()).collect()
}

/// Levenshtein distance over bytes (catalog ids are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, &ca) in a.iter().enumerate() {
        current[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

/// Shared CSV plumbing for the two data files.
fn read_rows<T: serde::de::DeserializeOwned>(
    file: &'static str,
    text: &str,
) -> Result<Vec<T>, CatalogError> {
    csv::Reader::from_reader(text.as_bytes())
        .deserialize()
        .collect::<Result<Vec<T>, _>>()
        .map_err(|e| CatalogError {
            file,
            message: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reference_gpu_and_model_is_in_the_catalog() {
        let catalog = Catalog::embedded().unwrap();
        let reference = include_str!("../../tests/fixtures/reference/gpus.csv");
        let ids: Vec<&str> = reference
            .lines()
            .skip(1)
            .filter_map(|line| line.split(',').next())
            .collect();
        assert_eq!(ids.len(), 36);
        for id in ids {
            assert!(catalog.gpu(id).is_some(), "{id}");
        }
        for id in [
            "qwen-7b",
            "llama-2-7b",
            "mixtral-8x7b",
            "llama-3.1-405b",
            "t0-3b",
        ] {
            assert!(catalog.model(id).is_some(), "{id}");
        }
    }

    #[test]
    fn closest_ids_suggest_the_obvious_typo_fix() {
        let catalog = Catalog::embedded().unwrap();
        assert_eq!(catalog.closest_models("llama-2-7")[0], "llama-2-7b");
        assert_eq!(catalog.closest_gpus("a100-80g")[0], "a100-80gb");
    }
}
