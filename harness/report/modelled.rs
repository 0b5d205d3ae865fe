//! MODELLED: the cost model's tables (manifests of kind `model`), their inputs and
//! provenance, and where a model predicts a measurement, both and the error.

use super::facts::Fit;
use crate::costmodel::link::Heldout;
use crate::manifest::{Manifest, Status};
use crate::spec::plan::Workload;
use crate::table::{Cell, Table};

/// The MODELLED section's content.
#[derive(Debug, Default)]
pub struct Modelled {
    /// One line per model run: what went in.
    pub inputs: Vec<String>,
    /// The cost model's tables, in manifest order.
    pub tables: Vec<Table>,
    /// Predictions set against measurements.
    pub predicted: Vec<Table>,
}

/// Collects the modelled tables from `list` and the predicted-vs-measured checks.
pub fn modelled(list: &[Manifest], fits: &[Fit], imported: &[super::imported::ImportedRun]) -> Modelled {
    let mut out = Modelled::default();
    for m in list.iter().filter(|m| !m.kind.launches_ranks() && m.status() == Status::Ok) {
        out.inputs.push(inputs_line(m));
        let tables = m.summary().and_then(|s| {
            s.model().map(|t| t.tables.clone()).or_else(|| s.advice().map(|a| crate::advise::record::named(&a.tables, &m.experiment)))
        });
        match tables {
            Some(tables) => match tables.iter().find(|t| !t.mixed_columns().is_empty()) {
                // A manifest's tables are data from outside: one whose column mixes quantities
                // is left out with the reason, as every reader skips a bad manifest.
                Some(bad) => out.inputs.push(format!(
                    "`{}` ({}): its tables are left out: table `{}` mixes quantities in column(s) {}",
                    m.experiment,
                    m.run_id.short(),
                    bad.id,
                    bad.mixed_columns().join(", ")
                )),
                None => out.tables.extend(tables),
            },
            None => out.inputs.push(format!("`{}` ({}): it carries no model tables", m.experiment, m.run_id.short())),
        }
    }
    out.predicted.extend(heldout(fits));
    out.predicted.extend(imported_heldout(imported));
    out.predicted.extend(predicted_vs_measured(&super::imported::labelled(list)));
    out
}

fn inputs_line(m: &Manifest) -> String {
    // A folder model by its path from the spec (`model::resolve::shown`), as the tables name it.
    let shown = |model: &String| crate::model::resolve::shown(model, &m.plan.spec_path);
    if let Workload::Advise { model, params } = &m.plan.workload {
        let model = shown(model);
        return format!(
            "`{}` ({}): advice for {model} on {} node(s) of {} {} (domains {}); {} prompt tokens, {} new, {} sequence(s), {}, by {}",
            m.experiment,
            m.run_id.short(),
            params.nodes,
            params.devices_per_node,
            params.device,
            if params.domains.is_empty() { "–".to_string() } else { params.domains.join(", ") },
            params.prompt_tokens,
            params.new_tokens,
            params.sequences,
            params.dtype.name(),
            params.objective.name()
        );
    }
    let Workload::Model { params, models, strategies, worlds, links, sequences, dtypes } = &m.plan.workload else {
        return format!("`{}` ({})", m.experiment, m.run_id.short());
    };
    let join = |v: Vec<String>| {
        if v.is_empty() {
            "–".to_string()
        } else {
            v.join(", ")
        }
    };
    format!(
        "`{}` ({}): models {}; strategies {}; worlds {}; links {}; devices {}; sequences {}; dtypes {}; context {} tokens",
        m.experiment,
        m.run_id.short(),
        join(models.iter().map(shown).collect()),
        join(strategies.iter().map(|s| s.name().to_string()).collect()),
        join(worlds.iter().map(u32::to_string).collect()),
        join(links.clone()),
        join(params.devices.clone()),
        join(sequences.iter().map(u32::to_string).collect()),
        join(dtypes.iter().map(|d| d.name().to_string()).collect()),
        params.context
    )
}

/// The fitted α-β line against the measured sizes it was not fitted to.
fn heldout(fits: &[Fit]) -> Option<Table> {
    let mut rows: Vec<(&Fit, Heldout)> = fits.iter().flat_map(|f| f.fit.heldout.iter().map(move |h| (f, *h))).collect();
    if rows.is_empty() {
        return None;
    }
    rows.sort_by(|(a, x), (b, y)| {
        (&a.experiment, super::facts::op_order(a.fit.op), a.fit.world, &a.link, x.size_bytes, &a.run).cmp(&(
            &b.experiment,
            super::facts::op_order(b.fit.op),
            b.fit.world,
            &b.link,
            y.size_bytes,
            &b.run,
        ))
    });
    Some(Table {
        id: "modelled-fit-heldout".into(),
        title: "Fitted α-β model against held-out sizes".into(),
        caption: "Predicted = intercept + slope × bytes of the fit in MEASURED (arithmetic); measured = the median at a size the fit did not use; error = (predicted − measured) / measured.".into(),
        columns: ["experiment", "op", "world", "link", "size", "predicted", "measured", "error", "run"].iter().map(|s| s.to_string()).collect(),
        rows: rows
            .iter()
            .map(|(f, h)| {
                vec![
                    Cell::text(&f.experiment),
                    Cell::text(f.fit.op.name()),
                    Cell::Count(f.fit.world.into()),
                    Cell::text(f.link.name()),
                    Cell::Bytes(h.size_bytes as f64),
                    Cell::Seconds(h.predicted_s),
                    Cell::Seconds(h.measured_s),
                    Cell::Change(h.error),
                    Cell::text(&f.run),
                ]
            })
            .collect(),
        provenance: vec!["α and β: least-squares fit to this machine's measured medians (Fitted link constants)".into()],
    })
}

/// The held-out check of the imported runs' fits, titled as imported.
fn imported_heldout(imported: &[super::imported::ImportedRun]) -> Option<Table> {
    let fits: Vec<Fit> = imported.iter().flat_map(|r| r.fits.iter().cloned()).collect();
    let mut t = heldout(&fits)?;
    t.id = "modelled-imported-fit-heldout".into();
    t.title = "Fitted α-β model against held-out sizes of imported runs".into();
    t.caption = "Predicted = intercept + slope × bytes of the imported run's fit (arithmetic); tool's time = the time the tool printed at a size the fit did not use (its mean over iterations, not parlab's median); error = (predicted − tool's time) / tool's time.".into();
    t.columns =
        ["experiment", "op", "world", "link", "size", "predicted", "tool's time", "error", "run"].iter().map(|s| s.to_string()).collect();
    t.provenance = vec!["α and β: least-squares fit to the imported tools' times (Fitted link constants of imported runs); measured by the tool, not parlab".into()];
    Some(t)
}

/// The cost model's predictions joined with the measured runs they predict
/// (`crate::costmodel::predict`: collectives at other sizes and world sizes; `super::predicted`:
/// every decode run).
fn predicted_vs_measured(list: &[Manifest]) -> Vec<Table> {
    let mut tables = crate::costmodel::predict::predicted_vs_measured(list);
    tables.extend(super::predicted::decode_tables(list));
    tables.extend(super::predicted::context_prefill_table(list));
    tables
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::summary::Summary;

    #[test]
    fn a_model_manifest_whose_table_mixes_quantities_is_left_out_with_the_reason() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/manifests/e496b7e32d4b96bd9b5ca9f1f2c401d8ffd9e184085589cf871eb95cc9c77683.json");
        let mut m = crate::manifest::read_one(&path).unwrap();
        let whole = modelled(std::slice::from_ref(&m), &[], &[]);
        assert!(!whole.tables.is_empty());
        let Some(Summary::Model(tables)) = m.summary_mut() else { panic!("a model manifest") };
        let table = &mut tables.tables[0];
        let column = table.columns.len() - 1;
        table.rows[0][column] = Cell::Seconds(1.0);
        table.rows[1][column] = Cell::Bytes(1.0);
        let bad_id = table.id.clone();
        let left = modelled(std::slice::from_ref(&m), &[], &[]);
        assert!(left.tables.is_empty(), "{:?}", left.tables.len());
        assert!(
            left.inputs.iter().any(|l| l.contains(&format!("its tables are left out: table `{bad_id}` mixes quantities"))),
            "{:?}",
            left.inputs
        );
    }
}
