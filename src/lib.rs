//! trainplan: will an LLM training job fit, how long will it take, what will it cost.

pub mod catalog;
pub mod estimate;
pub mod validation;
