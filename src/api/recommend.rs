//! The recommendation request (design §3.4, issue 5).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ModelInput;
use crate::catalog::Catalog;
use crate::error::ApiError;
use crate::estimate::recommend::{Quality, RecommendInputs, TaskType};
use crate::pricing::{Currency, Fx, PriceBook, PriceType};
use crate::validation::Problems;

/// The training data.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DatasetInput {
    #[schema(example = 200000, minimum = 1, maximum = 1e12)]
    pub samples: f64,
    /// Default 512.
    #[schema(example = 512, minimum = 1, maximum = 1000000)]
    pub tokens_per_sample: Option<u64>,
    /// Default 3.
    #[schema(example = 3, minimum = 0.001, maximum = 1000)]
    pub epochs: Option<f64>,
}

/// Money for the whole project.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetInput {
    #[schema(example = 20000, minimum = 0, maximum = 1e12)]
    pub amount: f64,
    /// Default USD.
    pub currency: Option<Currency>,
}

/// Inputs of a recommendation; only `model` and `dataset` are required.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecommendationRequest {
    pub model: ModelInput,
    pub dataset: DatasetInput,
    /// `simple`, `general` (default) or `complex`.
    pub task_type: Option<TaskType>,
    /// `max`, `balanced` (default) or `budget`.
    pub quality: Option<Quality>,
    /// Wall hours one run may take.
    #[schema(minimum = 0.001, maximum = 1e6)]
    pub deadline_hours: Option<f64>,
    pub budget: Option<BudgetInput>,
    /// How long the project lasts (default 1).
    #[schema(minimum = 0.01, maximum = 240)]
    pub project_months: Option<f64>,
    /// Training runs over the project (default 1).
    #[schema(minimum = 1, maximum = 1e5)]
    pub expected_runs: Option<f64>,
    /// Whether the team can run its own servers (default false).
    pub can_operate_hardware: Option<bool>,
    /// A self-build's hardware price per GPU, in the budget's currency.
    #[schema(minimum = 0, maximum = 1e10)]
    pub hardware_cost_per_gpu: Option<f64>,
    #[schema(minimum = 0, maximum = 1e10)]
    pub ops_cost_per_month: Option<f64>,
    /// Providers to consider (default: every one in the price book).
    pub providers: Option<Vec<String>>,
    /// Price types allowed (default: all).
    pub price_types: Option<Vec<PriceType>>,
    /// GPUs to consider (default: every GPU the price book prices).
    pub gpus: Option<Vec<String>>,
}

impl RecommendationRequest {
    pub fn resolve<'c>(
        &self,
        catalog: &'c Catalog,
        book: &PriceBook,
        fx: &'c Fx,
        now: jiff::Timestamp,
    ) -> Result<(RecommendInputs<'c>, Vec<String>), ApiError> {
        let mut problems = Problems::default();
        let mut defaulted = Vec::new();
        let model = self.model.resolve(catalog, &mut problems)?;
        let d = &self.dataset;
        problems.range("/dataset/samples", d.samples, 1.0, 1e12);
        let tokens_per_sample = d.tokens_per_sample.unwrap_or_else(|| {
            defaulted.push("dataset.tokens_per_sample: 512 (default)".into());
            512
        });
        problems.range(
            "/dataset/tokens_per_sample",
            tokens_per_sample,
            1,
            1_000_000,
        );
        let epochs = d.epochs.unwrap_or_else(|| {
            defaulted.push("dataset.epochs: 3 (default)".into());
            3.0
        });
        problems.range("/dataset/epochs", epochs, 1e-3, 1000.0);
        if let Some(h) = self.deadline_hours {
            problems.range("/deadline_hours", h, 1e-3, 1e6);
        }
        if let Some(b) = &self.budget {
            problems.range("/budget/amount", b.amount, 0.0, 1e12);
        }
        let project_months = self.project_months.unwrap_or_else(|| {
            defaulted.push("project_months: 1 (default)".into());
            1.0
        });
        problems.range("/project_months", project_months, 0.01, 240.0);
        let runs = self.expected_runs.unwrap_or(1.0);
        problems.range("/expected_runs", runs, 1.0, 1e5);
        for (field, value) in [
            ("hardware_cost_per_gpu", self.hardware_cost_per_gpu),
            ("ops_cost_per_month", self.ops_cost_per_month),
        ] {
            if let Some(v) = value {
                problems.range(&format!("/{field}"), v, 0.0, 1e10);
            }
        }
        let gpus = match &self.gpus {
            Some(ids) => {
                let mut found = Vec::new();
                for (i, id) in ids.iter().enumerate() {
                    match catalog.gpu(id) {
                        Some(gpu) => found.push(gpu),
                        None => problems.push(
                            format!("/gpus/{i}"),
                            format!(
                                "unknown GPU {id:?}; closest: {}",
                                catalog.closest_gpus(id).join(", ")
                            ),
                        ),
                    }
                }
                found
            }
            None => {
                defaulted.push("gpus: every GPU the price book prices (default)".into());
                catalog
                    .gpus()
                    .iter()
                    .filter(|g| book.quotes().iter().any(|q| q.gpu == g.id))
                    .collect()
            }
        };
        let currency = self
            .budget
            .as_ref()
            .and_then(|b| b.currency)
            .unwrap_or(Currency::Usd);
        let inputs = RecommendInputs {
            model,
            task: self.task_type.unwrap_or_default(),
            quality: self.quality.unwrap_or_default(),
            samples: d.samples,
            tokens_per_sample,
            epochs,
            deadline_hours: self.deadline_hours,
            budget: self.budget.as_ref().map(|b| b.amount),
            currency,
            project_months,
            runs,
            can_operate_hardware: self.can_operate_hardware.unwrap_or(false),
            hardware_cost_per_gpu: self.hardware_cost_per_gpu,
            ops_cost_per_month: self.ops_cost_per_month,
            providers: self.providers.clone().unwrap_or_default(),
            price_types: self.price_types.clone().unwrap_or_default(),
            gpus,
            fx,
            now,
        };
        let inputs = problems.finish(inputs).map_err(ApiError::Invalid)?;
        Ok((inputs, defaulted))
    }
}
