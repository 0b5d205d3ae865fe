//! `parlab audit`: graded verdicts per layout (BITWISE, TOKENS_EQUAL, DIVERGED at step k),
//! near-ties flagged FRAGILE, a noisy reference told apart, `--json` and exit codes.

use parlab::audit::{audit, Cause, Grade};
use parlab::manifest::answer::Answer;
use parlab::manifest::answer::StepCheck;
use parlab::manifest::Manifest;
use parlab::precision::PrecisionGrade;
use parlab::spec::schema::Strategy;
use parlab::spec::Kind;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn base() -> Vec<Manifest> {
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    crate::synth::fixtures().unwrap()
}

fn answer(m: &mut Manifest) -> &mut Answer {
    m.answer_mut().expect("a decode run with an answer")
}

fn decode_at(list: &mut [Manifest], world: u32) -> &mut Manifest {
    list.iter_mut().find(|m| m.kind == Kind::Decode && m.layout.strategy == Strategy::Tensor && m.layout.world == world).unwrap()
}

/// Gives every decode run per-step records: the reference's tokens and a margin of 0.5,
/// except `margins` (step, reference margin).
fn with_steps(list: &mut [Manifest], margins: &[(usize, f64)]) {
    let reference = answer(decode_at(list, 1)).tokens[0].clone();
    for a in list.iter_mut().filter(|m| m.kind == Kind::Decode).filter_map(|m| m.answer_mut()) {
        let own = a.tokens[0].clone();
        a.exactness.steps = reference
            .iter()
            .enumerate()
            .map(|(k, &r)| {
                let margin = margins.iter().find(|(s, _)| *s == k).map_or(0.5, |(_, m)| *m);
                StepCheck { margin, drift: Some(1e-5), reference_margin: margin, reference_token: r, token: own[k] }
            })
            .collect();
    }
}

/// Changes the world-`world` run's tokens from step `k` on.
fn diverge_from(list: &mut [Manifest], world: u32, k: usize) {
    let a = answer(decode_at(list, world));
    for t in a.tokens[0].iter_mut().skip(k) {
        *t += 1;
    }
    a.exactness.tokens_equal = false;
}

fn run_audit(list: &[Manifest]) -> (i32, Value) {
    let dir = tempfile::tempdir().unwrap();
    crate::synth::write_all(dir.path(), list).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_parlab")).args(["audit", "--json", "--manifests"]).arg(dir.path()).output().unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().unwrap(), json)
}

fn layout(doc: &Value, world: u32) -> &Value {
    doc["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["layouts"].as_array().unwrap())
        .find(|l| l["layout"].as_str().unwrap().starts_with(&format!("tensor world {world} ")))
        .unwrap()
}

#[test]
fn tokens_that_differ_from_step_5_on_are_diverged_at_step_5_and_exit_3() {
    let mut list = base();
    with_steps(&mut list, &[]);
    let (code, doc) = run_audit(&list);
    assert_eq!(code, 0, "equal tokens: {doc}");
    assert_eq!(layout(&doc, 2)["verdict"], "TOKENS_EQUAL");
    diverge_from(&mut list, 2, 5);
    let (code, doc) = run_audit(&list);
    assert_eq!(code, 3, "{doc}");
    let l = layout(&doc, 2);
    assert_eq!((l["verdict"].as_str(), l["step"].as_u64()), (Some("DIVERGED"), Some(5)), "{l}");
    let reference = u64::from(answer(decode_at(&mut list, 1)).tokens[0][5]);
    assert_eq!(l["reference_token"].as_u64(), Some(reference));
    assert_eq!(l["token"].as_u64(), Some(reference + 1));
    assert_eq!(l["reference_margin"].as_f64(), Some(0.5));
    assert_eq!(l["cause"], "real_change");
    assert_eq!(layout(&doc, 4)["verdict"], "TOKENS_EQUAL", "the other layout is unaffected");
    assert_eq!(doc["changed"], true);
}

#[test]
fn the_drift_at_the_step_a_token_changed_does_not_make_that_step_a_near_tie() {
    // A layout whose token changed at step 3 moved that step's logits by at least half the
    // margin there, and records it as the step's drift: were that the near-tie threshold's
    // drift, every divergence would be explained away.
    let mut list = base();
    with_steps(&mut list, &[(3, 0.8)]);
    diverge_from(&mut list, 2, 3);
    let a = answer(decode_at(&mut list, 2));
    a.exactness.steps[3].drift = Some(2.0);
    a.exactness.max_logit_diff = 2.0;
    let (code, doc) = run_audit(&list);
    let l = layout(&doc, 2);
    assert_eq!((code, l["cause"].as_str()), (3, Some("real_change")), "{l}");
    assert_eq!(doc["groups"][0]["fragile"], false, "no step's margin is within 2 x 1e-5: {doc}");
}

#[test]
fn a_near_tie_is_fragile_and_a_divergence_there_is_explained_not_a_change() {
    let mut list = base();
    answer(decode_at(&mut list, 4)).exactness.max_logit_diff = 1e-4;
    with_steps(&mut list, &[(3, 1e-5)]);
    let groups = audit(&list);
    let g = groups.iter().find(|g| g.layouts.iter().any(|l| l.family == parlab::spec::schema::Strategy::Tensor)).unwrap();
    assert!(g.fragile, "margin 1e-5 at step 3 is below 2 × drift 1e-4");
    assert_eq!(g.fragile_steps, vec![3]);
    assert!(!g.changed);
    diverge_from(&mut list, 2, 3);
    let (code, doc) = run_audit(&list);
    assert_eq!(code, 0, "a divergence at a near-tie is not a real change: {doc}");
    let l = layout(&doc, 2);
    assert_eq!((l["verdict"].as_str(), l["cause"].as_str()), (Some("DIVERGED"), Some("near_tie")), "{l}");
    assert_eq!(doc["groups"][0]["fragile"], true);
}

#[test]
fn a_layout_is_bitwise_only_when_no_logit_moved() {
    let mut list = base();
    answer(decode_at(&mut list, 2)).exactness.max_logit_diff = 0.0;
    let groups = audit(&list);
    let layouts: Vec<_> = groups.iter().flat_map(|g| &g.layouts).collect();
    let grade = |w: &str| layouts.iter().find(|l| l.layout.starts_with(w)).unwrap().verdict;
    assert_eq!(grade("tensor world 2 "), Grade::Bitwise);
    assert_eq!(grade("tensor world 4 "), Grade::TokensEqual);
}

#[test]
fn a_reference_that_differs_from_itself_is_reported_as_noise() {
    let mut list = base();
    diverge_from(&mut list, 1, 7);
    diverge_from(&mut list, 2, 7);
    let groups = audit(&list);
    let g = &groups[0];
    assert_eq!(g.reference_reproducible, Some(false), "{g:?}");
    let l = g.layouts.iter().find(|l| l.layout.starts_with("tensor world 2 ")).unwrap();
    assert_eq!(l.cause, Some(Cause::NoisyReference), "{l:?}");
    assert!(!g.changed);
    let text = parlab::audit::render_text(&groups);
    assert!(text.contains("reference NOT reproducible"), "{text}");
}

#[test]
fn a_rank_records_each_steps_margins_drift_and_the_references_token() {
    use parlab::manifest::answer::Exactness;
    use parlab::model::reference::Generation;
    let reference = Generation { tokens: vec![0, 2, 1], logits: vec![3.0, 1.0, 0.0, 0.0, 1.0, 1.5, 0.0, 2.0, 1.0], vocab: 3 };
    let mut e = Exactness::default();
    e.observe(&reference, 0, &[3.0, 1.25, 0.0]);
    e.observe(&reference, 1, &[0.0, 1.5, 1.25]);
    e.observe(&reference, 2, &[0.0, 2.0, 1.0]);
    assert_eq!(e.first_difference, Some(1));
    assert_eq!(e.steps.len(), 3);
    assert_eq!((e.steps[0].reference_margin, e.steps[0].margin, e.steps[0].drift), (2.0, 1.75, Some(0.25)));
    assert_eq!((e.steps[1].token, e.steps[1].reference_token, e.steps[1].drift), (1, 2, Some(0.5)), "the diverging step is still compared");
    assert_eq!(e.steps[2].drift, None, "after a changed token the logits are not comparable");
    let mut other = Exactness::default();
    other.observe(&reference, 0, &[3.0, 2.5, 0.0]);
    e.merge(&other);
    assert_eq!((e.steps[0].margin, e.steps[0].drift), (0.5, Some(1.5)), "merging keeps the smallest margin and largest drift");
}

#[test]
fn without_a_world_one_run_differing_tokens_still_change_the_answer() {
    let mut list = base();
    list.retain(|m| !(m.kind == Kind::Decode && m.layout.world == 1));
    for a in list.iter_mut().filter(|m| m.kind == Kind::Decode).filter_map(|m| m.answer_mut()) {
        (a.exactness.steps, a.exactness.first_difference) = (Vec::new(), None);
    }
    assert!(!audit(&list).iter().any(|g| g.changed), "equal tokens");
    diverge_from(&mut list, 4, 2);
    let groups = audit(&list);
    let g = groups.iter().find(|g| g.changed).expect("a change");
    let l = g.layouts.iter().find(|l| l.layout.starts_with("tensor world 4 ")).unwrap();
    assert_eq!((l.verdict, l.step, l.cause), (Grade::Diverged, Some(2), Some(Cause::RealChange)));
    assert_eq!(g.reference_reproducible, None, "no world-1 run: noise unknown");
}

/// A bfloat16 copy of the world-2 tensor run (its twin), whose tokens leave the twin's from
/// step `k` (None: never) and whose logits drift `drift` from the float32 reference; the twin's
/// margin at every step is `twin_margin`.
fn with_half_twin(k: Option<usize>, drift: f64, twin_margin: f64) -> Vec<Manifest> {
    let mut list = base();
    with_steps(&mut list, &[]);
    let twin = decode_at(&mut list, 2);
    for s in &mut answer(twin).exactness.steps {
        s.margin = twin_margin;
    }
    let mut half = twin.clone();
    if let parlab::spec::plan::Workload::Decode { dtype, .. } = &mut half.plan.workload {
        *dtype = parlab::spec::schema::Dtype::Bfloat16;
    }
    (half.run_id, half.answer_id) = (format!("{:064x}", 0xbf16).into(), format!("{:064x}", 0xbf17).into());
    let a = answer(&mut half);
    for s in &mut a.exactness.steps {
        s.drift = Some(drift);
    }
    a.exactness.max_logit_diff = drift;
    if let Some(k) = k {
        for t in a.tokens[0].iter_mut().skip(k) {
            *t += 1;
        }
    }
    list.push(half);
    list
}

#[test]
fn a_half_precision_answer_is_graded_against_its_float32_twin() {
    let rows = parlab::precision::audit(&with_half_twin(None, 0.3, 0.5));
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0];
    assert_eq!((r.grade, r.equal_steps, r.steps, r.dtype.as_str()), (PrecisionGrade::TokensEqual, Some(25), 25, "bfloat16"));
    assert_eq!(r.drift, 0.3);
    assert_eq!(r.twin.as_deref(), Some(&decode_at(&mut base(), 2).run_id[..12]));
    // Leaving the twin at step 7, where the float32 margin 0.5 is within 2 x 0.3: a near-tie.
    let r = &parlab::precision::audit(&with_half_twin(Some(7), 0.3, 0.5))[0];
    assert_eq!((r.grade, r.equal_steps, r.twin_margin), (PrecisionGrade::NearTie, Some(7), Some(0.5)));
    // The same step with a drift of 0.1: the margin was wider than bf16 could close.
    let r = &parlab::precision::audit(&with_half_twin(Some(7), 0.1, 0.5))[0];
    assert_eq!(r.grade, PrecisionGrade::Moved);
    assert!(parlab::precision::line(r).contains("tokens equal up to step 7 of 25"), "{}", parlab::precision::line(r));
    // Its model named another way, its checkpoint in another state folder: still its twin (the
    // same config and weights, as the identities hold); other weights are not.
    let mut moved = with_half_twin(None, 0.3, 0.5);
    let half = moved.iter_mut().find(|m| m.run_id.as_str() == format!("{:064x}", 0xbf16)).unwrap();
    let model = half.plan.model.as_mut().unwrap();
    model.name = format!("../models/{}", model.name);
    model.dir = PathBuf::from("/elsewhere").join(&model.dir);
    if let parlab::spec::plan::Weights::Seeded { path, .. } = &mut model.weights {
        *path = PathBuf::from("/tmp/other-state").join(&*path);
    }
    assert_eq!(parlab::precision::audit(&moved)[0].grade, PrecisionGrade::TokensEqual);
    let half = moved.iter_mut().find(|m| m.run_id.as_str() == format!("{:064x}", 0xbf16)).unwrap();
    if let parlab::spec::plan::Weights::Seeded { seed, .. } = &mut half.plan.model.as_mut().unwrap().weights {
        *seed += 1;
    }
    assert_eq!(parlab::precision::audit(&moved)[0].grade, PrecisionGrade::NoTwin, "other weights: no twin");
    // Without its twin the run is listed, not graded.
    let mut list = with_half_twin(None, 0.3, 0.5);
    list.retain(|m| !(m.layout.world == 2 && m.layout.strategy == Strategy::Tensor && m.run_id.as_str() != format!("{:064x}", 0xbf16)));
    let alone = &parlab::precision::audit(&list)[0];
    assert_eq!(alone.grade, PrecisionGrade::NoTwin);
    // Nothing compared is not "all tokens equal" (it read equal_steps 25 of 25).
    assert_eq!((alone.equal_steps, alone.twin.as_deref()), (None, None));
    let text = parlab::precision::render_text(&parlab::precision::audit(&list));
    assert!(text.starts_with("precision audit: 1 half-precision runs, 0 with a float32 twin to grade against"), "{text}");
}

#[test]
fn a_half_precision_answer_cut_short_or_moved_in_a_later_sequence_is_not_tokens_equal() {
    let half_of =
        |list: &mut Vec<Manifest>| -> usize { list.iter().position(|m| m.run_id.as_str() == format!("{:064x}", 0xbf16)).unwrap() };
    // Two tokens of the 25 asked: a prefix of the twin's, which agreed with it only for lack of tokens.
    let mut cut = with_half_twin(None, 0.3, 0.5);
    let i = half_of(&mut cut);
    answer(&mut cut[i]).tokens[0].truncate(2);
    let r = &parlab::precision::audit(&cut)[0];
    assert_eq!(r.grade, PrecisionGrade::Incomplete, "{r:?}");
    assert!(
        parlab::precision::line(r).contains("not graded: its answer holds a list of 2 tokens where the run asked for 25"),
        "{}",
        parlab::precision::line(r)
    );
    answer(&mut cut[i]).tokens.clear();
    assert_eq!(parlab::precision::audit(&cut)[0].grade, PrecisionGrade::Incomplete, "no tokens at all");
    // A second sequence that leaves the twin at step 3 over a wide margin: moved, whatever the first did.
    let mut second = with_half_twin(None, 0.1, 0.5);
    let i = half_of(&mut second);
    let mut other = answer(&mut second[i]).tokens[0].clone();
    other[3] += 1;
    answer(&mut second[i]).tokens.push(other);
    let r = &parlab::precision::audit(&second)[0];
    assert_eq!((r.grade, r.equal_steps), (PrecisionGrade::Moved, Some(3)), "{r:?}");
}

#[test]
fn a_half_precision_run_is_twinned_with_the_float32_run_of_its_own_threads() {
    let mut list = with_half_twin(None, 0.3, 0.5);
    let twin = decode_at(&mut list, 2).clone();
    // The same float32 run on other threads per rank, first in manifest order, whose tokens differ.
    let mut other = twin.clone();
    (other.run_id, other.plan.threads_per_rank) = (format!("{:064x}", 0x7).into(), twin.plan.threads_per_rank + 1);
    for t in answer(&mut other).tokens[0].iter_mut() {
        *t += 1;
    }
    list.insert(0, other);
    let rows = parlab::precision::audit(&list);
    assert_eq!(rows[0].twin.as_deref(), Some(twin.run_id.short()), "{rows:?}");
    assert_eq!(rows[0].grade, PrecisionGrade::TokensEqual);
    let threads = format!("{} thread", twin.plan.threads_per_rank);
    assert!(rows[0].layout.contains(&threads) && rows[0].layout.ends_with(" per rank"), "{}", rows[0].layout);
}

#[test]
fn the_precision_audit_is_a_finding_and_in_audits_json_without_changing_its_exit_code() {
    let finding = |list: &[Manifest]| {
        let facts = parlab::report::facts::Facts::read(list);
        parlab::findings::compute(list, &facts).into_iter().find(|f| f.id == "precision-audit").unwrap()
    };
    let f = finding(&with_half_twin(Some(7), 0.3, 0.5));
    assert_eq!(f.verdict, parlab::findings::Verdict::Holds, "{f:?}");
    assert!(f.numbers.iter().any(|n| n.name.ends_with("float32 top-2 margin at step 7") && n.value == 0.5), "{:?}", f.numbers);
    let f = finding(&with_half_twin(Some(7), 0.1, 0.5));
    assert_eq!(f.verdict, parlab::findings::Verdict::Fails, "{f:?}");
    assert_eq!(finding(&base()).inconclusive, Some(parlab::findings::Inconclusive::MissingRuns));
    let (code, doc) = run_audit(&with_half_twin(Some(7), 0.1, 0.5));
    assert_eq!(code, 0, "bf16 rounding is not a layout changing the answer: {doc}");
    assert_eq!(doc["precision"][0]["grade"], "MOVED", "{doc}");
    let half = doc["groups"].as_array().unwrap().iter().flat_map(|g| g["layouts"].as_array().unwrap()).find(|l| l["run"] == "000000000000");
    assert_eq!(half.unwrap()["cause"], "half_precision", "{doc}");
    assert_eq!(doc["precision"][0]["equal_steps"], 7);
}

#[test]
fn audits_json_lists_the_files_it_could_not_read_as_manifests() {
    let dir = tempfile::tempdir().unwrap();
    crate::synth::write_all(dir.path(), &base()).unwrap();
    std::fs::write(dir.path().join("truncated.json"), "{\"schema\": \"parlab.manifest/3\", ").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_parlab")).args(["audit", "--json", "--manifests"]).arg(dir.path()).output().unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let skipped = doc["skipped"].as_array().expect("a skipped list");
    assert_eq!(skipped.len(), 1, "{doc}");
    assert!(
        skipped[0]["path"].as_str().unwrap().ends_with("truncated.json") && !skipped[0]["reason"].as_str().unwrap().is_empty(),
        "{doc}"
    );
    assert!(run_audit(&base()).1["skipped"].as_array().unwrap().is_empty());
}

#[test]
fn a_half_precision_split_leaves_its_layout_familys_exactness_to_the_precision_audit() {
    let exactness = |list: &[Manifest]| {
        let facts = parlab::report::facts::Facts::read(list);
        parlab::findings::compute(list, &facts).into_iter().find(|f| f.id == "exactness-tensor").unwrap()
    };
    // A bfloat16 split leaving the float32 reference at a near-tie, and at a robust step: its
    // rounding, not its layout; the float32 layouts alone decide whether splitting changed the answer.
    for drift in [0.3, 0.1] {
        let f = exactness(&with_half_twin(Some(7), drift, 0.5));
        assert_eq!(f.verdict, parlab::findings::Verdict::Holds, "{f:?}");
        assert!(f.notes.iter().any(|n| n.starts_with("1 tensor run in half precision not graded here")), "{:?}", f.notes);
        assert!(!f.test.runs.contains(&"000000000000".to_string()), "{:?}", f.test.runs);
        let drift_number = f.numbers.iter().find(|n| n.name == "largest logit drift from the reference").unwrap();
        assert!(drift_number.value < drift, "the half-precision drift is not the family's: {drift_number:?}");
    }
}

/// `parlab audit` (text) over `list`: its exit code and stdout.
fn audit_text(list: &[Manifest]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    crate::synth::write_all(dir.path(), list).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_parlab")).args(["audit", "--manifests"]).arg(dir.path()).output().unwrap();
    (out.status.code().unwrap(), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn not_graded<'a>(doc: &'a Value, run: &str) -> Option<&'a Value> {
    doc["groups"].as_array().unwrap().iter().flat_map(|g| g["not_graded"].as_array().unwrap()).find(|n| n["run"] == run)
}

#[test]
fn a_layout_that_failed_is_listed_as_not_graded_and_the_exit_code_stays() {
    let mut list = base();
    let failed = decode_at(&mut list, 4);
    failed.outcome = parlab::manifest::Outcome::Failed { reason: "rank 3 timed out after 60 s".into(), launch: None };
    let short = failed.run_id.short().to_string();
    let (code, doc) = run_audit(&list);
    assert_eq!(code, 0, "a failed run is `parlab run`'s to report, not a changed answer: {doc}");
    let n = not_graded(&doc, &short).unwrap_or_else(|| panic!("{short} not listed: {doc}"));
    assert_eq!((n["status"].as_str(), n["reason"].as_str()), (Some("failed"), Some("rank 3 timed out after 60 s")), "{n}");
    assert!(n["layout"].as_str().unwrap().starts_with("tensor world 4 "), "{n}");
    let (code, text) = audit_text(&list);
    assert_eq!(code, 0);
    assert!(text.lines().any(|l| l.starts_with(&format!("  {short} tensor world 4 ")) && l.ends_with("NOT GRADED: FAILED: rank 3 timed out after 60 s")), "{text}");
    // No decode run left an answer: the answer identity is still reported, nothing graded.
    for m in list.iter_mut().filter(|m| m.kind == Kind::Decode) {
        m.outcome = parlab::manifest::Outcome::NotRun { reason: "needs torch".into() };
    }
    let (code, doc) = run_audit(&list);
    assert_eq!(code, 0, "{doc}");
    let g = doc["groups"].as_array().unwrap().iter().find(|g| !g["not_graded"].as_array().unwrap().is_empty()).expect("the group");
    assert!(g["layouts"].as_array().unwrap().is_empty(), "{g}");
    assert!(g["not_graded"].as_array().unwrap().iter().all(|n| n["status"] == "not_run" && n["reason"] == "needs torch"), "{g}");
    let (_, text) = audit_text(&list);
    assert!(text.contains("no run graded:") && !text.contains("same answer"), "{text}");
}

#[test]
fn a_half_precision_run_at_world_one_is_never_the_reference_decoded_again() {
    let mut list = base();
    with_steps(&mut list, &[]);
    let float32 = decode_at(&mut list, 1).run_id.short().to_string();
    let mut half = decode_at(&mut list, 1).clone();
    if let parlab::spec::plan::Workload::Decode { dtype, .. } = &mut half.plan.workload {
        *dtype = parlab::spec::schema::Dtype::Bfloat16;
    }
    half.plan.threads_per_rank += 8;
    half.run_id = format!("{:064x}", 0xbf1).into();
    answer(&mut half).exactness.max_logit_diff = 1.4;
    list.push(half);
    let groups = audit(&list);
    let g = groups.iter().find(|g| g.layouts.iter().any(|l| l.run == format!("{:012x}", 0))).unwrap();
    assert_eq!(g.reference_run.as_deref(), Some(float32.as_str()), "the float32 world-1 run, though the bfloat16 one has more threads");
    assert!(g.reference_self_drift.is_some_and(|d| d < 1.0), "its rounding is not the reference's noise: {:?}", g.reference_self_drift);
}

#[test]
fn a_reference_the_unsplit_run_does_not_reproduce_at_a_robust_step_exits_3_and_fails_exactness() {
    let mut list = base();
    with_steps(&mut list, &[]);
    // The world-1 run (the reference decoded again) leaves the recorded reference at step 3,
    // margin 0.5 against the others' drift of 1e-5: not reordering.
    diverge_from(&mut list, 1, 3);
    let (code, text) = audit_text(&list);
    assert_eq!(code, 3, "{text}");
    assert!(text.contains(": REFERENCE NOT REPRODUCIBLE;") && !text.contains("ANSWER CHANGED"), "{text}");
    assert!(text.contains("NOT REPRODUCIBLE: the reference decoded again left the cached reference at a robust step"), "{text}");
    // nightly names it as what it is, not as a changed answer.
    let found: Vec<_> = audit(&list).iter().filter_map(parlab::nightly::AcrossLayouts::of_group).collect();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].line().starts_with("REFERENCE NOT REPRODUCIBLE: answer ") && !found[0].line().contains("ANSWER CHANGED"),
        "{}",
        found[0].line()
    );
    assert_eq!(found[0].kind(), "reference_not_reproducible");
    let facts = parlab::report::facts::Facts::read(&list);
    let f = parlab::findings::compute(&list, &facts).into_iter().find(|f| f.id == "exactness-tensor").unwrap();
    assert_eq!(f.verdict, parlab::findings::Verdict::Fails, "{f:?}");
    assert!(f.reason.contains("the reference is NOT REPRODUCIBLE") && f.reason.contains("at step 3"), "{}", f.reason);
}
