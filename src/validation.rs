//! Field-level validation errors, shared by the request types, the HF config parser and the
//! HTTP error renderer.

use serde::Serialize;
use utoipa::ToSchema;

/// One bad input field: where it is (RFC 6901 JSON pointer into the request) and why.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct FieldError {
    #[schema(example = "/parallelism/zero_stage")]
    pub pointer: String,
    #[schema(example = "must be one of 0, 1, 2, 3; got 4")]
    pub message: String,
}

impl FieldError {
    pub fn new(pointer: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            pointer: pointer.into(),
            message: message.into(),
        }
    }
}

/// Collects field errors so that one answer names every bad field, not just the first.
#[derive(Debug, Default)]
pub struct Problems(Vec<FieldError>);

impl Problems {
    pub fn push(&mut self, pointer: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError::new(pointer, message));
    }

    pub fn extend(&mut self, errors: Vec<FieldError>) {
        self.0.extend(errors);
    }

    /// Checks `low <= value <= high` for a number, recording a message with the range.
    pub fn range<T: PartialOrd + std::fmt::Display + Copy>(
        &mut self,
        pointer: &str,
        value: T,
        low: T,
        high: T,
    ) {
        if !(value >= low && value <= high) {
            self.push(
                pointer,
                format!("must be between {low} and {high}; got {value}"),
            );
        }
    }

    /// `Ok(value)` when nothing was recorded, else every recorded error.
    pub fn finish<T>(self, value: T) -> Result<T, Vec<FieldError>> {
        if self.0.is_empty() {
            Ok(value)
        } else {
            Err(self.0)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
