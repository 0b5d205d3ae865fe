//! The layouts a machine's devices can be cut into: data × tensor × pipeline replicas, and
//! data × expert replicas for a mixture. Every layout uses every device; a tensor group is
//! contiguous (the innermost), its pipeline stages next, replicas outermost.

use crate::costmodel::shape::ModelShape;
use serde::Serialize;

/// One way to cut the machine's devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Layout {
    /// Replicas, each serving its own sequences.
    pub data: u32,
    /// Devices each layer is split over.
    pub tensor: u32,
    /// Stages of layers.
    pub pipeline: u32,
    /// Devices a mixture's experts are placed over (1: not an expert split).
    pub expert: u32,
}

impl Layout {
    /// Devices one replica spans.
    pub fn devices_per_replica(&self) -> u32 {
        self.tensor * self.pipeline * self.expert
    }

    /// True for whole replicas with nothing split: the layout to measure first.
    pub fn is_replicas_only(&self) -> bool {
        self.devices_per_replica() == 1
    }

    /// `TP=2 x DP=2`, naming only the split axes (a single device is `TP=1`).
    pub fn label(&self) -> String {
        let mut parts = Vec::new();
        if self.expert > 1 {
            parts.push(format!("EP={}", self.expert));
        }
        if self.tensor > 1 || self.devices_per_replica() == 1 {
            parts.push(format!("TP={}", self.tensor));
        }
        if self.pipeline > 1 {
            parts.push(format!("PP={}", self.pipeline));
        }
        parts.push(format!("DP={}", self.data));
        parts.join(" x ")
    }
}

fn divisors(n: u32) -> impl Iterator<Item = u32> {
    (1..=n).filter(move |d| n.is_multiple_of(*d))
}

/// Every layout of `devices` devices for `shape`, replicas-only first, then by tensor and pipeline degree.
pub fn enumerate(devices: u32, shape: &ModelShape) -> Vec<Layout> {
    let mut out = Vec::new();
    for tensor in divisors(devices) {
        for pipeline in divisors(devices / tensor) {
            out.push(Layout { data: devices / tensor / pipeline, tensor, pipeline, expert: 1 });
        }
    }
    if shape.experts.is_some() {
        out.extend(divisors(devices).filter(|&e| e > 1).map(|expert| Layout { data: devices / expert, tensor: 1, pipeline: 1, expert }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::costmodel::shape::shape_from_config;
    use crate::model::ModelConfig;
    use serde_json::json;

    fn shape(experts: Option<u32>) -> ModelShape {
        let mut v = json!({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
            "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 100});
        if let Some(e) = experts {
            v["model_type"] = json!("mixtral");
            v["num_local_experts"] = json!(e);
        }
        shape_from_config(&ModelConfig::from_value(v).unwrap()).unwrap()
    }

    #[test]
    fn every_layout_uses_every_device_once() {
        let all = enumerate(8, &shape(None));
        // (t, p) with t | 8 and p | 8/t: 4 + 3 + 2 + 1 = 10.
        assert_eq!(all.len(), 10);
        assert!(all.iter().all(|l| l.data * l.devices_per_replica() == 8 && l.expert == 1));
        assert_eq!(all[0].label(), "TP=1 x DP=8");
        assert!(all.iter().any(|l| l.label() == "TP=2 x PP=2 x DP=2"));
    }

    #[test]
    fn a_mixture_adds_expert_splits() {
        let all = enumerate(4, &shape(Some(8)));
        let experts: Vec<String> = all.iter().filter(|l| l.expert > 1).map(Layout::label).collect();
        assert_eq!(experts, ["EP=2 x DP=2", "EP=4 x DP=1"]);
    }
}
