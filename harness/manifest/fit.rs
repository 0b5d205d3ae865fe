//! The α–β fit of one collective as a manifest records it (`costmodel::link::fit_collective`
//! computes it; figures draw its line, tables show it, predictions use its link).

use crate::spec::schema::Op;
use serde::{Deserialize, Serialize};

/// A straight line `seconds = intercept + slope · bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// Seconds at zero bytes: the time of an empty message of the fitted op at its world.
    pub intercept_s: f64,
    /// Seconds per byte of message.
    pub slope_s_per_byte: f64,
}

impl Line {
    /// The line's time for a message of `bytes` (a negative slope counts as flat).
    pub fn at(&self, bytes: f64) -> f64 {
        self.intercept_s + self.slope_s_per_byte.max(0.0) * bytes
    }
}

/// A held-out size: what the fit predicts against what was measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Heldout {
    /// Message size.
    pub size_bytes: u64,
    /// Fitted prediction (seconds).
    pub predicted_s: f64,
    /// Measured median (seconds).
    pub measured_s: f64,
    /// (predicted - measured) / measured.
    pub error: f64,
}

/// The link constants fitted from one collective at one world size: the one fit type of
/// parlab (collect stores it, figures draw `line`, tables show it, predictions use `link`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkFit {
    /// The operation fitted.
    pub op: Op,
    /// Ranks.
    pub world: u32,
    /// The fitted line through the measured points: what figures draw and what held-out
    /// sizes are predicted with.
    pub line: Line,
    /// The link's latency per ring step: the line's intercept over the op's step count.
    pub alpha_per_step_s: f64,
    /// The link's bandwidth: the op's bandwidth factor over the line's slope; None when the
    /// slope is not positive (time flat in size).
    #[serde(rename = "beta_Bps")]
    pub beta_bps: Option<f64>,
    /// Largest size used in the fit.
    pub fit_max_bytes: u64,
    /// Sizes in the fit.
    pub fitted_points: usize,
    /// Larger sizes, predicted and compared.
    pub heldout: Vec<Heldout>,
}

impl LinkFit {
    /// The fitted line's time of a message of `bytes` at the fitted world.
    pub fn predict(&self, bytes: f64) -> f64 {
        self.line.at(bytes)
    }

    /// Whether the fit describes a link: a latency of at least zero and a positive finite
    /// bandwidth (a negative intercept would predict negative times at small sizes).
    pub fn is_physical(&self) -> bool {
        self.alpha_per_step_s >= 0.0 && self.beta_bps.is_some_and(|b| b > 0.0 && b.is_finite())
    }
}
