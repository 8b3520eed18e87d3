#!/usr/bin/env python3
"""The PyTorch reference for `sandgym bench policy --model NAME`: the same model from the same
weights (transformers loading the GGUF file), the same batch sizes and lengths, float32 on the
CPU. Prints one JSON object.

    python3 -m venv .venv && .venv/bin/pip install torch transformers gguf accelerate
    .venv/bin/python benches/pytorch/policy_bench.py --gguf PATH --batch 64 --prompt 96 \
        --new-tokens 32 --train-batch 8 --train-len 128
"""
import argparse
import json
import os
import resource
import time

import torch
from transformers import AutoModelForCausalLM


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gguf", required=True)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--prompt", type=int, default=96)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--train-batch", type=int, default=8)
    p.add_argument("--train-len", type=int, default=128)
    p.add_argument("--warm-passes", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    directory, name = os.path.split(os.path.abspath(args.gguf))
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32)
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(10, vocab - 10, (args.batch, args.prompt), generator=gen)

    model.eval()
    with torch.no_grad():
        start = time.perf_counter()
        out = model(prompt, use_cache=True, logits_to_keep=1)
        prefill = args.batch * args.prompt / (time.perf_counter() - start)
        past = out.past_key_values
        token = out.logits[:, -1].argmax(-1, keepdim=True)
        start = time.perf_counter()
        for _ in range(args.new_tokens):
            out = model(token, past_key_values=past, use_cache=True)
            past = out.past_key_values
            token = out.logits[:, -1].argmax(-1, keepdim=True)
        decode = args.batch * args.new_tokens / (time.perf_counter() - start)

    model.train()
    ids = torch.randint(10, vocab - 10, (args.train_batch, args.train_len), generator=gen)

    def fwd_bwd():
        """One forward+backward pass over every weight; its seconds."""
        start = time.perf_counter()
        logits = model(ids).logits
        logp = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None]).mean()
        (-logp).backward()
        seconds = time.perf_counter() - start
        model.zero_grad(set_to_none=True)
        return seconds

    # The first pass pays one-time costs; the figure is the mean of the passes after it.
    tokens = args.train_batch * args.train_len
    first = tokens / fwd_bwd()
    warm = [fwd_bwd() for _ in range(max(args.warm_passes, 1))]
    fwd_bwd_rate = tokens / (sum(warm) / len(warm))

    print(json.dumps({
        "implementation": f"PyTorch {torch.__version__} (transformers), float32, "
                          f"{torch.get_num_threads()} threads",
        "prefill_tokens_per_s": round(prefill, 1),
        "decode_tokens_per_s": round(decode, 1),
        "fwd_bwd_tokens_per_s": round(fwd_bwd_rate, 1),
        "fwd_bwd_first_pass_tokens_per_s": round(first, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }))


if __name__ == "__main__":
    main()
