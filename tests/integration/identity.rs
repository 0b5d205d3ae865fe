//! The identity rule: layouts change run identities, never answer identities;
//! how a spec is written changes neither.

use parlab::spec::{load_suite, RunPlan};
use std::collections::BTreeSet;
use std::path::PathBuf;

fn suite(paths: &[&str]) -> Vec<RunPlan> {
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    let paths: Vec<PathBuf> = paths.iter().map(PathBuf::from).collect();
    load_suite(&paths).unwrap_or_else(|p| panic!("{p}"))
}

fn spec(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(format!("{name}.yaml"));
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn different_layouts_never_share_a_run_identity() {
    let runs = suite(&["experiments", "tests/specs/good/matrix.yaml"]);
    let mut seen = std::collections::BTreeMap::new();
    for r in &runs {
        if let Some(other) = seen.insert(r.run_id.clone(), r.label()) {
            panic!("{} and {} share run identity {}", other, r.label(), r.run_id);
        }
    }
    // Runs of one experiment differ in layout, link, threads, workload (the routing skew) or
    // how a GPU step is issued.
    let points: BTreeSet<String> = runs
        .iter()
        .map(|r| parlab::identity::canonical_json(&(&r.layout, &r.link, &r.experiment, r.threads_per_rank, &r.workload, r.step)))
        .collect();
    assert_eq!(points.len(), runs.len());
}

#[test]
fn the_same_experiment_written_two_ways_has_the_same_identities() {
    let a = suite(&["tests/specs/good/reordered-a.yaml"]);
    let b = suite(&["tests/specs/good/reordered-b.yaml"]);
    assert_eq!(a.len(), 1);
    assert_eq!(b.len(), 1);
    assert_eq!(a[0].run_id, b[0].run_id);
    assert_eq!(a[0].answer_id, b[0].answer_id);
    assert_ne!(a[0].spec_sha256, b[0].spec_sha256, "the files do differ");
}

#[test]
fn layouts_of_one_model_and_workload_share_the_answer_identity() {
    let runs = suite(&["tests/specs/good/matrix.yaml"]);
    assert_eq!(runs.len(), 5);
    let answers: BTreeSet<&str> = runs.iter().map(|r| r.answer_id.as_str()).collect();
    assert_eq!(answers.len(), 1, "tensor and pipeline layouts must share one answer identity");
}

#[test]
fn what_each_rank_holds_is_part_of_the_identity() {
    let dir = tempfile::tempdir().unwrap();
    let base = "kind: decode\nmodel: gpt2\nstrategy: tensor\nworld: 2\nnew_tokens: 4\n";
    let split = spec(&dir, "split", &format!("name: split\n{base}head: split\n"));
    let replicated = spec(&dir, "replicated", &format!("name: replicated\n{base}head: replicated\n"));
    let (s, r) = (&suite(&[&split])[0], &suite(&[&replicated])[0]);
    assert_ne!(s.layout.ranks, r.layout.ranks, "head placement changes what rank 0 holds");
    assert_ne!(s.run_id, r.run_id);
    assert_eq!(s.answer_id, r.answer_id);
}

#[test]
fn launches_change_neither_the_run_nor_the_answer_identity() {
    let dir = tempfile::tempdir().unwrap();
    let base = "kind: collectives\nworld: 2\n";
    let one = suite(&[&spec(&dir, "one", &format!("name: one\n{base}"))])[0].clone();
    let five = suite(&[&spec(&dir, "five", &format!("name: five\n{base}launches: 5\n"))])[0].clone();
    assert_eq!((one.launches, five.launches), (1, 5));
    assert_eq!((&one.run_id, &one.answer_id), (&five.run_id, &five.answer_id), "how many times, not what, is measured");
    let json = serde_json::to_string(&one).unwrap();
    assert!(!json.contains("launches"), "a plan of one launch is written as before: {json}");
    let back: RunPlan = serde_json::from_str(&serde_json::to_string(&five).unwrap()).unwrap();
    assert_eq!(back.launches, 5);
}

#[test]
fn link_threads_and_repetitions_change_the_run_but_not_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let variants = ["world: 2\n", "world: 2\nlink: mpi-tcp\n", "world: 2\nthreads: 3\n", "world: 2\nrepetitions: 7\n"];
    let runs: Vec<RunPlan> = variants
        .iter()
        .enumerate()
        .map(|(i, v)| suite(&[&spec(&dir, &format!("v{i}"), &format!("name: v{i}\nkind: collectives\n{v}"))])[0].clone())
        .collect();
    let run_ids: BTreeSet<&str> = runs.iter().map(|r| r.run_id.as_str()).collect();
    let answer_ids: BTreeSet<&str> = runs.iter().map(|r| r.answer_id.as_str()).collect();
    assert_eq!(run_ids.len(), variants.len());
    assert_eq!(answer_ids.len(), 1);
}

#[test]
fn workload_model_and_weights_change_both_identities() {
    let dir = tempfile::tempdir().unwrap();
    let base = "kind: decode\nmodel: gpt2\nstrategy: data\n";
    let variants =
        ["new_tokens: 4\n", "new_tokens: 5\n", "new_tokens: 4\nprompt: {length: 8, seed: 2}\n", "new_tokens: 4\nweights_seed: 9\n"];
    let runs: Vec<RunPlan> = variants
        .iter()
        .enumerate()
        .map(|(i, v)| suite(&[&spec(&dir, &format!("w{i}"), &format!("name: w{i}\n{base}{v}"))])[0].clone())
        .collect();
    let answer_ids: BTreeSet<&str> = runs.iter().map(|r| r.answer_id.as_str()).collect();
    assert_eq!(answer_ids.len(), variants.len(), "each workload or weights change is a new answer");
}

#[test]
fn the_experiment_name_is_not_part_of_the_identity() {
    let dir = tempfile::tempdir().unwrap();
    let a = spec(&dir, "a", "name: first\nkind: membw\n");
    let b = spec(&dir, "b", "name: second\nkind: membw\n");
    assert_eq!(suite(&[&a])[0].run_id, suite(&[&b])[0].run_id);
}

#[test]
fn exclude_rules_leave_out_every_listed_value_and_only_where_all_their_axes_match() {
    let dir = tempfile::tempdir().unwrap();
    let base = "kind: decode\nmodel: gpt2\nstrategy: [tensor, pipeline]\nworld: [1, 2, 4]\nlink: [mpi-shm, mpi-tcp]\nhead: split\nprompt: {length: 4, seed: 1}\nnew_tokens: 3\n";
    let layouts = |rules: &str| -> Vec<(String, u32, String)> {
        let path = spec(&dir, "ex", &format!("name: ex\n{base}exclude:\n{rules}"));
        suite(&[&path]).iter().map(|r| (r.layout.strategy.name().to_string(), r.layout.world, r.link.name().to_string())).collect()
    };
    let all = suite(&[&spec(&dir, "all", &format!("name: all\n{base}"))]);
    assert_eq!(all.len(), 2 * 3 * 2);
    // A rule naming a value off its axis could never match: refused, not silently kept.
    let off = spec(&dir, "off", &format!("name: off\n{base}exclude:\n  - {{world: 8}}\n"));
    let problems = parlab::spec::load_suite(&[PathBuf::from(&off)]).unwrap_err().to_string();
    assert!(problems.contains("exclude[0].world: `8` is not among this spec's world values (1, 2, 4)"), "{problems}");
    let listed = layouts("  - {world: [1, 4], link: mpi-tcp}\n");
    assert_eq!(listed.len(), 12 - 2 * 2, "world 1 and world 4 over tcp, both strategies");
    assert!(!listed.iter().any(|(_, w, l)| *w != 2 && l == "mpi-tcp"), "{listed:?}");
    assert!(listed.iter().any(|(_, w, l)| *w == 1 && l == "mpi-shm"), "a rule needs every axis to match: {listed:?}");
    let two = layouts("  - {strategy: pipeline, world: 1}\n  - {link: mpi-shm, strategy: tensor}\n");
    assert_eq!(two.len(), 12 - 2 - 3, "two rules each leave out their own points");
}

#[test]
fn an_exclude_rule_matches_a_routing_skew_however_the_number_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let base = "kind: decode\nmodel: gpt2-moe\nstrategy: expert\nworld: [1, 2]\nrouting_skew: [0, 1.0]\nprompt: {length: 4, seed: 1}\n";
    for written in ["1", "1.0"] {
        let path = spec(&dir, "skew", &format!("name: skew\n{base}exclude:\n  - {{world: 1, routing_skew: {written}}}\n"));
        assert_eq!(suite(&[&path]).len(), 3, "`routing_skew: {written}` leaves out world 1's skewed point");
    }
}

#[test]
fn points_an_axis_leaves_unchanged_are_planned_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = spec(
        &dir,
        "dup",
        "name: dup\nkind: decode\nmodel: gpt2\nstrategy: context\nworld: 2\nhead: [split, replicated]\n\
         decode_strategy: [rank0, tensor]\nprompt: {length: 16, seed: 1}\n",
    );
    let runs = suite(&[&path]);
    // rank0 places no head, so its two head values are one run; tensor's are two.
    assert_eq!(runs.len(), 3, "{:?}", runs.iter().map(|r| r.label()).collect::<Vec<_>>());
    let ids: BTreeSet<&str> = runs.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(runs.iter().map(|r| r.index).collect::<Vec<_>>(), vec![0, 1, 2]);
    let heads: Vec<_> = runs.iter().map(|r| r.layout.decode.as_ref().map(|d| d.head.name())).collect();
    assert_eq!(heads, vec![None, Some("split"), Some("replicated")]);
}

#[test]
fn only_a_tensor_split_over_several_ranks_places_a_head() {
    let dir = tempfile::tempdir().unwrap();
    let path = spec(
        &dir,
        "heads",
        "name: heads\nkind: decode\nmodel: gpt2\nstrategy: [tensor, pipeline, data]\nworld: [1, 2]\n\
         head: [split, replicated]\nprompt: {length: 4, seed: 1}\nnew_tokens: 3\n",
    );
    let runs = suite(&[&path]);
    let planned: Vec<(String, u32, Option<&str>)> =
        runs.iter().map(|r| (r.layout.strategy.name().to_string(), r.layout.world, r.layout.head.map(|h| h.name()))).collect();
    let want = |s: &str, w: u32, h: Option<&'static str>| (s.to_string(), w, h);
    assert_eq!(
        planned,
        vec![
            want("tensor", 1, None),
            want("tensor", 2, Some("split")),
            want("tensor", 2, Some("replicated")),
            want("pipeline", 1, None),
            want("pipeline", 2, None),
            want("data", 1, None),
            want("data", 2, None),
        ],
        "a head that a split ignores must not make two runs of one computation"
    );
}

#[test]
fn a_collectives_op_list_is_one_run_whatever_its_order_and_repeats() {
    let dir = tempfile::tempdir().unwrap();
    let base = "kind: collectives\nworld: 2\nsizes: [4096]\n";
    let a = spec(&dir, "a", &format!("name: a\n{base}ops: [all-gather, all-reduce]\n"));
    let b = spec(&dir, "b", &format!("name: b\n{base}ops: [all-reduce, all-gather, all-reduce]\n"));
    let (a, b) = (suite(&[&a]), suite(&[&b]));
    assert_eq!((a.len(), b.len()), (1, 1));
    assert_eq!(a[0].run_id, b[0].run_id);
    assert_eq!(a[0].workload, b[0].workload);
}

#[test]
fn operations_on_a_ranks_gpu_over_several_ranks_need_a_gpu_for_each() {
    let dir = tempfile::tempdir().unwrap();
    let text = "name: g\nkind: collectives\nworld: [1, 2]\nops: [device-read]\nsizes: [1MiB]\n";
    let plans = suite(&[&spec(&dir, "g", text)]);
    let gpus: Vec<(u32, Option<u32>, bool)> = plans.iter().map(|p| (p.layout.world, p.requires.gpus, p.requires.cuda)).collect();
    // Two ranks on one GPU would each read at about half its bandwidth, recorded as the GPU's.
    assert_eq!(gpus, vec![(1, None, true), (2, Some(2), true)]);
}

#[test]
fn the_device_changes_the_run_identity_and_never_the_answer_identity() {
    let dir = tempfile::tempdir().unwrap();
    let base = "kind: decode\nmodel: gpt2\nstrategy: tensor\nworld: 2\nnew_tokens: 4\n";
    let unnamed = suite(&[&spec(&dir, "unnamed", &format!("name: d\n{base}"))]);
    let cpu = suite(&[&spec(&dir, "cpu", &format!("name: d\n{base}device: cpu\n"))]);
    let cuda = suite(&[&spec(&dir, "cuda", &format!("name: d\n{base}device: cuda\n"))]);
    assert_eq!(unnamed[0].run_id, cpu[0].run_id, "device: cpu leaves identities made before devices as they were");
    assert_ne!(cpu[0].run_id, cuda[0].run_id, "a run on a GPU is not the CPU run");
    assert_eq!(cpu[0].answer_id, cuda[0].answer_id, "moving to a GPU must not change what the answer is compared with");
    assert!(cuda[0].requires.cuda && !cpu[0].requires.cuda);
    let half = suite(&[&spec(&dir, "half", &format!("name: d\n{base}device: cuda\ndtype: bfloat16\n"))]);
    assert_ne!(half[0].answer_id, cuda[0].answer_id, "bfloat16 is a different computation");
}

#[test]
fn a_folder_model_is_named_by_its_path_from_the_spec_and_keeps_its_identities() {
    // A decode of a folder beside its spec, copied to two places: one name for the register
    // (`./tiny`, not either absolute path) and the same identities (the config's digest).
    let config = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/gpt2/config.json")).unwrap();
    let text = "name: folder-decode\nkind: decode\nmodel: ./tiny\nstrategy: tensor\nworld: 2\nprompt: {length: 4}\nnew_tokens: 4\n";
    let plans = |dir: &tempfile::TempDir| {
        std::fs::create_dir_all(dir.path().join("tiny")).unwrap();
        std::fs::write(dir.path().join("tiny/config.json"), &config).unwrap();
        suite(&[&spec(dir, "folder-decode", text)])
    };
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (plans(&one), plans(&two));
    assert_eq!(a.len(), 1);
    let names = |runs: &[RunPlan]| runs.iter().map(|r| r.model.as_ref().unwrap().name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&a), vec!["./tiny".to_string()]);
    assert_eq!(names(&a), names(&b));
    assert_eq!(a[0].model.as_ref().unwrap().dir, one.path().join("tiny"), "the folder read is the spec's neighbour");
    assert_eq!((&a[0].run_id, &a[0].answer_id), (&b[0].run_id, &b[0].answer_id));
}

#[test]
fn a_captured_step_changes_the_run_identity_only_and_is_refused_where_it_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let base = "kind: decode\nmodel: gpt2\nstrategy: data\nworld: 1\nnew_tokens: 4\ndevice: cuda\n";
    let unnamed = suite(&[&spec(&dir, "unnamed", &format!("name: d\n{base}"))]);
    let eager = suite(&[&spec(&dir, "eager", &format!("name: d\n{base}step: eager\n"))]);
    let graph = suite(&[&spec(&dir, "graph", &format!("name: d\n{base}step: graph\n"))]);
    assert_eq!(unnamed[0].run_id, eager[0].run_id, "step: eager leaves identities made before graphs as they were");
    assert_ne!(eager[0].run_id, graph[0].run_id, "a replayed graph is not the eager step");
    assert_eq!(eager[0].answer_id, graph[0].answer_id, "capturing the step must not change what the answer is compared with");
    assert_eq!(graph[0].step, parlab::spec::schema::StepMode::Graph);
    assert!(graph[0].label().ends_with("cuda step=graph"), "{}", graph[0].label());
    let refused = |name: &str, text: &str| {
        std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
        let problems = load_suite(&[PathBuf::from(spec(&dir, name, text))]).expect_err(name).to_string();
        assert!(problems.contains("step") && problems.contains("`step: graph`"), "{name}: {problems}");
        problems
    };
    let on_cpu = refused("on-cpu", "name: c\nkind: decode\nmodel: gpt2\nstrategy: data\nworld: 1\nnew_tokens: 4\nstep: graph\n");
    assert!(on_cpu.contains("needs `device: cuda`"), "{on_cpu}");
    let split =
        refused("split", "name: s\nkind: decode\nmodel: gpt2\nstrategy: tensor\nworld: 2\nnew_tokens: 4\ndevice: cuda\nstep: graph\n");
    assert!(split.contains("tensor over world 2 stays eager"), "{split}");
    let batch = refused("batch", &format!("name: b\n{base}sequences: 2\nstep: graph\n"));
    assert!(batch.contains("sequences must be 1"), "{batch}");
    // Both ways in one experiment: the eager run and the graph run, the split's graph excluded.
    let both = suite(&[&spec(
        &dir,
        "both",
        "name: b\nkind: decode\nmodel: gpt2\nstrategy: [data, tensor]\nworld: [1, 2]\nnew_tokens: 4\ndevice: cuda\nstep: [eager, graph]\n\
         exclude:\n  - {strategy: data, world: 2}\n  - {strategy: tensor, world: 1}\n  - {strategy: tensor, step: graph}\n",
    )]);
    let steps: Vec<_> = both.iter().map(|r| (r.layout.strategy.name(), r.step.name())).collect();
    assert_eq!(steps, [("data", "eager"), ("data", "graph"), ("tensor", "eager")]);
}

#[test]
fn a_membw_buffer_list_is_an_axis_whose_points_keep_the_identity_of_one_buffer() {
    use parlab::spec::Workload;
    let dir = tempfile::tempdir().unwrap();
    let base = "name: bw\nkind: membw\nworld: [1, 2]\nthreads: 1\n";
    let swept = spec(&dir, "swept", &format!("{base}buffer: [16MiB, 33554432]\nexclude:\n  - {{world: 2, buffer: 16MiB}}\n"));
    let runs = suite(&[&swept]);
    let points: Vec<(u32, u64)> = runs
        .iter()
        .map(|r| match &r.workload {
            Workload::Membw(m) => (r.layout.world, m.buffer_bytes),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(points, vec![(1, 16 << 20), (1, 32 << 20), (2, 32 << 20)], "`16MiB` in a rule matches 16777216 bytes");
    let ids: BTreeSet<&str> = runs.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(ids.len(), 3, "each buffer is its own run");
    // A point of the sweep is the run a spec of that one buffer plans.
    let single = spec(&dir, "single", &format!("{base}buffer: 32MiB\n"));
    let alone = suite(&[&single]);
    assert_eq!(alone.iter().map(|r| r.run_id.clone()).collect::<Vec<_>>(), vec![runs[1].run_id.clone(), runs[2].run_id.clone()]);
    let bad = spec(&dir, "bad", &format!("{base}buffer: [16MiB, 6]\n"));
    let problems = load_suite(&[PathBuf::from(&bad)]).unwrap_err().to_string();
    assert!(problems.contains("buffer[1]") && problems.contains("not a whole number of 4-byte f32 values"), "{problems}");
}
