//! The process exit codes parlab documents in the README.

/// Everything ran (or was skipped) and no finding was made.
pub const OK: i32 = 0;
/// At least one run failed (a rank crashed, hung, or computed a wrong collective result).
pub const RUN_FAILED: i32 = 1;
/// The user's input was wrong: a malformed spec, a missing model, a bad flag.
pub const USER_ERROR: i32 = 2;
/// `audit` found runs that share an answer identity but produced different answers.
pub const AUDIT_ANSWER_CHANGED: i32 = 3;
/// `nightly` found a regression against the previous register.
pub const NIGHTLY_REGRESSION: i32 = 4;
