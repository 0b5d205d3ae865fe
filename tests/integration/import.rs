//! `parlab import`: nccl-tests' and OSU's output read in with the built binary, then the
//! register rendered beside parlab's own runs, imported figures titled and labelled as such;
//! bad input exits 2 with nothing written.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/import").join(name)
}

fn parlab(args: &[&str], manifests: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_parlab")).args(args).arg("--manifests").arg(manifests).output().unwrap()
}

fn import(args: &[&str], manifests: &Path) -> Output {
    let mut all = vec!["import"];
    all.extend_from_slice(args);
    parlab(&all, manifests)
}

fn manifests_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_or_else(|_| Vec::new(), |d| d.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "json")).collect());
    v.sort();
    v
}

/// The text of the `### title` section of `markdown` up to the next `###` or `##` heading.
fn family<'a>(markdown: &'a str, title: &str) -> &'a str {
    let start = markdown.find(&format!("### {title}")).unwrap_or_else(|| panic!("no family {title}"));
    let rest = &markdown[start + 4..];
    let end = rest.find("\n### ").or_else(|| rest.find("\n## ")).unwrap_or(rest.len());
    &rest[..end]
}

#[test]
fn imported_runs_sit_beside_measured_ones_titled_and_labelled_as_imported() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    std::fs::create_dir_all(&store).unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/manifests");
    for f in manifests_in(&fixtures) {
        std::fs::copy(&f, store.join(f.file_name().unwrap())).unwrap();
    }
    let before = manifests_in(&store).len();
    let findings_of = |out: &Path| {
        let report =
            Command::new(env!("CARGO_BIN_EXE_parlab")).args(["report", "--manifests"]).arg(&store).arg("--out").arg(out).output().unwrap();
        assert_eq!(report.status.code(), Some(0), "{}", String::from_utf8_lossy(&report.stderr));
        let md = std::fs::read_to_string(out.join("evidence.md")).unwrap();
        md.lines()
            .filter(|l| l.starts_with("### HOLDS") || l.starts_with("### FAILS") || l.starts_with("### INCONCLUSIVE"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let without_imports = findings_of(&dir.path().join("reports-before"));
    let json = data("nccl_all_reduce_8gpu.json");
    for args in [
        vec!["nccl-tests", json.to_str().unwrap()],
        vec![
            "nccl-tests",
            data("nccl_all_gather_2gpu.txt").to_str().unwrap(),
            "--command",
            "mpirun -np 2 all_gather_perf -b 1K -e 64M -f 4",
        ],
        vec!["osu", data("osu_allreduce_4rank.txt").to_str().unwrap(), "--world", "4"],
    ] {
        let out = import(&args, &store);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert_eq!(manifests_in(&store).len(), before + 3);
    // Importing the same file again replaces its manifest; a --command the file contradicts is
    // not recorded, and said so (the file's own `args` are what ran).
    let again = import(&["nccl-tests", json.to_str().unwrap(), "--command", "all_reduce_perf -g 8"], &store);
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(said.contains("replaced the earlier import"), "{said}");
    let ignored = format!("warning: --command \"all_reduce_perf -g 8\" not recorded: {} holds the command it ran with (", json.display());
    assert!(said.contains(&ignored), "{said}");
    assert_eq!(manifests_in(&store).len(), before + 3);

    let out_dir = dir.path().join("reports");
    let report =
        Command::new(env!("CARGO_BIN_EXE_parlab")).args(["report", "--manifests"]).arg(&store).arg("--out").arg(&out_dir).output().unwrap();
    assert_eq!(report.status.code(), Some(0), "{}", String::from_utf8_lossy(&report.stderr));
    let md = std::fs::read_to_string(out_dir.join("evidence.md")).unwrap();
    assert!(md.contains("measured, 3 imported from other tools"), "header counts imports apart");
    let imported = family(&md, "Imported collectives");
    // In a section of its own after MEASURED, not under the heading of this machine's measurements.
    let at = |heading: &str| md.find(heading).unwrap_or_else(|| panic!("no {heading}"));
    assert!(at("## MEASURED on this machine") < at("## IMPORTED from other tools' output"), "{md}");
    assert!(
        at("## IMPORTED from other tools' output") < at("### Imported collectives") && at("### Imported collectives") < at("## MODELLED")
    );
    assert!(imported.contains("#### all-reduce (float, sum): imported from all_reduce_perf (nccl-tests (version not stated in its output), NCCL 2.28.9), command `./build/all_reduce_perf -b 8 -e 512M -f 4 -g 1 -c 1 -J ar.json`"), "{imported}");
    assert!(imported.contains("#### all-gather (float): imported from all_gather_perf (nccl-tests 2.19.6, NCCL 2.28.9), command `mpirun -np 2 all_gather_perf -b 1K -e 64M -f 4`"), "{imported}");
    assert!(imported.contains("#### all-reduce (MPI_CHAR): imported from osu_allreduce (osu v7.3), command not recorded"), "{imported}");
    assert!(imported.contains("8 ranks on 2 hosts (node-a, node-b)"), "{imported}");
    assert!(
        imported.contains("| 8 | nccl | 512.0 MiB | 3.00 ms | 3.01 ms |"),
        "the out-of-place and in-place times of the largest size: {imported}"
    );
    assert!(imported.contains("| imported: nccl-tests |") && imported.contains("| unchecked | imported: osu |"), "{imported}");
    assert!(imported.contains("Fitted link constants of imported runs"), "{imported}");
    // parlab's own collectives family holds none of the imported rows or links.
    let measured = family(&md, "Collectives");
    assert!(!measured.contains("imported") && !measured.contains("| nccl |"), "{measured}");
    // MODELLED sets each imported run's fit against its own sizes under a link that says so.
    assert!(md.contains("| all-gather | nccl (imported: nccl-tests) | 2 | 4.0 MiB |"), "MODELLED labels imported links");
    assert!(md.contains("all-gather over nccl (imported: nccl-tests): fitted on 6 sizes up to 1.0 MiB at 2 ranks"), "its fit's provenance");
    assert!(md.contains("Fitted α-β model against held-out sizes of imported runs"));
    assert!(md.contains("3 collectives runs were imported from other tools' output, not measured by parlab"), "the caveat");
    // No finding rests on an imported run: the same findings, the same verdicts, as without them.
    assert_eq!(findings_of(&dir.path().join("reports-after")), without_imports);
}

#[test]
fn bad_input_exits_2_naming_the_file_and_line_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let bad = dir.path().join("truncated.json");
    std::fs::write(&bad, "{\"version\": 3,\n \"args\": [\"all_reduce_perf\"],\n \"results\": [\n").unwrap();
    // OSU's NCCL tests measure NCCL: a manifest of link `mpi` would misname them.
    let osu_nccl = dir.path().join("osu_nccl.txt");
    let mpi = std::fs::read_to_string(data("osu_allreduce_4rank.txt")).unwrap();
    std::fs::write(&osu_nccl, mpi.replacen("# OSU MPI Allreduce", "# OSU NCCL-CUDA Allreduce", 1)).unwrap();
    // A row with a column OSU never prints (a unit, a line glued to it) is refused, not read past.
    let glued = dir.path().join("osu_glued.txt");
    std::fs::write(&glued, mpi.replacen("3.30        1000\n", "3.30        1000 us\n", 1)).unwrap();
    // A rank numbered past the ranks that ran (two lines, ranks 0 and 9).
    let renumbered = dir.path().join("nccl_renumbered.txt");
    let two = std::fs::read_to_string(data("nccl_all_gather_2gpu.txt")).unwrap();
    std::fs::write(&renumbered, two.replacen("#  Rank  1 Group", "#  Rank  9 Group", 1)).unwrap();
    let renumbered_json = dir.path().join("nccl_renumbered.json");
    let eight = std::fs::read_to_string(data("nccl_all_reduce_8gpu.json")).unwrap();
    std::fs::write(&renumbered_json, eight.replacen("\"rank\": 7,", "\"rank\": 9,", 1)).unwrap();
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            vec!["nccl-tests".into(), renumbered.display().to_string()],
            format!("{}:7: rank 9 is listed, but the run had 2 ranks (0 to 1)", renumbered.display()),
        ),
        (
            vec!["nccl-tests".into(), renumbered_json.display().to_string()],
            format!("{}: config.devices[7]: rank 9 is listed, but the run had 8 ranks (0 to 7)", renumbered_json.display()),
        ),
        (vec!["nccl-tests".into(), bad.display().to_string()], format!("{}:4: not JSON", bad.display())),
        (
            vec!["osu".into(), glued.display().to_string(), "--world".into(), "4".into()],
            format!("{}:4: unexpected `us` after the latency", glued.display()),
        ),
        (
            vec!["osu".into(), osu_nccl.display().to_string(), "--world".into(), "4".into()],
            format!(
                "{}:1: `# OSU NCCL-CUDA Allreduce Latency Test v7.3`: OSU's NCCL-CUDA tests measure NCCL-CUDA, not MPI",
                osu_nccl.display()
            ),
        ),
        (
            vec!["osu".into(), data("nccl_all_gather_2gpu.txt").display().to_string()],
            format!("{}:13: a result row before the `# OSU MPI ... Test vX.Y`", data("nccl_all_gather_2gpu.txt").display()),
        ),
        (vec!["osu".into(), data("osu_allgather_4rank.txt").display().to_string()], "pass --world N".into()),
        (
            vec!["nccl-tests".into(), data("nccl_all_gather_2gpu.txt").display().to_string(), "--world".into(), "8".into()],
            "but --world says 8".into(),
        ),
    ];
    assert_refused(cases, &store);
}

/// Each import of `cases` (arguments, a part of its message) exits 2 with that message and
/// writes nothing into `store`.
fn assert_refused(cases: Vec<(Vec<String>, String)>, store: &Path) {
    for (args, expected) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = import(&args, store);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(&expected), "{args:?}: expected `{expected}` in {stderr}");
        assert!(manifests_in(store).is_empty(), "{args:?} wrote a manifest");
    }
}

#[test]
fn nccl_tests_json_of_processes_driving_several_gpus_counts_every_rank() {
    // `mpirun -np 2 all_reduce_perf -g 4 -J`: nccl-tests lists one `devices[]` entry per
    // process (its first rank: 0 and 4), with `ngpus` 4; the run had 8 ranks.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(data("nccl_all_reduce_8gpu.json")).unwrap()).unwrap();
    let devices = v["config"]["devices"].as_array().unwrap().clone();
    v["config"]["devices"] = serde_json::json!([devices[0], devices[4]]);
    v["config"]["ngpus"] = 4.into();
    let json = dir.path().join("two_processes.json");
    std::fs::write(&json, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let out = import(&["nccl-tests", json.to_str().unwrap()], &store);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let written = manifests_in(&store);
    assert_eq!(written.len(), 1);
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&written[0]).unwrap()).unwrap();
    assert_eq!(m["layout"]["world"], 8, "{}", m["layout"]);
}

#[test]
fn osu_rows_with_a_validation_column_before_tail_latencies_import() {
    // `osu_allreduce -c -f -z`: min, max, iterations, then Pass or Fail, then the percentiles.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let text = std::fs::read_to_string(data("osu_allreduce_4rank.txt")).unwrap();
    let mut lines: Vec<String> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        lines.push(match i {
            2 => format!("{line}  Validation       P50 Tail Lat(us)  P90 Tail Lat(us)  P99 Tail Lat(us)"),
            _ if !line.starts_with('#') && !line.trim().is_empty() => format!("{line}  Pass  2.90  3.10  3.50"),
            _ => line.to_string(),
        });
    }
    let osu = dir.path().join("osu_validated.txt");
    std::fs::write(&osu, lines.join("\n") + "\n").unwrap();
    let out = import(&["osu", osu.to_str().unwrap(), "--world", "4"], &store);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    // One Fail among them marks the row failed (a wrong result), as at the end of a row.
    let failed = dir.path().join("osu_failed.txt");
    std::fs::write(&failed, lines.join("\n").replacen("Pass", "Fail", 1) + "\n").unwrap();
    let out = import(&["osu", failed.to_str().unwrap(), "--world", "4"], &dir.path().join("failed"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let written = manifests_in(&dir.path().join("failed"));
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&written[0]).unwrap()).unwrap();
    let text = serde_json::to_string_pretty(&m).unwrap();
    assert_eq!((text.matches("\"wrong\": 1").count(), text.matches("\"wrong\": 0").count()), (1, 18), "the failed row alone: {text}");
}

#[test]
fn an_older_nccl_tests_table_without_its_binary_line_imports_with_the_binary_from_command() {
    // nccl-tests before 2.16.7 printed no `# Collective test starting:` line.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(data("nccl_all_gather_2gpu.txt")).unwrap();
    let older: String = text.lines().filter(|l| !l.contains("Collective test starting")).map(|l| format!("{l}\n")).collect();
    let file = dir.path().join("older.txt");
    std::fs::write(&file, older).unwrap();
    let refused = import(&["nccl-tests", file.to_str().unwrap()], &dir.path().join("a"));
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("name the binary with `--command`"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let out = import(
        &["nccl-tests", file.to_str().unwrap(), "--command", "mpirun -np 2 ./build/all_gather_perf -b 8 -e 128M -f 2 -g 1"],
        &dir.path().join("b"),
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let written = manifests_in(&dir.path().join("b"));
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&written[0]).unwrap()).unwrap();
    assert!(m.to_string().contains("all_gather_perf") && m["layout"]["world"] == 2, "{m}");
}

#[test]
fn nccl_tests_cpu_times_are_refused_not_read_as_the_collectives() {
    // `-C 1`: nccl-tests reports the host's CPU time in the time column (its bandwidths still
    // from the collective's), so the bus-factor check cannot catch it.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let json = dir.path().join("cpu_time.json");
    let eight = std::fs::read_to_string(data("nccl_all_reduce_8gpu.json")).unwrap();
    std::fs::write(&json, eight.replace("\"time\":", "\"cpu_time\":")).unwrap();
    let text = dir.path().join("cputime.txt");
    let two = std::fs::read_to_string(data("nccl_all_gather_2gpu.txt")).unwrap();
    std::fs::write(&text, two.replacen("   root     time   algbw", "   root  cputime   algbw", 1)).unwrap();
    let cases = vec![
        (vec!["nccl-tests".into(), json.display().to_string()], "`cpu_time` in place of `time`: nccl-tests' `-C 1`".to_string()),
        (
            vec!["nccl-tests".into(), text.display().to_string()],
            format!("{}:11: the table's times are `cputime`: nccl-tests' `-C 1`", text.display()),
        ),
    ];
    assert_refused(cases, &store);
}

#[test]
fn a_world_or_a_size_past_what_parlab_counts_exits_2_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let huge = dir.path().join("osu_allgather_huge.txt");
    let text = std::fs::read_to_string(data("osu_allgather_4rank.txt")).unwrap();
    let first_row = text.lines().find(|l| l.starts_with(|c: char| c.is_ascii_digit())).unwrap();
    let size = first_row.split_whitespace().next().unwrap();
    std::fs::write(&huge, text.replacen(first_row, &first_row.replacen(size, &u64::MAX.to_string(), 1), 1)).unwrap();
    let osu = data("osu_allreduce_4rank.txt").display().to_string();
    let cases: Vec<(Vec<String>, String)> = vec![
        (vec!["osu".into(), osu, "--world".into(), "4294967295".into()], "--world 4294967295: a run has at most 65536 ranks".into()),
        (
            vec!["osu".into(), huge.display().to_string(), "--world".into(), "4".into()],
            format!("{}:4: size {} bytes per peer × 4 ranks passes 2^64 bytes", huge.display(), u64::MAX),
        ),
    ];
    assert_refused(cases, &store);
}

#[test]
fn a_file_saved_with_a_byte_order_mark_imports() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let bom = dir.path().join("osu_allreduce_bom.txt");
    std::fs::write(&bom, format!("\u{feff}{}", std::fs::read_to_string(data("osu_allreduce_4rank.txt")).unwrap())).unwrap();
    let out = import(&["osu", bom.to_str().unwrap(), "--world", "4"], &store);
    assert_eq!(out.status.code(), Some(0), "was `no # OSU MPI ... Test line`: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(manifests_in(&store).len(), 1);
    // The provenance holds the file's own sha256, as sha256sum prints it (mark included).
    let (list, _) = parlab::manifest::read_all(&store);
    let recorded = list[0].provenance.imported().expect("imported").sha256.clone();
    assert_eq!(recorded, parlab::import::sha256_hex(&std::fs::read(&bom).unwrap()));
    assert!(list[0].provenance.imported().unwrap().file.is_absolute(), "where the file lay, whatever folder the import ran from");
}

/// The first `lines` lines of a fixture: its header and its first rows.
/// Writes `text` to `dir/name` and returns that path as a string (an import's argument).
fn written(dir: &Path, name: &str, text: String) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn head_of(name: &str, lines: usize) -> String {
    std::fs::read_to_string(data(name)).unwrap().lines().take(lines).map(|l| format!("{l}\n")).collect()
}

#[test]
fn two_nccl_tests_runs_in_one_file_are_refused_not_mixed_under_the_last_op() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    // Two runs' output in one log: all_gather_perf's rows, then alltoall_perf's (rows below
    // 1 GB/s, so no bus factor check stands in); read as one run they were all-to-all rows of
    // 4 ranks, each size two samples, one of them an all-gather's.
    let gather = head_of("nccl_all_gather_2gpu.txt", 15);
    let both = dir.path().join("two_runs.txt");
    std::fs::write(&both, format!("{gather}{}", gather.replace("all_gather_perf", "alltoall_perf"))).unwrap();
    // Without the second run's `# Collective test starting:` line (or a version that printed
    // none), its table header, then its rows: each size would be read twice, as one op's.
    let table: String = gather.lines().skip(8).map(|l| format!("{l}\n")).collect();
    let headers = dir.path().join("two_tables.txt");
    std::fs::write(&headers, format!("{gather}{table}")).unwrap();
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            vec!["nccl-tests".into(), both.display().to_string()],
            format!("{}:17: a second `# Collective test starting:` line (alltoall_perf after all_gather_perf)", both.display()),
        ),
        (
            vec!["nccl-tests".into(), headers.display().to_string()],
            format!("{}:18: a second table header (the first is at line 11)", headers.display()),
        ),
    ];
    assert_refused(cases, &store);
}

#[test]
fn rows_whose_reduction_or_root_is_not_the_benchmarks_are_refused_as_another_runs() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let gather = std::fs::read_to_string(data("nccl_all_gather_2gpu.txt")).unwrap();
    let file = |name: &str, text: String| written(dir.path(), name, text);
    // all_gather_perf's rows under reduce_scatter_perf's header: the two share a bus factor, so
    // only the reduction column tells the times are not a reduce-scatter's.
    let scatter = file("scatter.txt", gather.replace("all_gather_perf", "reduce_scatter_perf"));
    let summed = file("summed.txt", gather.replacen("float    none      -1", "float     sum      -1", 1));
    let rooted = file("rooted.txt", gather.replacen("float    none      -1", "float    none       0", 1));
    let broadcast = file("broadcast.txt", gather.replace("all_gather_perf", "broadcast_perf"));
    // broadcast_perf -r -1: every root in turn, each with its sizes again.
    let roots = gather.replace("all_gather_perf", "broadcast_perf").replacen("none      -1", "none       0", 1).replacen(
        "none      -1",
        "none       1",
        1,
    );
    let roots = file("roots.txt", roots);
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(data("nccl_all_reduce_8gpu.json")).unwrap()).unwrap();
    for r in json["results"].as_array_mut().unwrap() {
        r["redop"] = "none".into();
    }
    let unreduced = file("unreduced.json", json.to_string());
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            vec!["nccl-tests".into(), scatter.clone()],
            format!("{scatter}:13: redop `none` under reduce_scatter_perf, which prints its reduction op"),
        ),
        (vec!["nccl-tests".into(), summed.clone()], format!("{summed}:13: redop `sum` under all_gather_perf, which prints `none`")),
        (vec!["nccl-tests".into(), rooted.clone()], format!("{rooted}:13: root 0 under all_gather_perf, which has no root")),
        (
            vec!["nccl-tests".into(), broadcast.clone()],
            format!("{broadcast}:13: root -1 under broadcast_perf, which sends from a root rank"),
        ),
        (vec!["nccl-tests".into(), roots.clone()], format!("{roots}:14: rows of root 0 and root 1: the run timed several roots (`-r -1`)")),
        (
            vec!["nccl-tests".into(), unreduced.clone()],
            format!("{unreduced}: results[0]: redop `none` under all_reduce_perf, which prints its reduction op"),
        ),
    ];
    assert_refused(cases, &store);
    // The files as nccl-tests wrote them still import, and sendrecv_perf's rows, which print
    // the `-o` op (`sum`) though a send reduces nothing (bus factor 1: busbw = algbw).
    let sendrecv: String = gather
        .replace("all_gather_perf", "sendrecv_perf")
        .lines()
        .map(|l| match l.split_whitespace().collect::<Vec<_>>() {
            mut w if w.len() == 13 && w[3] == "none" => {
                (w[3], w[7], w[11]) = ("sum", w[6], w[10]);
                format!("{}\n", w.join("  "))
            }
            _ => format!("{l}\n"),
        })
        .collect();
    let sendrecv = file("sendrecv.txt", sendrecv);
    for path in [data("nccl_all_gather_2gpu.txt").display().to_string(), data("nccl_all_reduce_8gpu.json").display().to_string(), sendrecv]
    {
        let out = import(&["nccl-tests", &path], &store);
        assert_eq!(out.status.code(), Some(0), "{path}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn a_negative_size_in_nccl_tests_table_is_refused_not_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let text = std::fs::read_to_string(data("nccl_all_gather_2gpu.txt")).unwrap();
    let negative = dir.path().join("negative_size.txt");
    std::fs::write(&negative, text.replacen("        1024           128", "       -1024           128", 1)).unwrap();
    let cases: Vec<(Vec<String>, String)> = vec![(
        vec!["nccl-tests".into(), negative.display().to_string()],
        format!("{}:13: size `-1024` is not a byte count", negative.display()),
    )];
    assert_refused(cases, &store);
}

#[test]
fn nccl_info_lines_of_a_host_whose_name_starts_with_a_digit_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    // NCCL prefixes its lines with `host:pid:tid`; a host may be named `10-0-0-1` or `4gpu-a`.
    let text = std::fs::read_to_string(data("nccl_all_gather_2gpu.txt")).unwrap().replace("gpu-01:31337:31337", "10-0-0-1:31337:31337");
    let info = "4gpu-a:31338:31338 [1] NCCL INFO comm 0x55d0 rank 1 nranks 2 - Init COMPLETE\n";
    let row = "        4096           512";
    let log = dir.path().join("digit_host.txt");
    std::fs::write(&log, text.replacen(row, &format!("{info}{row}"), 1)).unwrap();
    let out = import(&["nccl-tests", log.to_str().unwrap()], &store);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("all-gather, 9 sizes, world 2"), "{stderr}");
}

#[test]
fn numbers_every_reader_of_manifests_would_skip_are_refused_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let osu_head = head_of("osu_allreduce_4rank.txt", 3);
    let file = |name: &str, text: String| written(dir.path(), name, text);
    let huge_time = file("huge_time.txt", format!("{osu_head}4 1e300\n8 3.0\n"));
    let huge_size = file("huge_size.txt", format!("{osu_head}4 3.0 2.7 3.3 1000\n4611686018427387904 3.0 2.7 3.3 1000\n"));
    let tiny_time = file("tiny_time.txt", format!("{osu_head}4 1e-300\n8 3.0\n"));
    let nccl = std::fs::read_to_string(data("nccl_all_gather_2gpu.txt")).unwrap();
    let huge_wrong = file("huge_wrong.txt", nccl.replacen(" 0     9.30 ", " 99999999999999999999999     9.30 ", 1));
    let osu = |path: &String| vec!["osu".to_string(), path.clone(), "--world".into(), "4".into()];
    let cases: Vec<(Vec<String>, String)> = vec![
        (osu(&huge_time), format!("{huge_time}:4: latency `1e300` µs is more than 1e15 s")),
        (osu(&huge_size), format!("{huge_size}:5: size 4611686018427387904 bytes is more than 2^60 bytes")),
        (osu(&tiny_time), format!("{tiny_time}:4: latency `1e-300` µs is below 1 ns")),
        (
            vec!["nccl-tests".into(), huge_wrong.clone()],
            format!("{huge_wrong}:13: out-of-place #wrong `99999999999999999999999` is more than 2^60"),
        ),
    ];
    assert_refused(cases, &store);
}

#[test]
fn a_command_of_several_lines_or_with_backticks_stays_one_line_of_the_register() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let osu = data("osu_allreduce_4rank.txt");
    // A command pasted from a script, its continuation lines kept: each line of it was a line of
    // the register, so `## ...` became a heading and `| ... |` a table row.
    let command = "mpirun -np 4 \\\n  `which osu_allreduce` -f\n## not a heading\n| not | a row |";
    let out = import(&["osu", osu.to_str().unwrap(), "--world", "4", "--command", command], &store);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let out_dir = dir.path().join("reports");
    let report = parlab(&["report", "--out", out_dir.to_str().unwrap()], &store);
    assert_eq!(report.status.code(), Some(0), "{}", String::from_utf8_lossy(&report.stderr));
    let md = std::fs::read_to_string(out_dir.join("evidence.md")).unwrap();
    assert!(!md.lines().any(|l| l.starts_with("## not") || l.starts_with("| not")), "{md}");
    let one_line = "`` mpirun -np 4 \\ `which osu_allreduce` -f ## not a heading | not | a row | ``";
    assert!(md.contains(&format!("imported from osu_allreduce (osu v7.3), command {one_line}")), "{md}");
    assert!(md.contains(&format!("- command: {one_line}")), "{md}");
}

#[test]
fn an_output_listing_more_ranks_than_a_run_has_is_refused_as_world_is() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let text = std::fs::read_to_string(data("nccl_all_gather_2gpu.txt")).unwrap();
    let two = "#  Rank  0 Group  0 Pid  31337 on     gpu-01 device  0 [0000:19:00] NVIDIA H200\n#  Rank  1 Group  0 Pid  31338 on     gpu-01 device  1 [0000:3b:00] NVIDIA H200\n";
    assert!(text.contains(two));
    let ranks: String = (0..65_537)
        .map(|r| format!("#  Rank {r} Group  0 Pid  {r} on gpu-{} device  {} [0000:19:00] NVIDIA H200\n", r / 8, r % 8))
        .collect();
    let many = dir.path().join("many_ranks.txt");
    std::fs::write(&many, text.replacen(two, &ranks, 1)).unwrap();
    let cases: Vec<(Vec<String>, String)> = vec![(
        vec!["nccl-tests".into(), many.display().to_string()],
        // Refused at the rank line past the most a run has, before the rest is read.
        format!("{}:65542: more than 65536 ranks listed: a run has at most 65536 ranks", many.display()),
    )];
    assert_refused(cases, &store);
}

#[test]
fn a_rank_listed_twice_in_nccl_tests_device_lines_is_refused_at_the_repeat() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let text = std::fs::read_to_string(data("nccl_all_gather_2gpu.txt")).unwrap();
    let twice = dir.path().join("rank_twice.txt");
    std::fs::write(&twice, text.replacen("#  Rank  1 Group", "#  Rank  0 Group", 1)).unwrap();
    let cases: Vec<(Vec<String>, String)> = vec![(
        vec!["nccl-tests".into(), twice.display().to_string()],
        format!("{}:7: rank 0 is listed twice (first at line 6)", twice.display()),
    )];
    assert_refused(cases, &store);
}

#[test]
fn a_fractional_wrong_count_is_refused_not_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let text = std::fs::read_to_string(data("nccl_all_gather_2gpu.txt")).unwrap();
    let half = dir.path().join("half_wrong.txt");
    std::fs::write(&half, text.replacen(" 0     9.30 ", " 1.5     9.30 ", 1)).unwrap();
    let cases: Vec<(Vec<String>, String)> = vec![(
        vec!["nccl-tests".into(), half.display().to_string()],
        format!("{}:13: out-of-place #wrong `1.5` is not a whole number of wrong elements", half.display()),
    )];
    assert_refused(cases, &store);
}

/// `text` as UTF-16 with its byte-order mark, little- or big-endian.
fn utf16(text: &str, little: bool) -> Vec<u8> {
    let units = std::iter::once(0xfeff).chain(text.encode_utf16());
    units.flat_map(|u| if little { u.to_le_bytes() } else { u.to_be_bytes() }).collect()
}

#[test]
fn a_utf16_file_is_refused_with_how_to_convert_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let text = std::fs::read_to_string(data("nccl_all_gather_2gpu.txt")).unwrap();
    let mut cases: Vec<(Vec<String>, String)> = Vec::new();
    for (name, little) in [("utf16le.txt", true), ("utf16be.txt", false)] {
        let path = dir.path().join(name);
        std::fs::write(&path, utf16(&text, little)).unwrap();
        let message = format!("{} is UTF-16; convert it to UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)", path.display());
        cases.push((vec!["nccl-tests".into(), path.display().to_string()], message));
    }
    assert_refused(cases, &store);
}

#[test]
fn a_registers_folder_is_refused_as_the_manifests_folder() {
    // It was accepted, and the next render of the store it was rendered from refused the folder
    // (it now held a manifest).
    let dir = tempfile::tempdir().unwrap();
    let (store, register) = (dir.path().join("manifests"), dir.path().join("reports"));
    let osu = data("osu_allreduce_4rank.txt");
    assert_eq!(import(&["osu", osu.to_str().unwrap(), "--world", "4"], &store).status.code(), Some(0));
    let render = Command::new(env!("CARGO_BIN_EXE_parlab"))
        .args(["report", "--manifests"])
        .arg(&store)
        .arg("--out")
        .arg(&register)
        .output()
        .unwrap();
    assert_eq!(render.status.code(), Some(0), "{}", String::from_utf8_lossy(&render.stderr));
    let out = import(&["osu", osu.to_str().unwrap(), "--world", "4"], &register);
    let told = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{told}");
    assert!(told.contains("a register's folder (rendered from") && told.contains("not a manifests folder"), "{told}");
    assert!(parlab::manifest::read_all(&register).0.is_empty(), "no manifest written into the register's folder");
}

#[test]
fn rows_glued_tiny_times_and_uncounted_wrong_elements_are_refused_not_imported() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let file = |name: &str, text: String| written(dir.path(), name, text);
    let nccl = std::fs::read_to_string(data("nccl_all_gather_2gpu.txt")).unwrap();
    let first = "        1024           128     float    none      -1     9.00    0.11    0.06       0     9.30    0.11    0.06       0";
    assert!(nccl.contains(first));
    // Two rows on one line: the second was dropped without a word.
    let glued = file("glued.txt", nccl.replacen(first, &format!("{first}    2048 256 float none -1 9.0 0.2 0.1 0 9.3 0.2 0.1 0"), 1));
    // A time that would be written as 0 s.
    let tiny = file("tiny.txt", nccl.replacen("     9.00    0.11", "   5e-324    0.11", 1));
    let osu = std::fs::read_to_string(data("osu_allreduce_4rank.txt")).unwrap();
    let osu_tiny = file("osu_tiny.txt", osu.replacen("4                       3.00", "4                       1e-9", 1));
    // JSON whose wrong count is text, and whose bandwidth is negative.
    let json = std::fs::read_to_string(data("nccl_all_reduce_8gpu.json")).unwrap();
    let text_wrong = file("text_wrong.json", json.replacen("\"nwrong\": 0.0", "\"nwrong\": \"12\"", 1));
    let negative_bw = file("negative_bw.json", json.replacen("\"alg_bw\":", "\"alg_bw\": -1, \"was\":", 1));
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            vec!["nccl-tests".into(), glued.clone()],
            format!("{glued}:13: expected `size count type redop root`, 4 columns out of place and in place (13 in all)"),
        ),
        (vec!["nccl-tests".into(), glued], "found 26 columns (two rows on one line?)".into()),
        (vec!["nccl-tests".into(), tiny.clone()], format!("{tiny}:13: out-of-place time `5e-324` µs is below 1 ns")),
        (vec!["osu".into(), osu_tiny.clone(), "--world".into(), "4".into()], format!("{osu_tiny}:4: latency `1e-9` µs is below 1 ns")),
        (vec!["nccl-tests".into(), text_wrong], "`nwrong` \"12\" is not a count of wrong elements".into()),
        (vec!["nccl-tests".into(), negative_bw], "`alg_bw` -1 is not a bandwidth".into()),
    ];
    assert_refused(cases, &store);
}

#[test]
fn a_reimport_keeps_the_earlier_command_and_never_replaces_a_newer_parlabs_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let table = data("nccl_all_gather_2gpu.txt").display().to_string();
    let command = "mpirun -np 2 ./build/all_gather_perf -b 1K -e 64M";
    assert_eq!(import(&["nccl-tests", &table, "--command", command], &store).status.code(), Some(0));
    let again = import(&["nccl-tests", &table], &store);
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stderr));
    assert!(String::from_utf8_lossy(&again.stderr).contains("kept the command the earlier import of this file recorded"));
    let written = manifests_in(&store);
    assert_eq!(written.len(), 1);
    let text = std::fs::read_to_string(&written[0]).unwrap();
    assert!(text.contains(command), "the command recorded the first time is kept: {text}");
    // A manifest of the same run written by a newer parlab is left as it is.
    let newer = text.replacen("\"schema\": \"parlab.manifest/", "\"schema\": \"parlab.manifest/999", 1);
    assert_ne!(newer, text);
    std::fs::write(&written[0], &newer).unwrap();
    let refused = import(&["nccl-tests", &table], &store);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("was written by another parlab (manifest schema `parlab.manifest/9993`)"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert_eq!(std::fs::read_to_string(&written[0]).unwrap(), newer);
}

#[test]
fn a_command_that_runs_another_benchmark_than_the_table_is_not_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let table = data("nccl_all_gather_2gpu.txt").display().to_string();
    let out = import(&["nccl-tests", &table, "--command", "mpirun -np 2 ./build/all_reduce_perf -b 8"], &store);
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not recorded: it runs all_reduce_perf, but"), "{stderr}");
    let text = std::fs::read_to_string(&manifests_in(&store)[0]).unwrap();
    assert!(!text.contains("./build/all_reduce_perf"), "{text}");
}

#[test]
fn an_osu_row_cut_short_of_its_full_headers_columns_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let osu = std::fs::read_to_string(data("osu_allreduce_4rank.txt")).unwrap();
    assert!(osu.contains("Min Latency(us)") && osu.contains("Iterations"));
    let short = dir.path().join("short.txt");
    std::fs::write(
        &short,
        osu.replacen("8                       3.00              2.70              3.30        1000", "8                       3.00", 1),
    )
    .unwrap();
    // Min and max swapped (columns of another layout): the average is not between them.
    let swapped = written(
        dir.path(),
        "swapped.txt",
        osu.replacen(
            "8                       3.00              2.70              3.30        1000",
            "8                       3.00              3.30              2.70        1000",
            1,
        ),
    );
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            vec!["osu".into(), short.display().to_string(), "--world".into(), "4".into()],
            format!("{}:5: the header has min, max and iterations columns (`-f`), but this row holds 2 numbers", short.display()),
        ),
        (
            vec!["osu".into(), swapped.clone(), "--world".into(), "4".into()],
            format!("{swapped}:5: min 3.30 ≤ average 3.00 ≤ max 2.70 does not hold"),
        ),
    ];
    assert_refused(cases, &store);
}

#[test]
fn an_osu_title_whose_version_is_not_a_version_is_refused_not_kept_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let osu = std::fs::read_to_string(data("osu_allreduce_4rank.txt")).unwrap();
    let long = written(dir.path(), "long.txt", osu.replacen("Test v7.3", &format!("Test v7.3{}", "x".repeat(100_000)), 1));
    let spaced = written(dir.path(), "spaced.txt", osu.replacen("Test v7.3", "Test v7.3 built by hand", 1));
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            vec!["osu".into(), long.clone(), "--world".into(), "4".into()],
            format!("{long}:1: version `7.3{}... (100003 characters)` is not OSU's `vX.Y`", "x".repeat(29)),
        ),
        (
            vec!["osu".into(), spaced.clone(), "--world".into(), "4".into()],
            format!("{spaced}:1: version `7.3 built by hand` is not OSU's `vX.Y`"),
        ),
    ];
    assert_refused(cases, &store);
    for (i, version) in ["7.5-1", "7.4+cuda", "5.9_1"].into_iter().enumerate() {
        let rebuilt = written(dir.path(), &format!("rebuilt{i}.txt"), osu.replacen("Test v7.3", &format!("Test v{version}"), 1));
        let store = dir.path().join(format!("rebuilt{i}"));
        let out = import(&["osu", &rebuilt, "--world", "4"], &store);
        assert_eq!(out.status.code(), Some(0), "{version}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(std::fs::read_to_string(&manifests_in(&store)[0]).unwrap().contains(&format!("v{version}")), "{version}");
    }
}

#[test]
fn a_table_with_row_timestamps_imports_and_a_row_without_its_timestamp_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    // nccl-tests' `-S 1`: `timestamp` ends the header, a date and time end each row.
    let text = std::fs::read_to_string(data("nccl_all_gather_2gpu.txt")).unwrap();
    let stamped: String = text
        .lines()
        .map(|l| match l.trim_start() {
            t if t.starts_with("# ") && t.contains("size") && t.contains("count") => format!("{l}  timestamp\n"),
            t if t.starts_with(|c: char| c.is_ascii_digit()) => format!("{l}  2025-11-03 11:18:39\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    let good = dir.path().join("stamped.txt");
    std::fs::write(&good, &stamped).unwrap();
    let out = import(&["nccl-tests", good.to_str().unwrap()], &store);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let plain = std::fs::read_to_string(&manifests_in(&store)[0]).unwrap();
    assert!(plain.contains("\"op_time_s\""));
    let bad = dir.path().join("unstamped_row.txt");
    std::fs::write(&bad, stamped.replacen("  2025-11-03 11:18:39", "  2025-11-03 soon", 1)).unwrap();
    let other = dir.path().join("other");
    let cases: Vec<(Vec<String>, String)> = vec![(
        vec!["nccl-tests".into(), bad.display().to_string()],
        format!("{}:13: expected the row's date and time (`-S 1`) last", bad.display()),
    )];
    assert_refused(cases, &other);
}

#[test]
fn a_command_through_a_wrapper_is_kept_and_a_refused_command_is_not_replaced_by_the_earlier_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let osu = data("osu_allreduce_4rank.txt").display().to_string();
    // A wrapper or job name that merely looks like a benchmark is no other benchmark.
    let wrapper = "srun -J osu_bench ./osu_run.sh";
    let first = import(&["osu", &osu, "--world", "4", "--command", wrapper], &store);
    assert_eq!(first.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&first.stderr).contains("not recorded"), "{}", String::from_utf8_lossy(&first.stderr));
    let again = import(&["osu", &osu, "--world", "4", "--command", "mpirun -np 4 ./osu_bcast"], &store);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("not recorded: it runs osu_bcast") && !stderr.contains("kept the command"), "{stderr}");
    let text = std::fs::read_to_string(&manifests_in(&store)[0]).unwrap();
    assert!(!text.contains("osu_bcast") && !text.contains(wrapper), "a refused --command records none: {text}");
}

#[test]
fn a_nccl_tests_2_13_table_with_an_empty_redop_imports_as_its_header_version_does() {
    // nccl-tests 2.13.0–2.13.3 printed the redop of an op that reduces nothing as "": its rows
    // are a column short, their root fourth. No version or binary line before 2.16.7.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(data("nccl_all_gather_2gpu.txt")).unwrap();
    let older: String = text
        .lines()
        .filter(|l| !l.contains("nccl-tests version") && !l.contains("Collective test starting"))
        .map(|l| format!("{}\n", l.replace("    none  ", "          ")))
        .collect();
    assert!(!older.contains(" none "), "the fixture's rows print `none`");
    let summary = |store: &Path| {
        let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifests_in(store)[0]).unwrap()).unwrap();
        m["summary"].clone()
    };
    let command = "mpirun -np 2 ./build/all_gather_perf -b 1K -e 64M -f 4 -g 1";
    let file = written(dir.path(), "all_gather_2.13.txt", older.clone());
    let out = import(&["nccl-tests", &file, "--command", command], &dir.path().join("old"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let now = import(&["nccl-tests", data("nccl_all_gather_2gpu.txt").to_str().unwrap()], &dir.path().join("new"));
    assert_eq!(now.status.code(), Some(0), "{}", String::from_utf8_lossy(&now.stderr));
    assert_eq!(summary(&dir.path().join("old")), summary(&dir.path().join("new")));
    // all_reduce_perf printed its op in those versions too: a row without one is cut short; so
    // is a row a column short under a version line (printed since 2.18.5, long after).
    let reduce = written(dir.path(), "all_reduce_2.13.txt", older);
    let versioned = written(dir.path(), "all_gather_2.19_cut.txt", text.replace("    none  ", "          "));
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            vec!["nccl-tests".into(), reduce.clone(), "--command".into(), "mpirun -np 2 ./build/all_reduce_perf -g 1".into()],
            format!("{reduce}:11: expected `size count type redop root`"),
        ),
        (vec!["nccl-tests".into(), versioned.clone()], format!("{versioned}:13: expected `size count type redop root`")),
    ];
    assert_refused(cases, &dir.path().join("refused"));
}

#[test]
fn a_run_cut_short_a_world_osu_cannot_run_and_a_folder_inside_a_store_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    // A crash after the 4 MiB row: no closing `# Avg bus bandwidth` line, fewer sizes than asked.
    let whole = std::fs::read_to_string(data("nccl_all_gather_2gpu.txt")).unwrap();
    let cut: String = whole.lines().take_while(|l| !l.contains("16777216")).map(|l| format!("{l}\n")).collect();
    let crashed = written(dir.path(), "crashed.txt", cut + "gpu-01: Test NCCL failure common.cu:1050 'unhandled cuda error'\n");
    let osu = data("osu_allreduce_4rank.txt").display().to_string();
    let cases: Vec<(Vec<String>, String)> = vec![
        (vec!["nccl-tests".into(), crashed.clone()], "without the `# Avg bus bandwidth` line nccl-tests prints after its last size".into()),
        (vec!["osu".into(), osu.clone(), "--world".into(), "1".into()], "osu_allreduce needs at least 2 processes".into()),
    ];
    assert_refused(cases, &store);
    // A run whose teardown failed after its last size (maxBytes reached) printed a whole sweep.
    let teardown: String = whole.lines().take_while(|l| !l.contains("Out of bounds")).map(|l| format!("{l}\n")).collect();
    let teardown = written(dir.path(), "teardown.txt", teardown + "gpu-01: Test NCCL failure common.cu:1833 'unhandled cuda error'\n");
    let o = import(&["nccl-tests", &teardown], &dir.path().join("other"));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    // A run's results folder inside a store: no render reads a manifest there.
    assert_eq!(import(&["osu", &osu, "--world", "4"], &store).status.code(), Some(0));
    let run = manifests_in(&store)[0].file_stem().unwrap().to_string_lossy().into_owned();
    let results = store.join(&run);
    std::fs::create_dir_all(&results).unwrap();
    let out = import(&["osu", &osu, "--world", "4"], &results);
    let told = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{told}");
    assert!(told.contains("a folder parlab keeps inside the manifests folder"), "{told}");
    assert!(manifests_in(&results).is_empty(), "nothing written there");
    // Nor is a register rendered into one.
    let render = parlab(&["report", "--out", results.to_str().unwrap()], &store);
    assert_eq!(render.status.code(), Some(2), "{}", String::from_utf8_lossy(&render.stderr));
    assert!(!results.join("evidence.md").exists());
}

#[test]
fn the_same_file_imported_again_at_a_corrected_world_replaces_the_earlier_import() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let osu = data("osu_allreduce_4rank.txt");
    let command = "mpirun -np 4 osu_allreduce";
    assert_eq!(import(&["osu", osu.to_str().unwrap(), "--world", "3", "--command", command], &store).status.code(), Some(0));
    let out = import(&["osu", osu.to_str().unwrap(), "--world", "4"], &store);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("removed the earlier import of this file at world 3"));
    let kept = parlab::manifest::read_all(&store).0;
    assert_eq!(kept.iter().map(|m| m.layout.world).collect::<Vec<_>>(), [4], "one file is one run");
    let recorded = kept[0].provenance.imported().unwrap().command.clone();
    assert_eq!(recorded.as_deref(), Some(command), "the command the corrected import replaced is kept");
    // Another file at another world stays beside it.
    let other = data("osu_allgather_4rank.txt");
    assert_eq!(import(&["osu", other.to_str().unwrap(), "--world", "2"], &store).status.code(), Some(0));
    assert_eq!(parlab::manifest::read_all(&store).0.len(), 2);
}

#[test]
fn an_imports_data_type_and_reduction_op_are_named_in_its_table() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    let whole = std::fs::read_to_string(data("nccl_all_gather_2gpu.txt")).unwrap();
    let bf16 = written(dir.path(), "ag_bf16.txt", whole.replace("     float    none", "  bfloat16    none"));
    assert_eq!(import(&["nccl-tests", &bf16], &store).status.code(), Some(0));
    let json = data("nccl_all_reduce_8gpu.json");
    assert_eq!(import(&["nccl-tests", json.to_str().unwrap()], &store).status.code(), Some(0));
    let out = dir.path().join("out");
    let render = parlab(&["report", "--out", out.to_str().unwrap()], &store);
    assert_eq!(render.status.code(), Some(0), "{}", String::from_utf8_lossy(&render.stderr));
    let md = std::fs::read_to_string(out.join("evidence.md")).unwrap();
    let imported = |m: &parlab::manifest::Manifest| m.provenance.imported().unwrap().data_words();
    let words: Vec<String> = parlab::manifest::read_all(&store).0.iter().map(imported).collect();
    assert!(words.contains(&" (bfloat16)".to_string()), "{words:?}");
    assert!(md.contains("(bfloat16): imported from all_gather_perf"), "{md}");
    assert!(md.contains("(float, sum): imported from all_reduce_perf"), "{md}");
    assert!(md.contains("data type: `bfloat16`"), "{md}");
}
