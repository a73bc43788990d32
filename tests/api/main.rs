//! The one integration-test binary: the real HTTP stack, the CLI and the accuracy reports.

mod accuracy;
mod answers;
mod bad_input;
mod bounds;
mod cli;
mod costs;
mod estimates;
mod feeds;
mod fuzz;
mod gate;
mod hardening;
mod hf_config;
mod live;
mod mcp;
mod openapi;
mod recommend;
mod spreadsheets;
mod support;
mod time_accuracy;
