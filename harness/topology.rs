//! `nvidia-smi topo -m` read into rows: how each GPU reaches every other (NV#: NVLink with #
//! links; PIX, PXB: through PCIe switches; PHB: through the host bridge; NODE, SYS: across the
//! PCIe host bridges of a NUMA node, or across NUMA nodes), and its CPU and NUMA affinity.

use serde::{Deserialize, Serialize};

/// One GPU's row of the matrix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuRow {
    /// The GPU (`GPU0`).
    pub gpu: String,
    /// Its link to each GPU in column order (`X` for itself).
    pub links: Vec<String>,
    /// The CPUs near it (`0-15`).
    pub cpu_affinity: String,
    /// The NUMA node near it.
    pub numa_affinity: String,
}

/// The GPU rows of `nvidia-smi topo -m`'s output (the header, NIC rows and the legend left
/// out; the header may start with `GPU0` itself when the output was trimmed); empty when the
/// text holds no matrix.
pub fn parse(text: &str) -> Vec<GpuRow> {
    let lines: Vec<String> = text.lines().map(strip_escapes).collect();
    let Some(header) = lines.iter().find(|l| l.split('\t').any(|c| c.trim() == "CPU Affinity")) else {
        return Vec::new();
    };
    // Cells are matched to columns by their tab position (an empty cell, such as a virtual
    // machine's blank CPU affinity, keeps its place); only the header's leading empty cell, above
    // the rows' GPU names, is not a column.
    let mut columns: Vec<&str> = header.split('\t').map(str::trim).collect();
    if columns.first() == Some(&"") {
        columns.remove(0);
    }
    let gpus = columns.iter().take_while(|c| is_gpu(c)).count();
    lines
        .iter()
        .filter(|l| *l != header && l.split('\t').next().is_some_and(|first| is_gpu(first.trim())))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('\t').map(str::trim).collect();
            let (name, rest) = cells.split_first()?;
            let at =
                |column: &str| columns.iter().position(|c| *c == column).and_then(|i| rest.get(i)).map_or(String::new(), |s| s.to_string());
            (rest.len() > gpus).then(|| GpuRow {
                gpu: name.to_string(),
                links: rest[..gpus].iter().map(|s| s.to_string()).collect(),
                cpu_affinity: at("CPU Affinity"),
                numa_affinity: at("NUMA Affinity"),
            })
        })
        .collect()
}

/// One line per GPU: `GPU0 [X NV12] cpu 0-15 numa 0`, rows joined by `; ` (what the machine
/// fingerprint records).
pub fn compact(rows: &[GpuRow]) -> String {
    rows.iter()
        .map(|r| format!("{} [{}] cpu {} numa {}", r.gpu, r.links.join(" "), r.cpu_affinity, r.numa_affinity))
        .collect::<Vec<_>>()
        .join("; ")
}

fn is_gpu(cell: &str) -> bool {
    cell.len() > 3 && cell.starts_with("GPU") && cell[3..].chars().all(|c| c.is_ascii_digit())
}

/// `text` without ANSI escape sequences (`nvidia-smi` underlines its header).
fn strip_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_one_gpu_as_the_h200_machine_printed_it() {
        let text = "\u{1b}[4mGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\u{1b}[0m\nGPU0\t X \t0-15\t0\t\tN/A\n\nLegend:\n\n  X    = Self\n  SYS  = ...";
        let rows = parse(text);
        assert_eq!(
            rows,
            vec![GpuRow { gpu: "GPU0".into(), links: vec!["X".into()], cpu_affinity: "0-15".into(), numa_affinity: "0".into() }]
        );
        assert_eq!(compact(&rows), "GPU0 [X] cpu 0-15 numa 0");
    }

    #[test]
    fn reads_links_between_gpus_and_leaves_nics_out() {
        let text = "\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n\
                    GPU0\t X \tNV12\tSYS\tPIX\t0-31\t0\t\tN/A\n\
                    GPU1\tNV12\t X \tSYS\tSYS\t0-31\t0\t\tN/A\n\
                    GPU2\tSYS\tSYS\t X \tSYS\t32-63\t1\t\tN/A\n\
                    NIC0\tPIX\tSYS\tSYS\t X \n";
        let rows = parse(text);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].links, ["X", "NV12", "SYS"]);
        assert_eq!(rows[2].cpu_affinity, "32-63");
        assert_eq!(rows[2].numa_affinity, "1");
        assert!(parse("sh: 1: nvidia-smi: not found").is_empty());
    }

    #[test]
    fn a_blank_cpu_affinity_keeps_the_numa_node_in_its_column() {
        let text = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n\
                    GPU0\t X \tNV18\t\t1\t\tN/A\n\
                    GPU1\tNV18\t X \t\t1\t\tN/A\n";
        let rows = parse(text);
        assert_eq!(
            (rows[0].links.clone(), rows[0].cpu_affinity.as_str(), rows[0].numa_affinity.as_str()),
            (vec!["X".into(), "NV18".into()], "", "1")
        );
    }
}
