//! `parlab run --only NAME|GLOB`: which runs of the suite are selected.

use super::Error;
use crate::spec::RunPlan;

/// Whether `text` matches a glob of `*` (any run of characters) and `?` (one character).
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// The names a run answers to: its experiment, its label, `experiment#index` (as `parlab plan`
/// lists it) and its run identity (a prefix matches with `*`: `3f0e1ac9bbcb*`).
fn names(r: &RunPlan) -> [String; 4] {
    [r.experiment.clone(), r.label(), format!("{}#{}", r.experiment, r.index), r.run_id.to_string()]
}

/// The runs one of whose names matches one of `only` (all runs when `only` is empty); a user
/// error when a pattern matches nothing (a mistyped pattern would silently select less).
pub fn only(runs: Vec<RunPlan>, only: &[String]) -> Result<Vec<RunPlan>, Error> {
    if only.is_empty() {
        return Ok(runs);
    }
    let total = runs.len();
    let matches = |p: &str, r: &RunPlan| names(r).iter().any(|n| glob(p, n));
    let unmatched: Vec<&str> = only.iter().map(String::as_str).filter(|p| !runs.iter().any(|r| matches(p, r))).collect();
    if !unmatched.is_empty() {
        return Err(Error::Usage(format!(
            "--only {}: matches none of the suite's {total} runs (by experiment name, label such as `decode-tensor #3 tensor world=3 mpi-shm`, `experiment#index` as `parlab plan` lists it, or run identity)",
            unmatched.join(", ")
        )));
    }
    Ok(runs.into_iter().filter(|r| only.iter().any(|p| matches(p, r))).collect())
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn globs_match_whole_names() {
        assert!(glob("decode-*", "decode-tensor") && glob("*", "") && glob("a?c", "abc") && glob("membw", "membw"));
        assert!(!glob("decode-*", "xdecode-tensor") && !glob("a?c", "ac") && !glob("membw", "membw2"));
        assert!(glob("*-tensor-*", "decode-tensor-4") && !glob("*-tensor-*", "decode-tensor"));
    }
}
