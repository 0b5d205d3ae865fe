//! `parlab shape`: a model's shape from its config.json.

/// Prints the shape of `model` as text or JSON.
pub fn run(model: &str, as_json: bool, dtype: &str) -> anyhow::Result<i32> {
    crate::costmodel::shape_command(model, as_json, dtype)
}
