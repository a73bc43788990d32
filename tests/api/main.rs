//! The one integration-test binary: the real HTTP stack, the CLI and the accuracy reports.

mod accuracy;
