#!/usr/bin/env python3
"""The GPU half of ci/gpu-check.sh: checks parlab's GPU runs against transformers on the same GPU.

Reads the manifests `parlab run ci/gpu-suite` wrote, then with transformers (an implementation
nobody here wrote) on the same GPU and the same seeded checkpoint and prompt:
  1. greedy-decodes in float32 and checks that parlab's CUDA float32 tokens, and the CPU run's,
     equal transformers' tokens;
  2. times transformers' eager decode step (CUDA events, KV cache on, batch 1, the median of 59
     steps after 4 of warm-up) and prints parlab's CUDA step against it as a ratio (RATIO lines;
     timing is never a pass/fail here; the issue aims at <= 0.5x for the world-1 float32 step);
  3. prints the bfloat16 run's grade and the 2-rank tensor split's exactness;
  4. checks that the register holds the topology matrix;
  5. prints the pinned copies' per-call times (CUDA events) against PyTorch's anchors (RATIO);
  6. NCCL: the world-1 sweep (1 KiB to 512 MiB, every op out of place and in place) ran with no
     wrong result and recorded NCCL's version and transport; its all-reduce op times against
     nccl-tests 2.19.6's on this machine (../shared/device/README.md; RATIO lines); world-2 NCCL
     runs are NOT_RUN with "1 GPU" in the probe; the world-1 tensor decode over NCCL gives
     transformers' tokens (checked with the other float32 runs in 1).
Prints PASS/FAIL per check (tokens, runs, topology) and RATIO/INFO lines; exits 1 on any FAIL.
"""
import argparse, glob, json, os, statistics, sys

failures = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def manifests(folder):
    out = []
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        try:
            m = json.load(open(path))
        except Exception:
            continue
        if isinstance(m, dict) and "plan" in m:
            out.append(m)
    return out


def describe(m):
    p = m["plan"]
    dtype = p["workload"].get("dtype", "float32")
    step = " step=graph" if p.get("step") == "graph" else ""
    model = ((p.get("model") or {}).get("name") or "") + " " if m["kind"] == "decode" else ""
    return f'{m["experiment"]} {model}{p["layout"]["strategy"]} world={p["layout"]["world"]} {p.get("device", "cpu")} {dtype}{step}'


# The captured-step anchors measured on the H200 with PyTorch (../shared/device/): GPT-2 124M
# shape, batch 1, a plain-torch step over a static KV cache captured as one CUDA graph.
GRAPH_ANCHOR_S = {"float32": 0.81e-3, "bfloat16": 0.79e-3}


def hf_model(ckpt_dir, device):
    """transformers' model of a checkpoint in float32 on `device` (loaded once per checkpoint)."""
    import torch
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(ckpt_dir, dtype=torch.float32).to(device).eval()


def hf_decode(model, prompt, new_tokens, device):
    import torch
    ids = torch.tensor([prompt], device=device)
    tokens, times = [], []
    with torch.no_grad():
        out = model(ids, use_cache=True)
        past, nxt = out.past_key_values, int(out.logits[0, -1].argmax())
        tokens.append(nxt)
        for _ in range(new_tokens - 1):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = model(torch.tensor([[nxt]], device=device), past_key_values=past, use_cache=True)
            nxt = int(out.logits[0, -1].argmax())
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
            past = out.past_key_values
            tokens.append(nxt)
    return tokens, times


# nccl-tests 2.19.6, all_reduce_perf -g 1 on the H200 of ../shared/device/README.md: out-of-place
# time per size (the figure a world-1 sweep there should meet; 6.5-8.5 us from 8 B to 8 MiB).
NCCL_TESTS_ANCHORS_US = {32 << 20: 19.6, 512 << 20: 256.8}


# PyTorch with CUDA events on the H200 of ../shared/device/README.md, one pinned copy per event
# pair (median): the anchors issue 25 asks parlab's per-call link figure to meet within 15%.
LINK_ANCHORS_US = {("host-to-device", 1 << 20): 31.5, ("host-to-device", 256 << 20): 4850.0,
                   ("device-to-host", 1 << 20): 24.6, ("device-to-host", 256 << 20): 4870.0}


def check_link(runs):
    for m in runs:
        if m["experiment"] in ("host-device-link", "gpu-memory"):
            check(m["status"] == "ok", f'{describe(m)} ran: {m["status"]} {m.get("reason") or ""}'.strip())
        if m["kind"] != "collectives" or m["status"] != "ok":
            continue
        for r in m["summary"]["collectives"]["rows"]:
            anchor = LINK_ANCHORS_US.get((r["op"], r["size_bytes"]))
            if anchor:
                per_call = r["time_s"]["median"] * 1e6
                print(f'RATIO pinned {r["op"]} {r["size_bytes"]} B per call (CUDA events): {per_call:.1f} us = {per_call / anchor:.2f}x the anchor {anchor} us (aim within 15%)')


def check_nccl(runs):
    nccl = [m for m in runs if m["plan"].get("backend") == "nccl"]
    sweeps = [m for m in nccl if m["kind"] == "collectives" and m["status"] == "ok"]
    check(len(sweeps) == 1, f"one NCCL collectives sweep measured (found {len(sweeps)})")
    for m in sweeps:
        rows = m["summary"]["collectives"]["rows"]
        sizes = sorted({r["size_bytes"] for r in rows if r["op"] == "all-reduce"})
        check(sizes[:1] == [1024] and sizes[-1:] == [512 << 20], f"NCCL all-reduce swept {sizes[0] if sizes else '-'} to {sizes[-1] if sizes else '-'} B")
        check(all(r["wrong"] == 0 for r in rows), "every NCCL result checked with #wrong 0")
        in_place = [r for r in rows if r.get("in_place_op_time_s")]
        check(len(in_place) >= 4 * len(sizes), f"in-place times recorded for {len(in_place)} op-size rows")
        launch = m.get("launch") or {}
        check(bool(launch.get("nccl")), "the manifest records each rank's NCCL (version, library, transport)")
        print("INFO NCCL transport: " + launch.get("transport", ""))
        for r in rows:
            if r["op"] != "all-reduce":
                continue
            own = (r.get("op_time_s") or {}).get("median")
            inp = (r.get("in_place_op_time_s") or {}).get("median")
            us = lambda t: f"{t * 1e6:.1f} us" if t is not None else "not recorded"
            line = f'nccl all-reduce {r["size_bytes"]} B: out of place {us(own)}, in place {us(inp)}'
            anchor = NCCL_TESTS_ANCHORS_US.get(r["size_bytes"])
            if anchor and own is not None:
                print(f"RATIO {line} = {own * 1e6 / anchor:.2f}x nccl-tests' {anchor} us")
            else:
                print("INFO " + line + (" (nccl-tests there: 6.5-8.5 us up to 8 MiB)" if r["size_bytes"] <= 8 << 20 else ""))
    for m in nccl:
        if m["plan"]["layout"]["world"] >= 2:
            check(m["status"] == "not_run" and "1 GPU" in (m.get("reason") or ""), f'{describe(m)} over NCCL is NOT_RUN with "1 GPU" in the probe: {m.get("reason", "")[:160]}')
    decode = [m for m in nccl if m["kind"] == "decode" and m["plan"]["layout"]["world"] == 1]
    check(len(decode) == 1 and decode[0]["status"] == "ok", "the world-1 tensor decode over NCCL ran")
    for m in (m for m in decode if m["status"] == "ok"):
        s = m.get("summary") or {}
        s = s.get("decode", s)
        print(f'INFO {describe(m)} over NCCL: all-reduces per step {s.get("collectives_per_step")}, step median {(s.get("step_s") or {}).get("median", 0) * 1e3:.3f} ms')


def checkpoint(m):
    weights = m["plan"]["model"]["weights"]
    ckpt = (weights.get("seeded") or weights.get("checkpoint") or weights).get("path")
    return os.path.dirname(ckpt) if ckpt and ckpt.endswith(".safetensors") else ckpt


def prompt_of(state, answer_id):
    """The prompt ids as parlab drew them: the reference file's prompt, saved beside its logits."""
    for path in glob.glob(os.path.join(state, "reference", f"{answer_id}-*.json")):
        meta = json.load(open(path))
        if "prompt" in meta:
            return meta["prompt"]
    return None


def check_model(ckpt, decode, state):
    """Tokens of every float32 run of one checkpoint against transformers' on the GPU; step ratios."""
    import torch
    model = decode[0]["plan"]["model"].get("name") or os.path.basename(ckpt)
    prompt = prompt_of(state, decode[0]["answer_id"])
    check(prompt is not None, f"{model}: found parlab's prompt ids in its reference cache")
    if prompt is None:
        return
    new_tokens = decode[0]["plan"]["workload"]["new_tokens"]
    hf = hf_model(ckpt, "cuda")
    hf_tokens, _ = hf_decode(hf, prompt, new_tokens, "cuda")
    # The step time from a longer generation, its first steps left out as warm-up.
    _, hf_times = hf_decode(hf, prompt, 64, "cuda")
    del hf
    torch.cuda.empty_cache()
    hf_step = statistics.median(hf_times[4:])
    print(f"{model}: transformers eager on {torch.cuda.get_device_name(0)}: step median {hf_step * 1e3:.3f} ms over {len(hf_times) - 4} steps (min {min(hf_times) * 1e3:.3f} ms)")

    def tokens(m):
        return (m.get("answer") or {}).get("tokens") or [[]]

    for m in decode:
        dtype = m["plan"]["workload"].get("dtype", "float32")
        ex = (m.get("answer") or {}).get("exactness") or {}
        grade = f'tokens_equal={ex.get("tokens_equal")} max_logit_diff={ex.get("max_logit_diff")} first_difference={ex.get("first_difference")}'
        if dtype == "float32":
            check(tokens(m) == [hf_tokens], f"{describe(m)}: tokens equal transformers' on the GPU ({grade})")
        else:
            print(f"INFO {describe(m)}: against the float32 reference: {grade}; tokens equal transformers' fp32: {tokens(m) == [hf_tokens]}")
    for m in decode:
        if m["plan"].get("device") != "cuda":
            continue
        s = m["summary"]["decode"] if "decode" in m["summary"] else m["summary"]
        step = s["step_s"]["median"]
        world = m["plan"]["layout"]["world"]
        # A ratio measured side by side, printed, never a pass/fail on time (the issue's aim for
        # GPT-2's world-1 float32 step is <= 0.5x).
        aim = " (aim <= 0.5x)" if world == 1 and m["plan"]["workload"].get("dtype") == "float32" and "gpt2" in ckpt else ""
        print(f"RATIO {describe(m)}: step {step * 1e3:.3f} ms = {step / hf_step:.2f}x transformers' eager step{aim}")
    check_graphs(ckpt, decode)


def step_median(m):
    s = m["summary"]["decode"] if "decode" in m["summary"] else m["summary"]
    return s["step_s"]["median"]


def check_graphs(ckpt, decode):
    """Each replayed graph beside the eager run of its dtype (same script, same GPU), and GPT-2's
    against the captured-step anchors; ratios printed, never a pass/fail on time."""
    # The graph's own computation run eagerly: the unsplit model (a data split of world 1) over
    # MPI, not a world-1 tensor split over NCCL (25 NCCL calls a step) of the same checkpoint.
    eager = {m["plan"]["workload"].get("dtype", "float32"): m for m in decode
             if m["plan"].get("device") == "cuda" and m["plan"]["layout"]["world"] == 1 and m["plan"].get("step", "eager") == "eager"
             and m["plan"]["layout"]["strategy"] == "data" and m["plan"].get("backend") != "nccl"}
    for m in decode:
        if m["plan"].get("step") != "graph":
            continue
        dtype = m["plan"]["workload"].get("dtype", "float32")
        step = step_median(m)
        nodes = (m["summary"].get("decode") or m["summary"]).get("graph_nodes")
        print(f"INFO {describe(m)}: captured graph holds {nodes}")
        if dtype in eager:
            e = step_median(eager[dtype])
            print(f"RATIO {describe(m)}: captured step {step * 1e3:.3f} ms = {step / e:.2f}x parlab's eager step ({e * 1e3:.3f} ms)")
        if "gpt2" in ckpt and dtype in GRAPH_ANCHOR_S:
            print(f"RATIO {describe(m)}: captured step = {step / GRAPH_ANCHOR_S[dtype]:.2f}x the {GRAPH_ANCHOR_S[dtype] * 1e3:.2f} ms captured anchor (stretch aim <= 1.2x)")


def check_decode(decode, state):
    """Each checkpoint's decode runs against transformers on the GPU (tokens, step ratios)."""
    groups = {}
    for m in decode:
        groups.setdefault(checkpoint(m), []).append(m)
    for ckpt, group in groups.items():
        # One model's failure (transformers refusing the checkpoint, the GPU out of memory) is a
        # FAIL line; the other models and the link, NCCL and topology checks still run.
        try:
            check_model(ckpt, group, state)
        except Exception as e:
            check(False, f"{ckpt}: checking against transformers raised {e!r}"[:400])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parlab", required=True)
    ap.add_argument("--manifests", required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--subset", action="store_true",
                    help="a short rerun of some specs: every run ok, then the checks its runs allow (link ratios; tokens and step ratios of its decode runs)")
    args = ap.parse_args()
    try:
        import torch
        # The anchors were measured on an H200: a ratio from another GPU says so here.
        print(f"INFO GPU: {torch.cuda.get_device_name(0)}; the anchors (RATIO lines) were measured on an NVIDIA H200", flush=True)
    except Exception as e:
        print(f"INFO GPU: unknown ({e})", flush=True)
    runs = manifests(args.manifests)
    for m in runs:
        s = (m.get("summary") or {}).get("decode") or (m.get("summary") or {})
        step = s.get("step_s", {}).get("median") if isinstance(s, dict) else None
        print(f'run {describe(m)}: {m["status"]}' + (f' step median {step * 1e3:.3f} ms' if step else '') +
              (f' ({m["reason"]})' if m.get("reason") else ''))
    decode = [m for m in runs if m["kind"] == "decode" and m["status"] == "ok"]
    if args.subset:
        check(bool(runs) and all(m["status"] == "ok" for m in runs), f"every run ok ({len(runs)} runs)")
        check_decode(decode, args.state)
        check_link(runs)
        return
    cuda = [m for m in decode if m["plan"].get("device") == "cuda"]
    check(len(cuda) >= 3, f"parlab measured {len(cuda)} CUDA decode runs (want fp32, bf16, 2-rank tensor)")
    graphs = [m for m in runs if m["kind"] == "decode" and m["plan"].get("step") == "graph"]
    check(bool(graphs) and all(m["status"] == "ok" for m in graphs),
          f"every captured-graph decode run ok: {', '.join(describe(m) + ' ' + m['status'] for m in graphs) or 'none in the suite'}")
    # The cheap checks first: a time limit that cuts the transformers decodes loses only those.
    check_link(runs)
    check_nccl(runs)
    register = os.path.join(os.path.dirname(args.manifests.rstrip("/")), "report", "evidence.md")
    text = open(register).read() if os.path.exists(register) else ""
    check("GPU0" in text, "the register holds the nvidia-smi topo -m matrix")
    check_decode(decode, args.state)


if __name__ == "__main__":
    main()
    print(f"gpu_check: {len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
