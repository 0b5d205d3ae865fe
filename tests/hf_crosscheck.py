#!/usr/bin/env python3
"""Cross-check parlab's GPT-2 against Hugging Face transformers (an implementation nobody here wrote).

For two GPT-2-family configs (and a mixture-of-experts one, below) (the real 124M shape and a tiny one whose 501-token vocabulary
splits unevenly over 2 ranks) this script:

1. makes a seeded checkpoint with `parlab model init` and checks that transformers'
   `GPT2LMHeadModel.from_pretrained` loads it with no missing, unexpected or mismatched keys;
2. decodes greedily in transformers (float32, full recompute each step) and keeps the logits;
3. runs parlab through `parlab run` on a temporary spec (PARLAB_MANIFESTS / PARLAB_STATE point
   to a temp dir): tensor world 1 and 2, pipeline 2 stages with 2 sequences in flight, a
   context split (ring-attention prefill) over 2 ranks, decoding on rank 0 and as a tensor split;
4. checks that every run's tokens equal transformers' tokens, that parlab's unsplit logits (the
   reference parlab caches at $PARLAB_STATE/reference/<answer_id>-<model digest>.f32, the same code as a world-1
   run) are within TOL of transformers' at every step, and that each split run's largest logit
   difference from that reference (manifest answer.exactness.max_logit_diff) is within TOL too;
   it also checks that the checkpoint `parlab run` generated has the same bytes as `model init`'s.

For three Llama-family configs with grouped-query attention (8 query heads over 2 key/value
heads): a Llama layout with Llama 3's rotary scaling (`rope_scaling` of type llama3, set so every
branch of it applies to the tiny head width), a Qwen2 layout (q/k/v biases) and a Qwen3 layout
(per-head q/k RMSNorm, `head_dim` 16 where hidden / heads is 8), it makes the
checkpoint with `parlab model init`, loads it with transformers' `AutoModelForCausalLM` (float32;
no missing, unexpected or mismatched keys), and checks that parlab's tokens equal transformers'
`generate()` (greedy) and its logits are within TOL for world 1, tensor 2 (the key/value heads
split), tensor 4 and 8 (replicated), pipeline 2, data 2 and context 2 (ring-attention prefill
over the key/value heads, decoding on rank 0 and as a tensor split); that every tensor split makes 2L
collectives per decode step, plus the head's all-gather over two or more ranks; and that each rank's KV cache per token is
2 · layers · (its key/value heads) · head_dim · 4 bytes: halved at tensor 2 and flat beyond.
The same checks run on a seeded Llama whose config.json says `tie_word_embeddings: true` (its seeded
checkpoint, like every seeded one, carries its own `lm_head.weight` and a config saying so, and parlab
must read that head, as transformers does from that folder), and on a tied-head Llama given as a checkpoint folder, as transformers saves one
(config.json `tie_word_embeddings: true`, no `lm_head.weight`; the seeded input table scaled by
1/4 so the tokens vary): transformers' head must be the embedding table, and parlab's tokens and
logits must match it. Each Llama-family answer must have more than half its tokens distinct.
A Mixtral layout (the same attention, 4 SwiGLU experts of width 96 and top-2 routing in place of
the MLP, Hugging Face's `block_sparse_moe` names) gets the same checks, transformers'
`MixtralForCausalLM` as the reference, and one run more: an expert split over 2 ranks (each
rank holding 2 experts, its layout saying which); its tensor splits divide every expert's
width as the SwiGLU's, so they too make 2L + 1 collectives per step.

bfloat16, for the Llama and Qwen2 layouts: parlab decodes in bfloat16 (libtorch's operations on
the CPU) at world 1, tensor 2, 4 and 8, pipeline 2 and data 2, beside the float32 runs above, its
twins. parlab's own precision audit (`parlab audit --json`, its `precision` rows) must pair each
with its twin and grade it TOKENS_EQUAL or NEAR_TIE (a token changed only where float32's top-2
margin was below the audit's `fragile_factor` x the bf16 drift), with a drift above 0 (it did
compute in bf16). transformers loads the checkpoint with dtype=torch.bfloat16 and generate()s;
parlab's bf16 tokens must equal those up to the first step where transformers' float32 top-2
margin is a near tie by the same rule, the drift being the larger of parlab's (from the audit)
and transformers' own (its bf16 logits along float32's tokens against its float32 logits): past
a near tie either rounding may pick either token, so bitwise or full-length equality is not
asked. The context split, overlapped all-reduces and the Mixtral layout compute in float32 only:
a bfloat16 spec of each must be refused before launch (exit 2, the reason, no manifest).

For a mixture-of-experts config (the tiny one with 4 experts of width 96, top 2) transformers
has no class, so the reference is transformers' GPT-2 with every block's MLP replaced by a
mixture written here in plain torch from the checkpoint's tensors (softmax router over every
expert, top-k, weights renormalised, each expert a GPT-2 MLP computed on every token and
weighted); the other weights load through `load_state_dict`, which must find exactly the dense
MLP's keys missing and the mixture's keys unexpected. parlab's expert split at world 1 and 2 is
checked against it with the router as drawn and with `routing_skew: 1.5`.

Tolerance: TOL = 2e-3 absolute on logits whose standard deviation is about 10 (the seeded
recipe's). The two implementations differ only in float32 summation order (MKL blocking,
transformers' SDPA kernel against parlab's explicit softmax, split partial sums), which moves
logits by about 1e-5 relative, i.e. ~1e-4 here; a real mistake (a bias added twice, a missing
layer-norm parameter, a wrong head slice) moves them by 1e-2 to 10. TOL also stays below half
the smallest top-2 margin printed, so it cannot hide a changed token.

Prints PASS/FAIL per check and exits 1 on any failure. About three minutes on 2 cores (measured
2026-12-04 on a shared 2-core machine: 149 s without the bfloat16 checks, 189 s with them).
"""
import hashlib, json, os, pathlib, shutil, subprocess, sys, tempfile

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel
from transformers.activations import ACT2FN

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILT = ROOT / "target" / "release" / "parlab"
PARLAB = BUILT  # replaced by a private copy in main(), so a rebuild during the check cannot pull it away
TOL = 2e-3
NEW_TOKENS = 8
PROMPT = {"length": 12, "seed": 3}
TINY = {"model_type": "gpt2", "activation_function": "gelu_new", "n_layer": 2, "n_head": 4, "n_embd": 64,
        "vocab_size": 501, "n_positions": 64, "layer_norm_epsilon": 1e-5, "n_inner": None}
TINY_MOE = dict(TINY, num_local_experts=4, num_experts_per_tok=2, moe_intermediate_size=96)
TINY_LLAMA = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
              "hidden_size": 64, "intermediate_size": 128, "vocab_size": 501, "max_position_embeddings": 64,
              "rms_norm_eps": 1e-5, "hidden_act": "silu", "rope_theta": 10000.0,
              "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 16}}
TINY_QWEN2 = {"model_type": "qwen2", "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
              "hidden_size": 64, "intermediate_size": 128, "vocab_size": 501, "max_position_embeddings": 64,
              "rms_norm_eps": 1e-6, "hidden_act": "silu", "rope_theta": 1000000.0, "use_sliding_window": False}
# Qwen3: per-head RMSNorm on queries and keys, and a head width (16) that is not hidden / heads (8).
TINY_QWEN3 = {"model_type": "qwen3", "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
              "head_dim": 16, "hidden_size": 64, "intermediate_size": 128, "vocab_size": 501, "max_position_embeddings": 64,
              "rms_norm_eps": 1e-6, "hidden_act": "silu", "rope_theta": 1000000.0, "use_sliding_window": False,
              "attention_bias": False, "tie_word_embeddings": False}
# Mixtral: Llama's blocks with a mixture of 4 SwiGLU experts (width 96, top 2) in place of the MLP.
TINY_MIXTRAL = {"model_type": "mixtral", "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
                "hidden_size": 64, "intermediate_size": 96, "vocab_size": 501, "max_position_embeddings": 64,
                "rms_norm_eps": 1e-5, "hidden_act": "silu", "rope_theta": 1000000.0, "sliding_window": None,
                "num_local_experts": 4, "num_experts_per_tok": 2, "router_jitter_noise": 0.0, "tie_word_embeddings": False}
# bfloat16 (parlab computes it through libtorch on the CPU) at every layout it is offered for.
HALF_LAYOUTS = [("tensor", 1, 1, None), ("tensor", 2, 1, None), ("tensor", 4, 1, None), ("tensor", 8, 1, None),
                ("pipeline", 2, 2, None), ("data", 2, 1, None)]
HALF_GRADES = ("TOKENS_EQUAL", "NEAR_TIE")  # the precision audit's passing grades
HALF_RUNS, HALF_REFUSED = "bfloat16 runs", "bfloat16 refused"
half_steps_compared = []  # per bfloat16 run: the steps its tokens were held to transformers' bfloat16 tokens
failures = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def hf_greedy(ckpt, prompt, n, model=None):
    if model is None:
        model, info = GPT2LMHeadModel.from_pretrained(ckpt, output_loading_info=True)
        problems = {k: v for k, v in info.items() if v}
        check(not problems, f"transformers loads {ckpt} without missing/unexpected keys {problems or ''}")
    model.eval()
    ids = torch.tensor([prompt])
    tokens, logits = [], []
    with torch.no_grad():
        for _ in range(n):
            row = model(ids).logits[0, -1].float()
            tok = int(row.argmax())
            tokens.append(tok)
            logits.append(row.numpy())
            ids = torch.cat([ids, torch.tensor([[tok]])], dim=1)
    return tokens, np.stack(logits)


class Mixture(torch.nn.Module):
    """One layer's mixture of experts, from the checkpoint's tensors (Mixtral's routing)."""

    def __init__(self, tensors, layer, cfg, skew):
        super().__init__()
        p = f"transformer.h.{layer}.mlp."
        self.n, self.k = cfg["num_local_experts"], cfg["num_experts_per_tok"]
        self.gate = tensors[p + "gate.weight"]
        self.bias = torch.tensor([skew * (1 - 2 * e / (self.n - 1)) for e in range(self.n)])
        names = ["c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias"]
        self.experts = [[tensors[f"{p}experts.{e}.{n}"] for n in names] for e in range(self.n)]
        self.act = ACT2FN[cfg["activation_function"]]

    def forward(self, x):
        probs = torch.softmax(x @ self.gate.T + self.bias, dim=-1)
        weights, chosen = probs.topk(self.k, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        out = torch.zeros_like(x)
        for e, (w_fc, b_fc, w_proj, b_proj) in enumerate(self.experts):
            y = self.act(x @ w_fc + b_fc) @ w_proj + b_proj
            out = out + (weights * (chosen == e)).sum(-1, keepdim=True) * y
        return out


def hf_mixture_model(ckpt, cfg, skew):
    """transformers' GPT-2 with every MLP replaced by a Mixture of the checkpoint's experts."""
    tensors = load_file(str(ckpt / "model.safetensors"))
    model = GPT2LMHeadModel(GPT2Config(**{k: v for k, v in cfg.items() if k != "model_type"}, tie_word_embeddings=False))
    for layer, block in enumerate(model.transformer.h):
        block.mlp = Mixture(tensors, layer, cfg, skew)
    info = model.load_state_dict(tensors, strict=False)
    missing = [k for k in info.missing_keys if ".attn.bias" not in k and ".attn.masked_bias" not in k]
    unexpected = [k for k in info.unexpected_keys if ".mlp.gate." not in k and ".mlp.experts." not in k]
    leftover = f" (missing {missing}, unexpected {unexpected})" if missing or unexpected else ""
    check(not leftover and any(".mlp.experts." in k for k in info.unexpected_keys),
          f"transformers' GPT-2 takes every tensor of {ckpt} but the mixture's{leftover}")
    return model


def moe_crosscheck(model_dir, work):
    print(f"== tiny mixture-of-experts GPT-2: {model_dir}", flush=True)
    cfg = json.loads((model_dir / "config.json").read_text())
    ckpt = work / "init"
    work.mkdir(parents=True)
    subprocess.run([str(PARLAB), "model", "init", str(model_dir), "--seed", "0", "--out", str(ckpt)], check=True)
    for skew in (0.0, 1.5):
        state, manifests = work / f"state-{skew}", work / f"manifests-{skew}"
        manifests.mkdir(parents=True)
        found = parlab_runs(model_dir, state, manifests, [("expert", 1, 1, None), ("expert", 2, 1, None)], {"routing_skew": skew})
        doc1 = found.get(("expert", 1, 1, None))
        if doc1 is None:
            check(False, f"skew {skew}: the world-1 expert run wrote a manifest")
            continue
        stem = state / "reference" / f'{doc1["answer_id"]}-{doc1["parlab"]["model"][:12]}'
        ref = json.loads(stem.with_suffix(".json").read_text())
        ref_logits = np.fromfile(stem.with_suffix(".f32"), dtype="<f4").reshape(len(ref["tokens"]), -1)
        hf_tokens, hf_logits = hf_greedy(str(ckpt), ref["prompt"], NEW_TOKENS, hf_mixture_model(ckpt, cfg, skew))
        diff = float(np.abs(hf_logits - ref_logits).max())
        print(f"   skew {skew}: reference tokens {hf_tokens}", flush=True)
        check(ref["tokens"] == hf_tokens, f"skew {skew}: parlab unsplit mixture tokens equal the torch mixture's ({ref['tokens']})")
        check(diff <= TOL, f"skew {skew}: parlab unsplit mixture logits within {TOL} of the torch mixture's (largest difference {diff:.2e})")
        for key, doc in sorted(found.items()):
            ex = doc["answer"]["exactness"] if doc["status"] == "ok" else None
            check(ex is not None and doc["answer"]["tokens"] == [hf_tokens] and ex["max_logit_diff"] <= TOL,
                  f"skew {skew}: {key} tokens equal the torch mixture's, logits within {TOL} of parlab unsplit ({ex and ex['max_logit_diff']})")


def decode_spec(model_dir, name, strategy, world, sequences, decode, extra=None):
    """A decode spec (as JSON, which is YAML) of the cross-check's prompt and token count."""
    spec = {"name": name, "kind": "decode", "model": str(model_dir),
            "strategy": strategy, "world": world, "sequences": sequences, "link": "mpi-shm",
            "prompt": PROMPT, "new_tokens": NEW_TOKENS, "repetitions": 1, "warmup": 0, "timeout": "5m", **(extra or {})}
    if decode:
        spec["decode_strategy"] = decode
    return json.dumps(spec)


def parlab_runs(model_dir, state, manifests, runs, extra=None):
    """Runs `runs` through `parlab run`; returns the manifests of the spec's dtype (float32 unless
    `extra` says otherwise) in `manifests`, by (strategy, world, sequences, decode strategy)."""
    dtype = (extra or {}).get("dtype", "float32")
    spec_dir = pathlib.Path(tempfile.mkdtemp(dir=state.parent))
    paths = []
    for i, (strategy, world, sequences, decode) in enumerate(runs):
        path = spec_dir / f"{i}.yaml"
        path.write_text(decode_spec(model_dir, f"crosscheck-{strategy}-{world}-{dtype}-{i}", strategy, world, sequences, decode, extra))
        paths.append(str(path))
    env = dict(os.environ, PARLAB_STATE=str(state), PARLAB_MANIFESTS=str(manifests))
    proc = subprocess.run([str(PARLAB), "run", "--no-report", *paths], env=env, capture_output=True, text=True)
    check(proc.returncode == 0, f"parlab run exits 0 (got {proc.returncode}: {proc.stderr.strip()[-400:]})")
    found = {}
    for m in sorted(manifests.glob("*.json")):
        doc = json.loads(m.read_text())
        if doc["plan"]["workload"].get("dtype", "float32") != dtype:
            continue
        layout = doc["layout"]
        found[(layout["strategy"], layout["world"], layout.get("sequences"), (layout.get("decode") or {}).get("strategy"))] = doc
    return found


def refused_in_half(model_dir, work, what, strategy, world, extra=None):
    """A bfloat16 spec parlab computes in float32 only (a context or expert split, overlapped
    all-reduces, a mixture model) must be refused before anything runs: exit 2, the reason, no manifest."""
    work.mkdir(parents=True, exist_ok=True)
    spec = work / f"refused-{strategy}-{world}-{len(list(work.glob('refused-*.yaml')))}.yaml"
    spec.write_text(decode_spec(model_dir, f"refused-{strategy}-{world}", strategy, world, 1, None, dict(extra or {}, dtype="bfloat16")))
    manifests = work / (spec.stem + "-manifests")
    env = dict(os.environ, PARLAB_STATE=str(work / "refused-state"), PARLAB_MANIFESTS=str(manifests))
    proc = subprocess.run([str(PARLAB), "run", "--no-report", str(spec)], env=env, capture_output=True, text=True)
    reason = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "no reason given"
    wrote = sorted(manifests.glob("*.json")) if manifests.exists() else []
    check(proc.returncode == 2 and "bfloat16" in reason and "use dtype: float32" in reason and not wrote,
          f"bfloat16 {what} is refused with exit 2 (got {proc.returncode}) and its reason, writing no manifest ({reason})")


def half_crosscheck(model_dir, ckpt, work, twins, prompt, f32_tokens, f32_logits):
    """bfloat16 beside float32 at every layout parlab computes it in: each parlab answer graded by
    parlab's own precision audit against its float32 twin (TOKENS_EQUAL or NEAR_TIE pass), and its
    tokens equal to transformers' bfloat16 generate() up to the first step at which transformers'
    float32 top-2 margin is a near tie by the audit's rule (below fragile_factor x the bf16 drift)."""
    state, manifests = work / "state", work / "manifests"
    found = parlab_runs(model_dir, state, manifests, HALF_LAYOUTS, {"dtype": "bfloat16"})
    proc = subprocess.run([str(PARLAB), "audit", "--json", "--manifests", str(manifests)], capture_output=True, text=True)
    check(proc.returncode == 0, f"parlab audit over the float32 and bfloat16 runs exits 0 (got {proc.returncode}: {proc.stderr.strip()[-300:]})")
    if proc.returncode != 0:
        return
    audit = json.loads(proc.stdout)
    factor, rows = audit["fragile_factor"], {r["run"]: r for r in audit["precision"]}
    check(len(rows) == len(HALF_LAYOUTS), f"the precision audit grades {len(HALF_LAYOUTS)} bfloat16 runs ({len(rows)})")
    model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.bfloat16).eval()
    check(all(p.dtype == torch.bfloat16 for p in model.parameters()), "transformers holds every weight in bfloat16")
    with torch.no_grad():
        hf_half = model.generate(torch.tensor([prompt]), max_new_tokens=NEW_TOKENS, do_sample=False)[0, len(prompt):].tolist()
        # bfloat16's logits along float32's tokens, so each step compares with float32's own.
        along = model(torch.tensor([prompt + f32_tokens[:-1]])).logits[0, len(prompt) - 1:].float().numpy()
    hf_drift = float(np.abs(along - f32_logits).max())
    top2 = np.sort(f32_logits, axis=1)
    margins = top2[:, -1] - top2[:, -2]
    print(f"   transformers bfloat16 tokens {hf_half}; its drift from float32 along float32's tokens {hf_drift:.3e}; "
          f"float32 top-2 margins {np.round(margins, 3).tolist()}", flush=True)
    for key in HALF_LAYOUTS:
        doc = found.get(key)
        if doc is None or doc["status"] != "ok":
            check(False, f"bfloat16 {key} ran ok ({doc and doc.get('reason')})")
            continue
        row, twin = rows.get(doc["run_id"][:12]), twins.get(key)
        check(row is not None and twin is not None and row["twin"] == twin["run_id"][:12],
              f"bfloat16 {key}: the precision audit pairs it with the float32 run of its layout ({row and row['twin']})")
        if row is None:
            continue
        margin = "n/a" if row["twin_margin"] is None else f"{row['twin_margin']:.3e}"
        check(row["grade"] in HALF_GRADES and row["drift"] > 0,
              f"bfloat16 {key}: graded {row['grade']} (tokens equal to float32's for {row['equal_steps']} of {row['steps']} steps, "
              f"the float32 margin there {margin}; drift from float32 {row['drift']:.2e}, above 0 so it computed in bf16)")
        drift = max(row["drift"], hf_drift)
        upto = next((k for k, m in enumerate(margins) if m < factor * drift), NEW_TOKENS)
        half_steps_compared.append(upto)
        seqs = doc["answer"]["tokens"]
        agree = min(next((k for k, (a, b) in enumerate(zip(s, hf_half)) if a != b), NEW_TOKENS) for s in seqs)
        check(all(s[:upto] == hf_half[:upto] for s in seqs),
              f"bfloat16 {key}: tokens equal transformers' bfloat16 generate() for the first {upto} of {NEW_TOKENS} steps (each "
              f"sequence), up to the first float32 top-2 margin below {factor} x drift {drift:.2e} ({[s[:upto] for s in seqs]}; "
              f"in fact equal for {agree})")


def crosscheck(label, model_dir, work):
    print(f"== {label}: {model_dir}", flush=True)
    state, manifests = work / "state", work / "manifests"
    manifests.mkdir(parents=True)
    ckpt = work / "init"
    subprocess.run([str(PARLAB), "model", "init", str(model_dir), "--seed", "0", "--out", str(ckpt)], check=True)
    runs = [("tensor", 1, 1, None), ("tensor", 2, 1, None), ("pipeline", 2, 2, None), ("context", 2, 1, None),
            ("context", 2, 1, "tensor")]
    found = parlab_runs(model_dir, state, manifests, runs)
    generated = next(state.glob("checkpoints/*/model.safetensors"), None)
    check(generated is not None and sha256(generated) == sha256(ckpt / "model.safetensors"),
          "the checkpoint `parlab run` generated has the same bytes as `parlab model init`'s")
    any_run = next(iter(found.values()), None)
    if any_run is None:
        check(False, "parlab wrote manifests")
        return
    stem = state / "reference" / f'{any_run["answer_id"]}-{any_run["parlab"]["model"][:12]}'
    ref = json.loads(stem.with_suffix(".json").read_text())
    ref_tokens, prompt = ref["tokens"], ref["prompt"]
    ref_logits = np.fromfile(stem.with_suffix(".f32"), dtype="<f4").reshape(len(ref_tokens), -1)
    hf_tokens, hf_logits = hf_greedy(str(ckpt), prompt, NEW_TOKENS)
    diff = float(np.abs(hf_logits - ref_logits).max())
    margins = np.sort(hf_logits, axis=1)
    min_margin = float((margins[:, -1] - margins[:, -2]).min())
    print(f"   transformers tokens {hf_tokens}; smallest top-2 margin {min_margin:.4f}")
    check(ref_tokens == hf_tokens, f"parlab unsplit tokens equal transformers' ({ref_tokens})")
    check(diff <= TOL, f"parlab unsplit logits within {TOL} of transformers' (largest difference {diff:.2e})")
    check(TOL < min_margin / 2, f"tolerance {TOL} is below half the smallest top-2 margin {min_margin:.4f}")
    for key in runs:
        doc = found.get(key)
        if doc is None or doc["status"] != "ok":
            check(False, f"{key} ran ok ({doc and doc.get('reason')})")
            continue
        ans = doc["answer"]
        ex = ans["exactness"]
        check(ans["tokens"] == [hf_tokens] and ex["tokens_equal"], f"{key} tokens equal transformers' (every sequence, every rank)")
        check(ex["max_logit_diff"] <= TOL, f"{key} logits within {TOL} of parlab unsplit (largest {ex['max_logit_diff']:.2e}; "
              f"so within {ex['max_logit_diff'] + diff:.2e} of transformers)")
        if key[0] == "tensor" or key[3] == "tensor":
            layers = json.loads((model_dir / "config.json").read_text())["n_layer"]
            # Two all-reduces per layer, and over two or more ranks the head's logits all-gathered.
            want = 2 * layers + (1 if key[1] > 1 else 0)
            check(doc["summary"]["decode"]["collectives_per_step"] == want, f"{key} makes {want} collectives per decode step")


def hf_causal(ckpt):
    """transformers' own class for the checkpoint's model_type, in float32, checked for unused or missing keys."""
    model, info = AutoModelForCausalLM.from_pretrained(ckpt, output_loading_info=True, dtype=torch.float32)
    problems = {k: v for k, v in info.items() if v}
    check(not problems, f"transformers loads {ckpt} as {type(model).__name__} without missing/unexpected keys {problems or ''}")
    return model.eval()


def tied_checkpoint(config, folder, embed_scale=0.25):
    """A checkpoint folder of a tied-embedding Llama as transformers saves one: `parlab model init`'s
    tensors without `lm_head.weight`, and config.json saying `tie_word_embeddings: true`. The input
    table is scaled by `embed_scale`: at the seeded N(0, 1) the current token's own row leads the
    residual stream and a tied head picks that token again at every step (a check that proves
    little); scaled down, the blocks lead and the tokens vary."""
    seed_dir = folder.parent / (folder.name + "-config")
    seed_dir.mkdir(parents=True)
    (seed_dir / "config.json").write_text(json.dumps(config))
    subprocess.run([str(PARLAB), "model", "init", str(seed_dir), "--seed", "0", "--out", str(folder)], check=True)
    tensors = load_file(str(folder / "model.safetensors"))
    check("lm_head.weight" in tensors, "the seeded checkpoint has an lm_head to drop")
    del tensors["lm_head.weight"]
    tensors["model.embed_tokens.weight"] = tensors["model.embed_tokens.weight"] * embed_scale
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    cfg = json.loads((folder / "config.json").read_text())
    cfg["tie_word_embeddings"] = True
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def llama_crosscheck(label, model_dir, work, half=None):
    """Checks parlab against transformers on `model_dir`: a config folder (seeded on first use, like
    `parlab model init`'s) or a checkpoint folder with its own model.safetensors. `half`: HALF_RUNS
    adds the bfloat16 runs beside their float32 twins (and the context split and overlapped
    all-reduces refused in bf16); HALF_REFUSED checks a mixture's bfloat16 specs are refused."""
    print(f"== {label}: {model_dir}", flush=True)
    cfg = json.loads((model_dir / "config.json").read_text())
    state, manifests = work / "state", work / "manifests"
    manifests.mkdir(parents=True)
    ckpt = work / "init"
    if (model_dir / "model.safetensors").exists():
        ckpt = model_dir
    else:
        subprocess.run([str(PARLAB), "model", "init", str(model_dir), "--seed", "0", "--out", str(ckpt)], check=True)
    runs = [("tensor", 1, 1, None), ("tensor", 2, 1, None), ("tensor", 4, 1, None), ("tensor", 8, 1, None),
            ("pipeline", 2, 2, None), ("data", 2, 1, None), ("context", 2, 1, None), ("context", 2, 1, "tensor")]
    experts = cfg.get("num_local_experts")
    if experts:
        runs.append(("expert", 2, 1, None))
    found = parlab_runs(model_dir, state, manifests, runs)
    any_run = next(iter(found.values()), None)
    if any_run is None:
        check(False, "parlab wrote manifests")
        return
    stem = state / "reference" / f'{any_run["answer_id"]}-{any_run["parlab"]["model"][:12]}'
    ref = json.loads(stem.with_suffix(".json").read_text())
    ref_tokens, prompt = ref["tokens"], ref["prompt"]
    ref_logits = np.fromfile(stem.with_suffix(".f32"), dtype="<f4").reshape(len(ref_tokens), -1)
    model = hf_causal(str(ckpt))
    tied = model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    # A seeded checkpoint carries its own config.json (its head untied, whatever the folder's says).
    ckpt_cfg = json.loads((ckpt / "config.json").read_text())
    check(tied == bool(ckpt_cfg.get("tie_word_embeddings", False)),
          f"transformers' head is {'tied to' if tied else 'apart from'} embed_tokens, as the checkpoint's config.json says")
    hf_tokens, hf_logits = hf_greedy(str(ckpt), prompt, NEW_TOKENS, model)
    with torch.no_grad():
        generated = model.generate(torch.tensor([prompt]), max_new_tokens=NEW_TOKENS, do_sample=False)[0, len(prompt):].tolist()
    check(generated == hf_tokens, f"transformers' generate() and its full-recompute greedy agree ({generated})")
    diff = float(np.abs(hf_logits - ref_logits).max())
    margins = np.sort(hf_logits, axis=1)
    min_margin = float((margins[:, -1] - margins[:, -2]).min())
    print(f"   transformers tokens {generated}; smallest top-2 margin {min_margin:.4f}")
    check(len(set(generated)) > NEW_TOKENS // 2, f"the tokens vary ({len(set(generated))} distinct of {NEW_TOKENS}), so equal tokens say something")
    check(ref_tokens == generated, f"parlab unsplit tokens equal transformers' generate() ({ref_tokens})")
    check(diff <= TOL, f"parlab unsplit logits within {TOL} of transformers' (largest difference {diff:.2e})")
    check(TOL < min_margin / 2, f"tolerance {TOL} is below half the smallest top-2 margin {min_margin:.4f}")
    layers, kv = cfg["num_hidden_layers"], cfg["num_key_value_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    for key in runs:
        doc = found.get(key)
        if doc is None or doc["status"] != "ok":
            check(False, f"{key} ran ok ({doc and doc.get('reason')})")
            continue
        ans, decode = doc["answer"], doc["summary"]["decode"]
        ex = ans["exactness"]
        check(ans["tokens"] == [generated] and ex["tokens_equal"], f"{key} tokens equal transformers' generate() (every sequence, every rank)")
        check(ex["max_logit_diff"] <= TOL, f"{key} logits within {TOL} of parlab unsplit (largest {ex['max_logit_diff']:.2e}; "
              f"so within {ex['max_logit_diff'] + diff:.2e} of transformers)")
        strategy, world = key[0], key[1]
        if strategy == "tensor" or key[3] == "tensor":
            want = 2 * layers + (1 if world > 1 else 0)
            check(decode["collectives_per_step"] == want, f"{key} makes {want} collectives per decode step")
        if strategy == "tensor":
            held = [r["kv_heads"]["end"] - r["kv_heads"]["start"] for r in doc["layout"]["ranks"]]
            check(held == [max(kv // world, 1)] * world, f"{key} layout gives each rank {max(kv // world, 1)} key/value head(s) ({held})")
        if strategy == "expert":
            held = [(r["experts"]["start"], r["experts"]["end"]) for r in doc["layout"]["ranks"]]
            share = experts // world
            check(held == [(r * share, (r + 1) * share) for r in range(world)], f"{key} layout gives each rank {share} experts ({held})")
        per_rank_layers = layers // world if strategy == "pipeline" else layers
        # A context split decoding as a tensor split records its decode part's cache: the tensor share.
        per_rank_kv = max(kv // world, 1) if strategy == "tensor" or key[3] == "tensor" else kv
        want = [2 * per_rank_layers * per_rank_kv * head_dim * 4] * world
        check(decode.get("kv_cache_bytes_per_token") == want,
              f"{key} KV cache per token per rank is {want} bytes ({decode.get('kv_cache_bytes_per_token')})")
    if half == HALF_RUNS:
        half_crosscheck(model_dir, str(ckpt), work, found, prompt, generated, hf_logits)
        refused_in_half(model_dir, work, "context 2", "context", 2)
        refused_in_half(model_dir, work, "tensor 2 with overlapped all-reduces", "tensor", 2, {"overlap": 2})
    elif half == HALF_REFUSED:
        refused_in_half(model_dir, work, "on a mixture (tensor 2)", "tensor", 2)
        refused_in_half(model_dir, work, "on a mixture (expert 2)", "expert", 2)


def main():
    global PARLAB
    if not BUILT.exists():
        print(f"FAIL {BUILT} is missing; run `cargo build --release` first")
        return 1
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory(prefix="parlab-crosscheck-") as tmp:
        tmp = pathlib.Path(tmp)
        PARLAB = tmp / "parlab"
        shutil.copy2(BUILT, PARLAB)
        tiny = tmp / "tiny"
        tiny.mkdir()
        (tiny / "config.json").write_text(json.dumps(TINY))
        crosscheck("tiny GPT-2 (vocabulary 501 split unevenly)", tiny, tmp / "work-tiny")
        crosscheck("GPT-2 124M shape", ROOT / "models" / "gpt2", tmp / "work-gpt2")
        moe = tmp / "tiny-moe"
        moe.mkdir()
        (moe / "config.json").write_text(json.dumps(TINY_MOE))
        moe_crosscheck(moe, tmp / "work-moe")
        for label, cfg, half in [("tiny Llama (8 heads, 2 KV heads, llama3 rope scaling)", TINY_LLAMA, HALF_RUNS),
                                 ("tiny Qwen2 (8 heads, 2 KV heads, q/k/v biases)", TINY_QWEN2, HALF_RUNS),
                                 ("tiny Qwen3 (8 heads, 2 KV heads, q/k norms, head width 16 = 2 x hidden / heads)", TINY_QWEN3, None),
                                 ("tiny Mixtral (8 heads, 2 KV heads, 4 SwiGLU experts of width 96, top 2)", TINY_MIXTRAL, HALF_REFUSED)]:
            folder = tmp / cfg["model_type"]
            folder.mkdir()
            (folder / "config.json").write_text(json.dumps(cfg))
            llama_crosscheck(label, folder, tmp / f"work-{cfg['model_type']}", half)
        check(max(half_steps_compared, default=0) > 0,
              f"the bfloat16 token comparisons with transformers hold some run to at least one step (steps held: {half_steps_compared})")
        seeded_tied = tmp / "llama-seeded-tied"
        seeded_tied.mkdir()
        (seeded_tied / "config.json").write_text(json.dumps(dict(TINY_LLAMA, tie_word_embeddings=True)))
        llama_crosscheck("tiny Llama seeded from a tied config (the seeded checkpoint's head is its own lm_head)", seeded_tied, tmp / "work-llama-seeded-tied")
        tied = tied_checkpoint(dict(TINY_LLAMA, tie_word_embeddings=True), tmp / "llama-tied")
        llama_crosscheck("tiny Llama with its head tied to embed_tokens (a checkpoint without lm_head)", tied, tmp / "work-llama-tied")
    print(("hf_crosscheck: PASS" if not failures else f"hf_crosscheck: FAIL ({len(failures)} checks failed)"), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
