//! Units. Quantities are plain numbers whose names carry the unit (`*_bytes`, `*_gib`,
//! `*_flops`, `*_seconds`); these constants convert between them.

/// 2^30 bytes.
pub const GIB: f64 = 1_073_741_824.0;
/// 2^20 bytes.
pub const MIB: f64 = 1_048_576.0;
/// 10^9 bytes.
pub const GB: f64 = 1e9;

/// Rounds a non-negative byte count held as `f64` to whole bytes.
pub fn whole_bytes(bytes: f64) -> u64 {
    if bytes.is_finite() && bytes > 0.0 {
        bytes.round() as u64
    } else {
        0
    }
}
