//! The one integration-test binary: the real HTTP stack, the CLI and the accuracy reports.

mod accuracy;
mod bad_input;
mod cli;
mod costs;
mod estimates;
mod hf_config;
mod openapi;
mod support;
mod time_accuracy;
