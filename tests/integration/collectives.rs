//! Two-rank runs of the collectives, membw and dispatch workloads under mpirun: results checked,
//! results files written, and the summary recomputed independently from the raw samples.

use super::launch::Suite;
use parlab::collect::frames::read_parquet;
use parlab::manifest::{ResultFiles, Status};
use parlab::spec::Op;
use std::collections::BTreeMap;
use std::path::Path;

/// The results file `pick` chooses of a run, read as a frame.
fn samples(suite: &Suite, results: Option<&ResultFiles>, pick: fn(&ResultFiles) -> &Path) -> polars::prelude::DataFrame {
    let files = results.expect("results files");
    read_parquet(&suite.manifests().join(pick(files))).unwrap()
}

fn column_f64(frame: &polars::prelude::DataFrame, name: &str) -> Vec<f64> {
    frame
        .column(name)
        .unwrap()
        .as_materialized_series()
        .cast(&polars::prelude::DataType::Float64)
        .unwrap()
        .f64()
        .unwrap()
        .into_no_null_iter()
        .collect()
}

fn column_str(frame: &polars::prelude::DataFrame, name: &str) -> Vec<String> {
    let ca = frame.column(name).unwrap().as_materialized_series().str().unwrap().clone();
    (0..ca.len()).map(|i| ca.get(i).unwrap_or("").to_string()).collect()
}

#[test]
fn every_op_runs_checked_on_both_links_and_the_summary_matches_the_samples() {
    let suite = Suite::new();
    suite.spec(
        "sweep",
        "name: sweep\nkind: collectives\nworld: 2\nlink: [mpi-shm, mpi-tcp]\nsizes: [4, 4096, 65536]\niterations: 4\nwarmup: 1\nthreads: 1\ntimeout: 120s\n",
    );
    assert_eq!(suite.run(&[]), 0);
    let (all, _) = parlab::manifest::read_all(&suite.manifests());
    assert_eq!(all.len(), 2);
    for m in &all {
        assert_eq!(m.status(), Status::Ok, "{:?}", m.reason());
        let command = &m.launch().unwrap().command;
        let btl = if m.plan.link == parlab::spec::link::Link::MpiTcp { "--mca btl self,tcp" } else { "--mca btl self,vader" };
        assert!(command.contains(btl), "{command}");
        let coll = m.summary().and_then(|s| s.collectives()).expect("a collectives summary");
        let rows = &coll.rows;
        assert_eq!(rows.len(), parlab::spec::MPI_OPS.len() * 3, "every MPI op (the default) at every size");
        let s = samples(&suite, m.results(), |f| &f.samples);
        // 5 ops timed on both ranks, ping-pong on rank 0 only: 3 sizes x (4 iterations + the blocks).
        let blocks = parlab::rank::collectives::blocks_of(4).0 as usize;
        assert_eq!(s.height(), (5 * 2 + 1) * 3 * (4 + blocks));
        let (figures, sizes, ranks, reps, iters, secs) = (
            column_str(&s, "figure"),
            column_f64(&s, "size_bytes"),
            column_f64(&s, "rank"),
            column_f64(&s, "repetition"),
            column_f64(&s, "iteration"),
            column_f64(&s, "seconds"),
        );
        for row in rows {
            assert_eq!(row.wrong, 0);
            let op = row.op.name();
            let size = row.size_bytes as f64;
            let mut slowest: BTreeMap<(u64, u64), f64> = BTreeMap::new();
            for i in 0..s.height() {
                if figures[i] == op && sizes[i] == size {
                    let e = slowest.entry((reps[i] as u64, iters[i] as u64)).or_insert(0.0);
                    *e = e.max(secs[i]);
                    assert!(ranks[i] < 2.0);
                }
            }
            let mut v: Vec<f64> = slowest.values().copied().collect();
            v.sort_by(f64::total_cmp);
            assert_eq!(v.len(), 4, "{op} {size}");
            let median = (v[1] + v[2]) / 2.0;
            // The op's own time: per block, the mean over the ranks that timed it; its median over blocks.
            let mut blocks: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
            for i in 0..s.height() {
                if figures[i] == format!("{op}@block") && sizes[i] == size {
                    blocks.entry(iters[i] as u64).or_default().push(secs[i]);
                }
            }
            let mut own: Vec<f64> = blocks.values().map(|b| b.iter().sum::<f64>() / b.len() as f64).collect();
            own.sort_by(f64::total_cmp);
            assert_eq!(own.len(), 3, "{op} {size}: one sample per block");
            assert!(own[0] > 0.0);
            // JSON text round trips f64 to within an ulp or so, hence the relative tolerance.
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs();
            let own_time = row.op_time.expect("the op's own time");
            assert!(close(row.time.median, median), "{op} {size}: {row:?}");
            assert!(close(row.time.max, v[3]), "{op} {size}: {row:?}");
            assert!(close(own_time.median, own[1]), "{op} {size}: {row:?}");
            let skew = row.skew_s().unwrap();
            // A difference of two nearly equal times: its rounding is relative to the times, not to it.
            assert!((skew - (median - own[1])).abs() <= 1e-12 * median, "{op} {size}: {row:?}");
            let algbw = row.algbw_bps();
            assert!((algbw - size / median).abs() <= 1e-9 * algbw);
            assert!((row.busbw_bps() - algbw * row.op.busbw_factor(2)).abs() <= 1e-9 * algbw);
        }
        let summary = samples(&suite, m.results(), |f| &f.summary);
        assert_eq!(summary.height(), rows.len());
        let fit = coll.fit(Op::AllReduce).expect("an all-reduce fit");
        assert!(fit.alpha_per_step_s.is_finite());
        assert!(coll.fit_method.contains("op_time_s"), "{}", coll.fit_method);
        // The stored fit is the line through the op's own medians up to 1 MiB.
        let own: Vec<(u64, f64)> = rows.iter().filter(|r| r.op == Op::AllReduce).map(|r| (r.size_bytes, r.fit_time())).collect();
        let again = parlab::costmodel::link::fit_collective(Op::AllReduce, 2, &own, 1 << 20).expect("a fit of the rows");
        let near = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1e-30);
        assert!(
            near(fit.line.intercept_s, again.line.intercept_s) && near(fit.line.slope_s_per_byte, again.line.slope_s_per_byte),
            "{fit:?} vs {again:?}"
        );
        assert_eq!((fit.fit_max_bytes, fit.fitted_points), (again.fit_max_bytes, again.fitted_points));
    }
}

#[test]
fn membw_reports_aggregate_and_per_process_bandwidth() {
    let suite = Suite::new();
    suite.spec("bw", "name: bw\nkind: membw\nworld: 2\nthreads: 1\nbuffer: 16MiB\nrepetitions: 3\nwarmup: 1\ntimeout: 120s\n");
    assert_eq!(suite.run(&[]), 0);
    let m = suite.manifest("bw");
    assert_eq!(m.status(), Status::Ok, "{:?}", m.reason());
    let bw = serde_json::to_value(m.summary().unwrap()).unwrap()["membw"].clone();
    assert_eq!(bw["processes"], 2);
    assert_eq!(bw["buffer_bytes"], 16 << 20);
    assert_eq!(bw["aggregate_Bps"]["n"], 3);
    assert_eq!(bw["per_process_Bps"]["n"], 6);
    let s = samples(&suite, m.results(), |f| &f.samples);
    let (secs, reps, figures) = (column_f64(&s, "seconds"), column_f64(&s, "repetition"), column_str(&s, "figure"));
    assert_eq!(s.height(), 2 * 3 * 2, "two ranks, three repetitions, two kernels");
    let aggregate0 = |figure: &str| {
        let slowest = (0..s.height()).filter(|&i| reps[i] == 0.0 && figures[i] == figure).map(|i| secs[i]).fold(0.0, f64::max);
        2.0 * (16u64 << 20) as f64 / slowest
    };
    let summary = samples(&suite, m.results(), |f| &f.summary);
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b;
    assert!(close(column_f64(&summary, "aggregate_Bps")[0], aggregate0("membw")));
    assert!(close(column_f64(&summary, "stream_aggregate_Bps")[0], aggregate0("membw_stream")));
    let stream = &bw["stream"];
    assert_eq!(stream["per_process_Bps"]["n"], 6);
    assert!(parlab::model::matvec::Kernel::ALL.iter().any(|k| k.name() == stream["kernel"]), "{stream}");
    let (torch_med, stream_med) =
        (bw["per_process_Bps"]["median"].as_f64().unwrap(), stream["per_process_Bps"]["median"].as_f64().unwrap());
    let roof = &bw["roofline"];
    assert_eq!(roof["per_process_Bps"].as_f64().unwrap(), torch_med.max(stream_med), "{roof}");
    assert_eq!(roof["source"], if stream_med > torch_med { "stream" } else { "torch-sum" }, "{roof}");
}

#[test]
fn dispatch_round_trips_tokens_to_experts() {
    let suite = Suite::new();
    suite.spec(
        "ep",
        "name: ep\nkind: dispatch\nworld: 2\ntokens: [1, 8]\ntop_k: 2\nhidden: 64\niterations: 3\nwarmup: 1\nthreads: 1\ntimeout: 120s\n",
    );
    assert_eq!(suite.run(&[]), 0);
    let m = suite.manifest("ep");
    assert_eq!(m.status(), Status::Ok, "{:?}", m.reason());
    let rows = &m.summary().and_then(|s| s.dispatch()).expect("a dispatch summary").rows;
    let tokens: Vec<u64> = rows.iter().map(|r| r.tokens).collect();
    assert_eq!(tokens, vec![1, 8]);
    assert_eq!(rows[1].bytes, 8 * 2 * 64 * 4);
    assert_eq!(rows[0].time.n, 3);
}
