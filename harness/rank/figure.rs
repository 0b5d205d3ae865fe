//! What a rank's record timed or counted: the contract between the ranks that write records and
//! the collector that reads them. In a records file each figure is its name (`all-reduce@block`,
//! `decode_step`, ...), the names files of earlier versions carry.

use crate::manifest::summary::Phase;
use crate::spec::schema::Op;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What one record timed or counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Figure {
    /// One call of an op (a collective or a device op), timed alone after a barrier.
    Op(Op),
    /// A block of calls of an op back to back, per call.
    OpBlock(Op),
    /// A block of in-place calls back to back (the result over the input; NCCL), per call.
    OpInPlaceBlock(Op),
    /// A prefill's seconds.
    Prefill,
    /// A prefill's seconds in communication.
    PrefillComm,
    /// Seconds of a phase's all-reduces of one size.
    AllReduce(Phase),
    /// How many all-reduces of one size a phase made (in `seconds`).
    AllReduceCalls(Phase),
    /// Seconds of all a phase's all-reduces of one size together.
    AllReduceTotal(Phase),
    /// A context split's seconds inside the ring per repetition.
    ContextRing,
    /// The key/value bytes a rank sent around the ring per repetition (in `seconds`).
    ContextRingBytes,
    /// Seconds gathering the cache to rank 0 per repetition.
    ContextGather,
    /// Bytes a rank sent to rank 0's cache per repetition (in `seconds`).
    ContextGatherBytes,
    /// The (row, expert) pairs a rank's experts computed in prefill, per mixture layer
    /// (`iteration`: the layer; the count in `seconds`).
    ExpertAssigned,
    /// A part of an expert split's work in a phase.
    Expert(Phase, ExpertPart),
    /// One decode step's seconds.
    DecodeStep,
    /// One decode step's seconds in communication.
    DecodeComm,
    /// A repetition's seconds from start to end.
    Run,
    /// libtorch's sum of a rank's buffer.
    Membw,
    /// parlab's STREAM-class read of a rank's buffer.
    MembwStream,
    /// One all-to-all of an expert-parallel layer's dispatch.
    Dispatch,
}

/// A part of an expert split's work: compute, the dispatch and combine all-to-alls, the gather
/// of the outputs, the bytes sent (in `seconds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ExpertPart {
    /// The experts' compute.
    Compute,
    /// The dispatch and combine all-to-alls.
    Exchange,
    /// The gather of the outputs.
    Gather,
    /// Bytes sent (in `seconds`).
    SentBytes,
}

crate::named!(ExpertPart { Compute => "compute", Exchange => "exchange", Gather => "gather", SentBytes => "sent_bytes" });

const BLOCK: &str = "@block";
const IN_PLACE_BLOCK: &str = "@inplace@block";
const CALLS: &str = "_allreduce_calls";
const TOTAL: &str = "_allreduce_total";
const MOE: &str = "moe_";

/// The figures whose name is fixed (no op, phase or part in it).
const FIXED: [Figure; 15] = [
    Figure::Prefill,
    Figure::PrefillComm,
    Figure::ContextRing,
    Figure::ContextRingBytes,
    Figure::ContextGather,
    Figure::ContextGatherBytes,
    Figure::ExpertAssigned,
    Figure::DecodeStep,
    Figure::DecodeComm,
    Figure::Run,
    Figure::Membw,
    Figure::MembwStream,
    Figure::Dispatch,
    Figure::AllReduce(Phase::Prefill),
    Figure::AllReduce(Phase::Decode),
];

impl Figure {
    /// Its name in a records file.
    pub fn name(self) -> String {
        match self {
            Figure::Op(op) => op.name().to_string(),
            Figure::OpBlock(op) => format!("{}{BLOCK}", op.name()),
            Figure::OpInPlaceBlock(op) => format!("{}{IN_PLACE_BLOCK}", op.name()),
            Figure::AllReduceCalls(phase) => format!("{}{CALLS}", phase.name()),
            Figure::AllReduceTotal(phase) => format!("{}{TOTAL}", phase.name()),
            Figure::Expert(phase, part) => format!("{}{MOE}{}", expert_prefix(phase), part.name()),
            fixed => fixed.fixed_name().unwrap_or_default().to_string(),
        }
    }

    /// The name of a figure that takes no op, phase or part (None for those that do).
    fn fixed_name(self) -> Option<&'static str> {
        Some(match self {
            Figure::Prefill => "prefill",
            Figure::PrefillComm => "prefill_comm",
            Figure::AllReduce(Phase::Prefill) => "prefill_allreduce",
            Figure::AllReduce(Phase::Decode) => "decode_allreduce",
            Figure::ContextRing => "prefill_ring",
            Figure::ContextRingBytes => "prefill_ring_bytes",
            Figure::ContextGather => "kv_gather",
            Figure::ContextGatherBytes => "kv_gather_bytes",
            Figure::ExpertAssigned => "moe_assigned",
            Figure::DecodeStep => "decode_step",
            Figure::DecodeComm => "decode_comm",
            Figure::Run => "run",
            Figure::Membw => "membw",
            Figure::MembwStream => "membw_stream",
            Figure::Dispatch => "dispatch",
            Figure::Op(_)
            | Figure::OpBlock(_)
            | Figure::OpInPlaceBlock(_)
            | Figure::AllReduceCalls(_)
            | Figure::AllReduceTotal(_)
            | Figure::Expert(..) => return None,
        })
    }

    /// The figure called `name` in a records file, if any.
    pub fn from_name(name: &str) -> Option<Figure> {
        if let Some(f) = FIXED.iter().find(|f| f.fixed_name() == Some(name)) {
            return Some(*f);
        }
        if let Some(op) = name.strip_suffix(IN_PLACE_BLOCK) {
            return Op::from_name(op).map(Figure::OpInPlaceBlock);
        }
        if let Some(op) = name.strip_suffix(BLOCK) {
            return Op::from_name(op).map(Figure::OpBlock);
        }
        if let Some(op) = Op::from_name(name) {
            return Some(Figure::Op(op));
        }
        if let Some(phase) = name.strip_suffix(CALLS).and_then(Phase::from_name) {
            return Some(Figure::AllReduceCalls(phase));
        }
        if let Some(phase) = name.strip_suffix(TOTAL).and_then(Phase::from_name) {
            return Some(Figure::AllReduceTotal(phase));
        }
        let (phase, rest) = match name.strip_prefix(expert_prefix(Phase::Decode)) {
            Some(rest) => (Phase::Decode, rest),
            None => (Phase::Prefill, name),
        };
        rest.strip_prefix(MOE).and_then(ExpertPart::from_name).map(|part| Figure::Expert(phase, part))
    }
}

/// What an expert figure's name starts with in `phase` (prefill's carry no prefix).
fn expert_prefix(phase: Phase) -> &'static str {
    match phase {
        Phase::Prefill => "",
        Phase::Decode => "decode_",
    }
}

impl std::fmt::Display for Figure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl Serialize for Figure {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for Figure {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Figure::from_name(&name).ok_or_else(|| serde::de::Error::custom(format!("unknown figure `{name}`")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_figure() -> Vec<Figure> {
        let mut all: Vec<Figure> = FIXED.to_vec();
        for op in Op::ALL {
            all.extend([Figure::Op(op), Figure::OpBlock(op), Figure::OpInPlaceBlock(op)]);
        }
        for phase in Phase::ALL {
            all.extend([Figure::AllReduceCalls(phase), Figure::AllReduceTotal(phase)]);
            all.extend(ExpertPart::ALL.map(|part| Figure::Expert(phase, part)));
        }
        all
    }

    #[test]
    fn every_figure_reads_back_from_its_name_and_no_two_share_one() {
        let all = every_figure();
        let names: std::collections::BTreeSet<String> = all.iter().map(|f| f.name()).collect();
        assert_eq!(names.len(), all.len(), "two figures share a name");
        for f in all {
            assert_eq!(Figure::from_name(&f.name()), Some(f), "{f:?}");
            assert_eq!(serde_json::from_str::<Figure>(&serde_json::to_string(&f).unwrap()).unwrap(), f);
        }
        assert_eq!(Figure::from_name("no-such@block"), None);
        assert_eq!(Figure::from_name("decode_moe_nothing"), None);
    }

    #[test]
    fn the_names_are_those_records_files_hold() {
        let names: Vec<String> = [
            Figure::OpBlock(Op::AllReduce),
            Figure::OpInPlaceBlock(Op::AllGather),
            Figure::AllReduceCalls(Phase::Decode),
            Figure::AllReduceTotal(Phase::Prefill),
            Figure::Expert(Phase::Prefill, ExpertPart::Compute),
            Figure::Expert(Phase::Decode, ExpertPart::SentBytes),
            Figure::Op(Op::HostToDevice),
        ]
        .iter()
        .map(|f| f.name())
        .collect();
        let expected = [
            "all-reduce@block",
            "all-gather@inplace@block",
            "decode_allreduce_calls",
            "prefill_allreduce_total",
            "moe_compute",
            "decode_moe_sent_bytes",
            "host-to-device",
        ];
        assert_eq!(names, expected);
    }
}
