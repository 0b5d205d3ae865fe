#!/usr/bin/env python3
"""Times Hugging Face transformers' own decode step (GPT-2 or the Llama family, by the checkpoint's config) (float32, greedy, KV cache) on a checkpoint.

Usage: hf_decode_step.py CHECKPOINT_DIR REFERENCE_JSON THREADS NEW_TOKENS REPETITIONS
REFERENCE_JSON is parlab's cached reference (`$PARLAB_STATE/reference/<answer_id>-<model digest>.json`), which
holds the prompt ids, so both sides decode the same tokens. Prints the median decode-step time in
seconds (prefill excluded) and checks that the greedy tokens equal the reference's.
"""
import json, statistics, sys, time

import torch
from transformers import AutoModelForCausalLM


def main():
    ckpt, ref_path, threads, new_tokens, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    torch.set_num_threads(threads)
    ref = json.load(open(ref_path))
    model = AutoModelForCausalLM.from_pretrained(ckpt, torch_dtype=torch.float32).eval()
    steps, tokens = [], []
    with torch.no_grad():
        for rep in range(reps + 1):  # the first repetition warms up
            out = model(torch.tensor([ref["prompt"]]), use_cache=True)
            past, tok = out.past_key_values, int(out.logits[0, -1].argmax())
            tokens = [tok]
            for _ in range(new_tokens - 1):
                t0 = time.perf_counter()
                out = model(torch.tensor([[tok]]), past_key_values=past, use_cache=True)
                past, tok = out.past_key_values, int(out.logits[0, -1].argmax())
                if rep > 0:
                    steps.append(time.perf_counter() - t0)
                tokens.append(tok)
    if tokens != ref["tokens"][:new_tokens]:
        print(f"hf tokens {tokens} differ from parlab's reference {ref['tokens'][:new_tokens]}", file=sys.stderr)
        return 1
    print(statistics.median(steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
