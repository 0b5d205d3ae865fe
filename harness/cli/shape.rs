//! `parlab shape`: a model's shape from its config.json, as text or JSON.

use super::Error;
use crate::costmodel::safetensors_header::{count_checkpoint, CheckpointCount};
use crate::costmodel::shape::ModelShape;
use crate::costmodel::tables::load_shape;
use crate::costmodel::{parse_dtype, shape_json};
use crate::report::fmt::thousands;
use crate::spec::schema::Dtype;

/// The shape as `parlab shape` prints it.
fn shape_text(name: &str, s: &ModelShape, window: Option<u64>, dtype: Dtype, ck: Option<&CheckpointCount>) -> String {
    use crate::units::format_bytes;
    let b = dtype.bytes();
    let mut t = format!(
        "{name} ({}, {:?} layout)\n  parameters      {}\n  layers          {}\n  heads           {} query, {} KV (head width {})\n  hidden          {}\n  feed-forward    {}\n  vocabulary      {}\n  tied embeddings {}\n",
        s.model_type,
        s.family,
        thousands(s.params),
        s.layers,
        s.heads,
        s.kv_heads,
        s.head_dim,
        s.hidden,
        s.intermediate,
        s.vocab,
        if s.tied_embeddings { "yes" } else { "no" },
    );
    if let Some(e) = s.experts {
        t.push_str(&format!("  experts         {} per layer, {} per token\n", e.count, e.active));
    }
    if let Some(w) = window {
        t.push_str(&format!("  sliding window  {w} tokens (not modelled: the KV cache below is per token of the whole context)\n"));
    }
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
        if let Some(problem) = s.tensor_split_problem(w) {
            t.push_str(&format!("  tensor x{w}: refused: {problem}\n"));
            continue;
        }
        let k = s.kv_share(w, b);
        let cap = if k.capped { format!(" (capped: {} copies of each KV head)", k.copies_of_each_head) } else { String::new() };
        t.push_str(&format!(
            "  tensor x{w}: {} KV heads/device, KV {}/token/device{cap}\n",
            k.kv_heads_per_device,
            format_bytes(k.bytes_per_token_per_device as f64)
        ));
    }
    if let Some(c) = ck {
        t.push_str(&format!("  checkpoint: {} values stored, formula {}\n", thousands(c.stored_values), thousands(c.formula_params)));
        for e in &c.explained {
            t.push_str(&format!("    {:+} values: {}\n", e.values, e.reason));
        }
        if c.unexplained != 0 {
            t.push_str(&format!("    {:+} values NOT explained\n", c.unexplained));
        }
    }
    t
}

/// `parlab shape`: prints the shape of `model` (a name under models/ or a folder) as text or JSON.
pub fn run(model: &str, as_json: bool, dtype: &str) -> super::Result<i32> {
    let dt = parse_dtype(dtype).ok_or_else(|| Error::Usage(format!("--dtype {dtype}: unknown; use float32, float16 or bfloat16")))?;
    let named = load_shape(model).map_err(|e| Error::Usage(e.to_string()))?;
    let dir = crate::model::resolve_model(model).dir;
    let ck = count_checkpoint(&dir, named.shape.params, named.shape.tied_embeddings)?;
    let text = if as_json {
        let mut value = shape_json(&named.shape, dt, ck.as_ref());
        value["sliding_window"] = serde_json::json!(named.sliding_window);
        format!("{}\n", serde_json::to_string_pretty(&value)?)
    } else {
        shape_text(model, &named.shape, named.sliding_window, dt, ck.as_ref())
    };
    super::output::print(&text)?;
    Ok(0)
}
