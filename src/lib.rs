//! trainplan: will an LLM training job fit, how long will it take, what will it cost.

pub mod api;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod error;
pub mod estimate;
pub mod http;
pub mod openapi;
pub mod pricing;
pub mod telemetry;
pub mod validation;
