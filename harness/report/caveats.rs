//! "What the numbers do not show": limits generated from the manifests' facts.

use super::facts::Facts;
use crate::manifest::caveat::Caveat;
use crate::manifest::{Manifest, Status};
use crate::spec::link::Link;
use crate::spec::plan::Workload;
use crate::spec::schema::Kind;
use crate::spec::schema::{Dtype, Op};
use std::collections::{BTreeMap, BTreeSet};

/// The caveats, one sentence or short paragraph each, in a fixed order.
pub fn caveats(list: &[Manifest], facts: &Facts) -> Vec<String> {
    // Imported runs were launched by another tool elsewhere: their caveat is their own.
    let launched: Vec<&Manifest> = list
        .iter()
        .filter(|m| m.provenance.is_measured() && (m.launch().is_some() || (m.kind.launches_ranks() && m.status() == Status::Ok)))
        .collect();
    let mut out = Vec::new();
    out.extend(oversubscribed(&launched));
    out.extend(shared_memory(&launched));
    out.extend(links(&launched));
    out.extend(nccl_paths(&launched));
    out.extend(exactness(list, facts));
    out.extend(fit_errors(facts));
    out.extend(noise(facts));
    out.extend(collective_timing(facts));
    out.extend(kernels(&launched));
    out.extend(gpus(&launched, list));
    out.extend(super::imported::caveat(&facts.imported));
    out.extend(failed(list));
    out.extend(not_run(list));
    if list.iter().any(|m| !m.kind.launches_ranks() && m.status() == Status::Ok) {
        out.push("MODELLED tables are arithmetic from the cost model's inputs (shapes, device and link constants, some of them assumed; see each table's provenance), not measurements.".into());
    }
    if !facts.unreadable.is_empty() {
        out.push(format!(
            "{} runs ended ok but carried no summary the register can read: {}.",
            facts.unreadable.len(),
            facts.unreadable.join(", ")
        ));
    }
    out.extend(other_caveats(&launched));
    out.extend(shared_identities(list));
    out.extend(crate::manifest::cache::older_build_caveat(list));
    if out.is_empty() {
        out.push("No launched run recorded a caveat.".into());
    }
    out
}

/// Run identities that several experiments expanded to: measured once, shown under the first name.
fn shared_identities(list: &[Manifest]) -> Option<String> {
    let shared: Vec<String> = list
        .iter()
        .filter(|m| m.origins.len() > 1)
        .map(|m| {
            let names: Vec<String> = m.origins.iter().map(|o| format!("`{}` #{} ({})", o.experiment, o.index, o.spec.display())).collect();
            format!("run {} is {}", m.run_id.short(), names.join(" and "))
        })
        .collect();
    (!shared.is_empty()).then(|| {
        format!(
            "{} runs are the same run identity for several experiments of the same content, measured once and shown under the first name: {}.",
            shared.len(),
            shared.join("; ")
        )
    })
}

fn oversubscribed(launched: &[&Manifest]) -> Option<String> {
    let over: Vec<&&Manifest> = launched
        .iter()
        .filter(|m| m.launch().is_some_and(|l| l.oversubscribed) || m.caveats.iter().any(|c| matches!(c, Caveat::Oversubscribed { .. })))
        .collect();
    let first = over.first()?;
    let worst = over.iter().map(|m| m.layout.world * m.plan.threads_per_rank).max().unwrap_or(0);
    let cores = first.machine.cores;
    Some(format!(
        "{} of {} launched runs were oversubscribed (up to {worst} ranks × threads on {cores} cores): their times include the operating system time-slicing ranks, not only their work.",
        over.len(),
        launched.len()
    ))
}

/// Hosts a run's ranks recorded (1 when they recorded none: older manifests, early failures).
fn host_count(m: &Manifest) -> usize {
    let ranks = m.launch().map_or(&[][..], |l| &l.ranks[..]);
    crate::manifest::placement::by_host(ranks).len().max(1)
}

/// What the multi-rank runs on CPUs share: one memory system on one host, or their hosts'.
/// Runs whose ranks computed on GPUs are not said to have split no device.
fn shared_memory(launched: &[&Manifest]) -> Option<String> {
    let multi: Vec<&&Manifest> = launched.iter().filter(|m| m.layout.world > 1 && m.plan.device == crate::spec::Device::Cpu).collect();
    let spread = multi.iter().filter(|m| host_count(m) > 1).count();
    let one_host = multi.len() - spread;
    let mut text = String::new();
    if one_host > 0 {
        text.push_str(&format!(
            "No device was split. The {one_host} multi-rank runs are processes on one machine sharing one memory system: they show whether a split is exact and what its communication costs here, not the speed-up of devices that each bring their own memory bandwidth."
        ));
    }
    if spread > 0 {
        let most = multi.iter().map(|m| host_count(m)).max().unwrap_or(1);
        text.push_str(&format!(
            "{}{spread} multi-rank runs spread their ranks over several hosts (up to {most}; each run's caveats name them): their ranks on different hosts had their own memory systems.",
            if text.is_empty() { "" } else { " " }
        ));
    }
    (!text.is_empty()).then_some(text)
}

fn links(launched: &[&Manifest]) -> Option<String> {
    let links: BTreeSet<(&Link, bool)> =
        launched.iter().filter(|m| m.layout.world > 1).map(|m| (&m.plan.link, host_count(m) > 1)).collect();
    if links.is_empty() {
        return None;
    }
    let words: Vec<String> = links
        .iter()
        .map(|l| match *l {
            (Link::MpiShm, false) => "`mpi-shm` (Open MPI's shared-memory transport inside one machine)".to_string(),
            (Link::MpiShm, true) => "`mpi-shm` across hosts (shared memory inside a host, TCP between hosts)".to_string(),
            (Link::MpiTcp, false) => "`mpi-tcp` (TCP over loopback)".to_string(),
            (Link::MpiTcp, true) => "`mpi-tcp` across hosts (TCP between them)".to_string(),
            (other, _) => format!("`{other}`"),
        })
        .collect();
    // Loopback only where every link is an MPI transport (NCCL between GPUs crosses the
    // machine's own fabric) and every run stayed inside one host.
    let all_local = links.iter().all(|(link, spread)| !spread && matches!(link, Link::MpiShm | Link::MpiTcp | Link::MpiAuto));
    let tail = fabrics_tail(launched);
    let kind = if all_local { ": loopback, not an interconnect" } else { "" };
    Some(format!("The links measured were {}{kind}.{tail}", words.join(" and ")))
}

/// What NCCL chose in the NCCL runs that ran, per link and world, from each rank's NCCL log
/// (so a run with P2P disabled shows its path changed rather than assuming it).
fn nccl_paths(launched: &[&Manifest]) -> Option<String> {
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for m in launched.iter().filter(|m| m.status() == Status::Ok) {
        let Some(records) = m.launch().map(|l| &l.nccl).filter(|r| !r.is_empty()) else { continue };
        let ranks = records.len() as u32;
        let chosen: BTreeSet<String> =
            records.iter().map(|r| if r.unlogged.is_empty() { r.transports.describe(ranks) } else { r.unlogged.clone() }).collect();
        let settings =
            records.first().map(|r| r.variables.join(" ")).filter(|v| !v.is_empty()).map(|v| format!(" with {v}")).unwrap_or_default();
        let version = records.first().map(|r| r.version.as_str()).unwrap_or("");
        seen.insert(format!(
            "`{}` at world {} (NCCL {version}{settings}): {}",
            m.plan.link,
            m.layout.world,
            chosen.into_iter().collect::<Vec<_>>().join(" | ")
        ));
    }
    (!seen.is_empty()).then(|| format!("NCCL's own log of the paths it chose: {}.", seen.into_iter().collect::<Vec<_>>().join("; ")))
}

/// The sentence on fabrics no run measured. Where an NCCL run succeeded, NVLink and
/// InfiniBand are said to have no workload of their own rather than to be unmeasured: its
/// log (the next caveat) names the paths NCCL took, which may be them.
fn fabrics_tail(launched: &[&Manifest]) -> String {
    let unmeasured = unmeasured_fabrics(launched);
    let (own, rest): (Vec<&str>, Vec<&str>) = unmeasured.iter().partition(|f| matches!(**f, "NVLink" | "InfiniBand"));
    if !nccl_ran(launched) {
        return format!(" {} were not measured.", unmeasured.join(", "));
    }
    let rest = if rest.is_empty() { String::new() } else { format!(" {} were not measured.", rest.join(", ")) };
    format!("{rest} {} have no workload of their own: NCCL's log below names the paths its runs took.", own.join(" and "))
}

/// Whether an NCCL run ended ok.
fn nccl_ran(launched: &[&Manifest]) -> bool {
    launched.iter().any(|m| m.status() == Status::Ok && m.plan.requires.nccl)
}

/// The fabrics between devices no run measured: NCCL unless an NCCL run succeeded, PCIe
/// between host and GPU unless a host-device copy sweep did; NVLink and InfiniBand always
/// (parlab has no workload on them yet).
fn unmeasured_fabrics(launched: &[&Manifest]) -> Vec<&'static str> {
    let ok = |pred: &dyn Fn(&Manifest) -> bool| launched.iter().any(|m| m.status() == Status::Ok && pred(m));
    let copies = |m: &Manifest| match &m.plan.workload {
        Workload::Collectives(c) => c.ops.iter().any(|op| matches!(op, Op::HostToDevice | Op::DeviceToHost)),
        _ => false,
    };
    let mut out = Vec::new();
    if !nccl_ran(launched) {
        out.push("NCCL");
    }
    out.extend(["NVLink", "InfiniBand"]);
    if !ok(&copies) {
        out.push("PCIe between host and GPU");
    }
    out
}

fn exactness(list: &[Manifest], facts: &Facts) -> Option<String> {
    let models: BTreeSet<&str> = facts.decode.iter().map(|r| r.model.as_str()).filter(|m| !m.is_empty()).collect();
    let dtypes: BTreeSet<&str> = facts.decode.iter().filter_map(|r| r.dtype).map(Dtype::name).collect();
    let mut modelled: BTreeSet<String> = BTreeSet::new();
    for m in list.iter().filter(|m| m.kind == Kind::Model) {
        if let Workload::Model { models: names, .. } = &m.plan.workload {
            modelled.extend(names.iter().filter(|n| !models.contains(n.as_str())).cloned());
        }
    }
    let not_dtypes: Vec<&str> =
        [Dtype::Float32, Dtype::Float16, Dtype::Bfloat16].iter().map(|d| d.name()).filter(|d| !dtypes.contains(d)).collect();
    if models.is_empty() {
        return Some(
            "No decode run was measured: exactness of a split (tokens equal, logit differences) is not shown for any model.".into(),
        );
    }
    let changed = |float32: bool| -> Vec<String> {
        facts
            .decode
            .iter()
            .filter(|r| r.tokens_equal == Some(false) && (r.dtype.unwrap_or(Dtype::Float32) == Dtype::Float32) == float32)
            .map(|r| format!("{} world {} ({})", r.strategy.name(), r.world, r.run))
            .collect()
    };
    let (layouts, precision) = (changed(true), changed(false));
    let mut s = String::new();
    if !layouts.is_empty() {
        s.push_str(&format!(
            "{} decode layouts changed the answer (tokens differ from the unsplit reference): {}. ",
            layouts.len(),
            layouts.join(", ")
        ));
    }
    if !precision.is_empty() {
        s.push_str(&format!(
            "{} half-precision runs left the float32 reference's tokens: {} (the precision audit tells rounding from layout, against each run's float32 twin). ",
            precision.len(),
            precision.join(", ")
        ));
    }
    s += &format!(
        "Exactness was checked for {} in {} with greedy decoding only; the claim is about these prompts and this precision.",
        models.iter().cloned().collect::<Vec<_>>().join(", "),
        dtypes.iter().cloned().collect::<Vec<_>>().join(", ")
    );
    if !not_dtypes.is_empty() {
        s.push_str(&format!(" Not run: {}.", not_dtypes.join(", ")));
    }
    if !modelled.is_empty() {
        s.push_str(&format!(" Modelled only, never run: {}.", modelled.into_iter().collect::<Vec<_>>().join(", ")));
    }
    Some(s)
}

fn fit_errors(facts: &Facts) -> Option<String> {
    let (f, worst) = facts
        .fits
        .iter()
        .flat_map(|f| f.fit.heldout.iter().map(move |h| (f, h)))
        .filter(|(_, h)| h.error.is_finite())
        .max_by(|a, b| a.1.error.abs().total_cmp(&b.1.error.abs()))?;
    (worst.error.abs() > crate::findings::TOLERANCE).then(|| {
        format!(
            "The α-β model is validated only where it was fitted: at held-out sizes its worst error was {} ({} over {} ranks on {}, {}).",
            super::fmt::percent(worst.error, true),
            f.fit.op.name(),
            f.fit.world,
            f.link,
            crate::units::format_bytes(worst.size_bytes as f64)
        )
    })
}

fn noise(facts: &Facts) -> Option<String> {
    let reps: BTreeSet<u32> = facts.decode.iter().map(|r| r.repetitions).collect();
    let (lo, hi) = (reps.first()?, reps.last()?);
    let span = if lo == hi { lo.to_string() } else { format!("{lo} to {hi}") };
    Some(format!("Noise: decode figures rest on {span} repetitions per layout on a machine that may run other work; rows whose min – max ranges overlap are not separated by these measurements."))
}

fn failed(list: &[Manifest]) -> Option<String> {
    let failed: Vec<&Manifest> = list.iter().filter(|m| m.status() == Status::Failed).collect();
    (!failed.is_empty()).then(|| {
        let names: BTreeSet<&str> = failed.iter().map(|m| m.experiment.as_str()).collect();
        format!(
            "{} failed ({}); their figures are missing from MEASURED and their reasons are listed under Failed runs.",
            crate::report::fmt::plural(failed.len(), "run", "runs"),
            names.into_iter().collect::<Vec<_>>().join(", ")
        )
    })
}

fn not_run(list: &[Manifest]) -> Option<String> {
    // Keyed by the register's wording (its order), with whether any requirement was declared.
    let mut by: BTreeMap<String, (usize, bool)> = BTreeMap::new();
    for m in list.iter().filter(|m| m.status() == Status::NotRun) {
        let declared = !super::status::requirements(&m.plan.requires).is_empty();
        by.entry(super::status::requires_text(&m.plan.requires)).or_insert((0, declared)).0 += 1;
    }
    if by.is_empty() {
        return None;
    }
    let parts: Vec<String> = by
        .iter()
        .map(|(r, &(n, declared))| if declared { format!("{n} needing {r}") } else { format!("{n} not implemented or otherwise skipped") })
        .collect();
    Some(format!("Not measured at all: {} (NOT_RUN, each with the probe that decided it).", parts.join("; ")))
}

fn other_caveats(launched: &[&Manifest]) -> Vec<String> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for m in launched {
        for c in m.caveats.iter().filter(|c| !c.has_own_section()) {
            *counts.entry(c.to_string()).or_default() += 1;
        }
    }
    counts.into_iter().map(|(c, n)| format!("{c} ({n} runs).")).collect()
}

/// How the two collective times differ, where the runs measured both (issue 15's findings).
fn collective_timing(facts: &Facts) -> Option<String> {
    let both: Vec<_> = facts.collectives.iter().filter(|r| r.op_time.is_some() && r.skew.is_some()).collect();
    if both.is_empty() {
        return None;
    }
    let mut text = "Collectives carry two times. The slowest rank per iteration (a barrier before every call; what a decode step \
        pays) includes the wait for the last rank to leave the barrier; the op time (blocks of back-to-back calls after one \
        barrier, block / calls per rank, averaged over ranks: nccl-tests' convention) divides that wait by the block length, \
        and α and β are fitted on it."
        .to_string();
    let negative: Vec<_> = both.iter().filter(|r| r.skew.is_some_and(|s| s < 0.0)).collect();
    if let Some(smallest) = negative.iter().map(|r| r.size).min() {
        text.push_str(&format!(
            " At {} of {} op sizes (the smallest {}) the slowest rank per iteration is below the op time, so their \
             difference (skew) is negative. Small sizes differ by noise either way; but before each timed call the receive buffer is written with NaN (so the check \
             catches a call that writes nothing), which brings it into the calling core's cache, and from 64 KiB up a \
             call into a freshly written buffer is faster than one into a buffer last written by the previous call \
             (`make bench` measures osu_allreduce's method with and without that write: 0.83× at 64 KiB and 0.90× at \
             1 MiB over shared memory on a 2-core AMD EPYC). The op time, whose buffer is written once per block, \
             is the figure to compare with nccl-tests or OSU.",
            negative.len(),
            both.len(),
            super::fmt::bytes(smallest)
        ));
    }
    Some(text)
}

/// How GPU ranks' tensors cross between them, for the links the GPU runs used: NCCL keeps them
/// on the GPUs, MPI stages them through host memory.
fn crossing<'l>(links: impl Iterator<Item = &'l crate::spec::link::Link>) -> &'static str {
    let (nccl, mpi): (Vec<_>, Vec<_>) = links.partition(|l| l.nccl().is_some());
    match (nccl.is_empty(), mpi.is_empty()) {
        (true, _) => "tensors cross between ranks through host memory over MPI (copied off and back onto the GPU)",
        (false, true) => "tensors cross between ranks over NCCL, on the GPUs",
        (false, false) => {
            "tensors cross between ranks over NCCL on the GPUs on an NCCL link, else through host memory over MPI (copied off and back onto the GPU)"
        }
    }
}

/// Which decode runs computed on a GPU, where ranks shared one, and each step against its two
/// floors: the bytes it streams over the measured device-read bandwidth, and the measured
/// floor of one kernel launch and synchronisation (the device-read fit's α).
fn gpus(launched: &[&Manifest], list: &[Manifest]) -> Option<String> {
    let bandwidth = crate::costmodel::predict::gpu_read_bandwidth(list).map(|(bw, _)| bw);
    let launch_floor = crate::costmodel::predict::device_fits(list).get(&Op::DeviceRead).map(|(fit, _)| fit.alpha_per_step_s);
    let counted = counted_kernels(launched);
    let runs: Vec<String> = launched
        .iter()
        .filter_map(|m| {
            let d = m.summary()?.decode()?;
            let gpu = d.gpu.as_ref()?;
            let step = d.step_s.median;
            let bound = bandwidth.map_or(String::new(), |bw| {
                let b = d.streamed_bytes as f64 / bw;
                format!("; bandwidth bound {} ({:.0}× below the step)", crate::units::format_seconds(b), step / b)
            });
            let floor = launch_floor
                .filter(|a| *a > 0.0)
                .map_or(String::new(), |a| format!("; the step is {:.0} launch floors of {}", step / a, crate::units::format_seconds(a)));
            let captured = match d.graph_nodes {
                Some(n) => captured_kernels(n, launch_floor),
                None if m.layout.world == 1 && d.sequences == 1 => {
                    counted.get(&model_and_dtype(m)).map_or(String::new(), |(n, run)| eager_floor(*n, run, step, launch_floor))
                }
                None => String::new(),
            };
            Some(format!("{} ({gpu}): step {}{bound}{floor}{captured}", m.plan.label(), crate::units::format_seconds(step)))
        })
        .collect();
    if runs.is_empty() {
        return None;
    }
    let on_gpus = launched.iter().filter(|m| m.summary().and_then(|s| s.decode()).is_some_and(|d| d.gpu.is_some()));
    let crossing = crossing(on_gpus.map(|m| &m.plan.link));
    Some(format!(
        "Decode on GPUs: {}. libtorch computes every step there (no parlab row kernel), one kernel per operation; the clock is \
         read after the device is synchronised; {crossing}. One sequence at a time a GPU step is bound by kernel launches, not by the bytes it streams{}.",
        runs.join("; "),
        if launched.iter().any(|m| m.plan.step == crate::spec::schema::StepMode::Graph) {
            "; a `step=graph` run launches its step's kernels from one captured CUDA graph per round instead"
        } else {
            ""
        }
    ))
}

/// A decode run's model and dtype, as the register names them.
fn model_and_dtype(m: &Manifest) -> (String, String) {
    let dtype = crate::model::source::dtype(&m.plan).name();
    (m.plan.model.as_ref().map(|s| s.name.clone()).unwrap_or_default(), dtype.to_string())
}

/// The kernels counted in the captured step of each model and dtype, with the run that counted them.
fn counted_kernels(launched: &[&Manifest]) -> BTreeMap<(String, String), (crate::cuda_graph::GraphNodes, String)> {
    launched
        .iter()
        .filter_map(|m| Some((model_and_dtype(m), (m.summary()?.decode()?.graph_nodes?, m.run_id.short().to_string()))))
        .collect()
}

/// An eager one-rank step against the launch-bound floor: the kernels counted in the captured
/// step of its model and dtype (run `run`), each launched at the measured floor `alpha`. The
/// captured step is the fixed-shape one (the whole cache attended, masked; the new key written
/// by index), so its count stands for the eager step's launches, not equals them.
fn eager_floor(n: crate::cuda_graph::GraphNodes, run: &str, step: f64, alpha: Option<f64>) -> String {
    let Some(a) = alpha.filter(|a| *a > 0.0) else {
        return format!("; the captured fixed-shape step of this model and dtype (run {run}) holds {} kernels", n.kernels);
    };
    let floor = n.kernels as f64 * a;
    format!(
        "; the captured fixed-shape step of this model and dtype (run {run}) holds {} kernels: launched one by one at that floor, {} (the step is {:.1}× that)",
        n.kernels,
        crate::units::format_seconds(floor),
        step / floor
    )
}

/// What a captured step holds, counted in its graph, and what launching its kernels one by one
/// at the measured launch floor `alpha` would cost.
fn captured_kernels(n: crate::cuda_graph::GraphNodes, alpha: Option<f64>) -> String {
    let eager = alpha.filter(|a| *a > 0.0).map_or(String::new(), |a| {
        format!(", {} were they launched one by one at that floor", crate::units::format_seconds(n.kernels as f64 * a))
    });
    format!("; its captured graph holds {} kernels ({} nodes){eager}", n.kernels, n.all)
}

/// Which matvec kernel the decode runs used, on which CPU features (`model::matvec`).
fn kernels(launched: &[&Manifest]) -> Option<String> {
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for d in launched.iter().filter_map(|m| m.summary()?.decode()) {
        if let Some(k) = &d.matvec_kernel {
            let features = if d.cpu_features.is_empty() { "none reported".into() } else { d.cpu_features.join(", ") };
            seen.insert(format!("{} (CPU features {features})", k.name()));
        }
    }
    if seen.is_empty() {
        return None;
    }
    Some(format!(
        "Decode steps multiply their single row with parlab's matvec kernel {}; on a CPU without these features another kernel \
         runs (PARLAB_MATVEC_KERNEL forces one), and the step's distance to the memory bound can differ.",
        seen.into_iter().collect::<Vec<_>>().join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda_graph::GraphNodes;

    #[test]
    fn a_captured_step_states_its_kernels_and_their_eager_launch_cost() {
        let nodes = GraphNodes { kernels: 200, all: 203 };
        let with_floor = captured_kernels(nodes, Some(5e-6));
        assert!(with_floor.contains("holds 200 kernels (203 nodes)"), "{with_floor}");
        assert!(with_floor.contains(&format!("{} were they launched one by one", crate::units::format_seconds(1e-3))), "{with_floor}");
        let without = captured_kernels(nodes, None);
        assert!(without.ends_with("(203 nodes)"), "no launch floor measured, no cost stated: {without}");
        // The eager step of the same model and dtype, against those kernels launched one by one.
        let eager = eager_floor(nodes, "abc", 3e-3, Some(5e-6));
        assert!(
            eager.contains("fixed-shape step of this model and dtype (run abc) holds 200 kernels")
                && eager.contains("(the step is 3.0× that)"),
            "{eager}"
        );
        assert!(!eager_floor(nodes, "abc", 3e-3, None).contains("floor"));
    }

    #[test]
    fn gpu_runs_are_not_described_as_cpu_processes_over_loopback() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/manifests");
        let (list, _) = crate::manifest::read_all(&dir);
        let cpu = list.iter().find(|m| m.layout.world > 1 && m.status() == Status::Ok && m.kind.launches_ranks()).unwrap().clone();
        let cpu_only = caveats_of(std::slice::from_ref(&cpu));
        assert!(cpu_only.contains("No device was split. The 1 multi-rank runs"), "{cpu_only}");
        assert!(cpu_only.contains(": loopback, not an interconnect.") && cpu_only.contains("NCCL, NVLink, InfiniBand"), "{cpu_only}");
        let mut gpu = cpu.clone();
        (gpu.plan.device, gpu.plan.link, gpu.plan.requires.nccl) = (crate::spec::Device::Cuda, Link::from_name("nccl"), true);
        let both = caveats_of(&[cpu, gpu]);
        assert!(both.contains("No device was split. The 1 multi-rank runs"), "the GPU run is not counted: {both}");
        assert!(!both.contains("loopback"), "{both}");
        assert!(both.contains("NVLink and InfiniBand have no workload of their own") && !both.contains("NCCL, NVLink"), "{both}");
    }

    fn caveats_of(list: &[Manifest]) -> String {
        let launched: Vec<&Manifest> = list.iter().collect();
        [shared_memory(&launched), links(&launched)].into_iter().flatten().collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn gpu_ranks_tensors_cross_as_their_links_carry_them() {
        use crate::spec::link::Link;
        let nccl = Link::from_name("nccl");
        assert!(crossing([Link::MpiShm].iter()).contains("through host memory over MPI"));
        assert_eq!(crossing([nccl.clone()].iter()), "tensors cross between ranks over NCCL, on the GPUs");
        let both = crossing([nccl, Link::MpiShm].iter());
        assert!(both.contains("over NCCL on the GPUs on an NCCL link, else through host memory"), "{both}");
    }
}
