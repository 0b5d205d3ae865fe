//! The cost model: model shapes, links, collective times, fits, per-strategy plans,
//! the MODELLED tables, and predictions joined with measurements.

pub mod catalogue;
pub mod link;
pub mod plan;
pub mod predict;
pub mod safetensors_header;
pub mod shape;
pub mod tables;

use crate::cli::UserError;
use crate::spec::schema::{Dtype, Kind};
use crate::spec::RunPlan;
use serde_json::{json, Value};
use shape::ModelShape;
use std::path::PathBuf;

/// The modelled tables of a `kind: model` run, as the manifest's summary `{"tables": [...]}`.
pub fn tables_for_plan(plan: &RunPlan) -> Result<Value, String> {
    let catalogue = catalogue::Catalogue::load_default().map_err(|e| e.to_string())?;
    let run = tables::ModelRun::from_workload(&plan.workload, &catalogue)?;
    Ok(json!({ "tables": run.tables() }))
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

fn shape_text(name: &str, s: &ModelShape, dtype: Dtype, ck: Option<&safetensors_header::CheckpointCount>) -> String {
    use crate::units::format_bytes;
    let b = dtype.bytes();
    let mut t = format!(
        "{name} ({}, {:?} layout)\n  parameters      {}\n  layers          {}\n  heads           {} query, {} KV (head width {})\n  hidden          {}\n  feed-forward    {}\n  vocabulary      {}\n  tied embeddings {}\n",
        s.model_type,
        s.family,
        tables::thousands(s.params),
        s.layers,
        s.heads,
        s.kv_heads,
        s.head_dim,
        s.hidden,
        s.intermediate,
        s.vocab,
        if s.tied_embeddings { "yes" } else { "no" },
    );
    t.push_str(&format!(
        "  {}: stored {} ({} B), streamed per decode step {} ({} B), KV cache per token {} ({} B)\n",
        dtype.name(),
        format_bytes(s.stored_bytes(b) as f64),
        s.stored_bytes(b),
        format_bytes(s.streamed_bytes(b) as f64),
        s.streamed_bytes(b),
        format_bytes(s.kv_bytes_per_token(b) as f64),
        s.kv_bytes_per_token(b)
    ));
    for w in [2u64, 4, 8, 16] {
        let k = s.kv_share(w, b);
        let cap = if k.capped { format!(" (capped: {} copies of each KV head)", k.copies_of_each_head) } else { String::new() };
        let problem = s.tensor_split_problem(w).map(|p| format!("; tensor split refused: {p}")).unwrap_or_default();
        t.push_str(&format!(
            "  tensor x{w}: {} KV heads/device, KV {}/token/device{cap}{problem}\n",
            k.kv_heads_per_device,
            format_bytes(k.bytes_per_token_per_device as f64)
        ));
    }
    if let Some(c) = ck {
        t.push_str(&format!(
            "  checkpoint: {} values stored, formula {}\n",
            tables::thousands(c.stored_values),
            tables::thousands(c.formula_params)
        ));
        for e in &c.explained {
            t.push_str(&format!("    {:+} values: {}\n", e.values, e.reason));
        }
        if c.unexplained != 0 {
            t.push_str(&format!("    {:+} values NOT explained\n", c.unexplained));
        }
    }
    t
}

/// Writes to stdout, ignoring a closed pipe (`parlab shape gpt2 | head`).
fn print_quietly(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// `parlab shape`: prints the shape of `model` (a name under models/ or a folder) as text or JSON.
pub fn shape_command(model: &str, as_json: bool, dtype: &str) -> anyhow::Result<i32> {
    let dt = parse_dtype(dtype).ok_or_else(|| UserError(format!("--dtype {dtype}: unknown; use float32, float16 or bfloat16")))?;
    let named = tables::load_shape(model).map_err(UserError)?;
    let dir = crate::model::resolve_model(model).dir;
    let ck = safetensors_header::count_checkpoint(&dir, named.shape.params, named.shape.tied_embeddings)?;
    let text = if as_json {
        format!("{}\n", serde_json::to_string_pretty(&shape_json(&named.shape, dt, ck.as_ref()))?)
    } else {
        shape_text(model, &named.shape, dt, ck.as_ref())
    };
    print_quietly(&text);
    Ok(0)
}

/// The `kind: model` runs of the specs under `paths` (default: experiments/); other kinds are skipped.
pub fn model_plans(paths: &[PathBuf]) -> Result<Vec<RunPlan>, crate::spec::Problems> {
    let files = crate::spec::spec_files(paths)?;
    let mut problems = Vec::new();
    let mut runs = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        let is_model = serde_yaml::from_str::<serde_yaml::Value>(&text)
            .ok()
            .and_then(|v| v.get("kind").and_then(|k| k.as_str().map(|s| s == Kind::Model.name())))
            .unwrap_or(false);
        if !is_model {
            continue;
        }
        match crate::spec::validate::validate(&file, &text) {
            Ok(e) => match crate::spec::expand::expand(&e, &text, 1) {
                Ok(r) => runs.extend(r),
                Err(p) => problems.extend(p),
            },
            Err(p) => problems.extend(p),
        }
    }
    if problems.is_empty() {
        Ok(runs)
    } else {
        Err(crate::spec::Problems(problems))
    }
}

/// `parlab model` without a subcommand: prints the modelled tables of the `kind: model` specs.
pub fn model_command(paths: &[PathBuf]) -> anyhow::Result<i32> {
    let runs = model_plans(paths)?;
    if runs.is_empty() {
        return Err(UserError("no `kind: model` spec found (looked in the given paths, or experiments/)".into()).into());
    }
    let catalogue = catalogue::Catalogue::load_default().map_err(|e| UserError(e.to_string()))?;
    for run in &runs {
        let model_run = tables::ModelRun::from_workload(&run.workload, &catalogue).map_err(UserError)?;
        let mut text = format!("## {} (MODELLED, run {})\n\n", run.experiment, run.short_id());
        for t in model_run.tables() {
            text.push_str(&tables::render_markdown(&t));
        }
        print_quietly(&text);
    }
    Ok(0)
}
