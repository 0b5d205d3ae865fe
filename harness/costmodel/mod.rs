//! The cost model: model shapes, links, collective times, fits, per-strategy plans,
//! the MODELLED tables, and predictions joined with measurements.

pub mod cache;
pub mod catalogue;
pub mod hybrid;
pub mod link;
pub mod measured_links;
pub mod plan;
pub mod predict;
pub mod safetensors_header;
pub mod shape;
pub mod step;
pub mod tables;

use crate::manifest::summary::{ModelTables, Summary};
use crate::spec::schema::Dtype;
use crate::spec::RunPlan;
use serde_json::{json, Value};
use shape::ModelShape;

/// The modelled tables of a `kind: model` run, as the manifest's summary.
pub fn tables_for_plan(plan: &RunPlan) -> Result<Summary, tables::TablesError> {
    let catalogue = catalogue::Catalogue::load_default()?;
    let run = tables::ModelRun::of_plan(plan, &catalogue)?;
    Ok(Summary::Model(ModelTables { tables: run.tables() }))
}

/// Parses a dtype name as `--dtype` accepts it (float32/fp32, float16/fp16, bfloat16/bf16).
pub fn parse_dtype(text: &str) -> Option<Dtype> {
    match text.to_ascii_lowercase().as_str() {
        "float32" | "fp32" | "f32" => Some(Dtype::Float32),
        "float16" | "fp16" | "f16" | "half" => Some(Dtype::Float16),
        "bfloat16" | "bf16" => Some(Dtype::Bfloat16),
        _ => None,
    }
}

/// The JSON `parlab shape --json` prints: dimensions, bytes per dtype, KV sharing, checkpoint.
pub fn shape_json(shape: &ModelShape, dtype: Dtype, checkpoint: Option<&safetensors_header::CheckpointCount>) -> Value {
    let per_dtype: serde_json::Map<String, Value> =
        [Dtype::Float32, Dtype::Float16, Dtype::Bfloat16].iter().map(|d| (d.name().to_string(), bytes_json(shape, *d))).collect();
    let kv_sharing: Vec<Value> = [1u64, 2, 4, 8, 16]
        .iter()
        .map(|&w| {
            let mut v = serde_json::to_value(shape.kv_share(w, dtype.bytes())).unwrap_or(Value::Null);
            v["tensor_split_problem"] = json!(shape.tensor_split_problem(w));
            v
        })
        .collect();
    json!({
        "model_type": shape.model_type,
        "family": shape.family,
        "params": shape.params,
        "layers": shape.layers,
        "heads": shape.heads,
        "kv_heads": shape.kv_heads,
        "head_dim": shape.head_dim,
        "hidden": shape.hidden,
        "intermediate": shape.intermediate,
        "vocab": shape.vocab,
        "tied_embeddings": shape.tied_embeddings,
        "norms_per_block": shape.norms_per_block,
        "experts": shape.experts,
        "breakdown": shape.breakdown,
        "streamed_params_per_step": shape.streamed_params(),
        "dtype": dtype.name(),
        "bytes": bytes_json(shape, dtype),
        "per_dtype": per_dtype,
        "kv_sharing_tensor_parallel": kv_sharing,
        "checkpoint": checkpoint,
    })
}

fn bytes_json(shape: &ModelShape, d: Dtype) -> Value {
    let b = d.bytes();
    json!({
        "bytes_per_value": b,
        "stored_bytes": shape.stored_bytes(b),
        "streamed_bytes_per_step": shape.streamed_bytes(b),
        "kv_bytes_per_token": shape.kv_bytes_per_token(b),
    })
}
