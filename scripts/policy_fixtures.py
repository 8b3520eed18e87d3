#!/usr/bin/env python3
"""Writes the reference fixtures for sandgym's pretrained-model import tests.

    python3 -m venv .venv && .venv/bin/pip install torch transformers safetensors gguf
    .venv/bin/python scripts/policy_fixtures.py [--smollm2 PATH.gguf]

1. `policy/tests/fixtures/tiny-llama/` and `tiny-qwen2/`: small random models saved by
   `transformers` (config.json, model.safetensors, tokenizer.json, tokenizer_config.json) and
   `expected.json` with the float32 logits `transformers` computes for fixed prompts.
   tiny-llama: GQA (4 heads / 2 KV heads), untied output, rope_theta 5e5, eps 1e-5.
   tiny-qwen2: q/k/v biases, tied embeddings, GQA (4 / 1).
   The tokenizer is a small byte-level BPE with ChatML's special tokens.
2. With `--smollm2`, `policy/tests/fixtures/smollm2-reference.json`: the 256 largest logits
   at the last position and a 12-token greedy continuation that `transformers` computes after loading the
   same GGUF file sandgym fetches (`sandgym model fetch smollm2-135m-instruct`).
"""
import argparse
import json
import os

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
from transformers import (AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM,
                          PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM)

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "policy", "tests", "fixtures")
CORPUS = [
    "SELECT name FROM products WHERE price > 10",
    '{"thought":"look","action":{"tool_name":"run_sql","parameters":{"query":"SELECT 1"}}}',
    "How many customers are there? There are 42 customers in the shop.",
    "The quick brown fox jumps over the lazy dog 0123456789",
] * 20
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
PROMPTS = [
    "<|im_start|>user\nHow many products?<|im_end|>\n<|im_start|>assistant\n",
    "SELECT name FROM customers",
]


def tiny_tokenizer(vocab):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    assert tok.get_vocab_size() == vocab, tok.get_vocab_size()
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=None, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>")


def write_model(name, model, tokenizer):
    out = os.path.join(HERE, name)
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
                               "{{ m['content'] }}<|im_end|>\n{% endfor %}")
    tokenizer.save_pretrained(out)
    for junk in ("generation_config.json", "special_tokens_map.json"):
        path = os.path.join(out, junk)
        if os.path.exists(path):
            os.remove(path)
    cases = []
    model.eval()
    with torch.no_grad():
        for text in PROMPTS:
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            logits = model(torch.tensor([ids])).logits[0]
            cases.append({"text": text, "ids": ids,
                          "logits": [[round(float(x), 6) for x in row] for row in logits]})
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({"model": name, "cases": cases}, f)


def tiny_models():
    torch.manual_seed(0)
    vocab = 320
    tok = tiny_tokenizer(vocab)
    llama = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=96,
                        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                        rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
                        max_position_embeddings=256, bos_token_id=None, eos_token_id=2)
    model = LlamaForCausalLM(llama).float()
    for p in model.parameters():  # larger weights than the default init, so logits differ
        torch.nn.init.normal_(p, std=0.1)
    write_model("tiny-llama", model, tok)
    qwen = Qwen2Config(vocab_size=vocab, hidden_size=64, intermediate_size=80,
                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                       rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
                       max_position_embeddings=256, use_sliding_window=False)
    model = Qwen2ForCausalLM(qwen).float()
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.1)
    write_model("tiny-qwen2", model, tok)


def smollm2(path):
    directory, name = os.path.split(os.path.abspath(path))
    tok = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name,
                                                 dtype=torch.float32)
    model.eval()
    prompts = [
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
        "What is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|>user\nWrite a SQL query that counts the rows of the table orders."
        "<|im_end|>\n<|im_start|>assistant\n",
        "The 3 largest cities in 2024 were",
    ]
    cases = []
    with torch.no_grad():
        for text in prompts:
            ids = tok(text, add_special_tokens=False)["input_ids"]
            logits = model(torch.tensor([ids])).logits[0, -1]
            greedy = model.generate(torch.tensor([ids]), max_new_tokens=12, do_sample=False)
            top = torch.topk(logits, 256)
            cases.append({"text": text, "ids": ids,
                          "top_ids": top.indices.tolist(),
                          "top_logits": [round(float(x), 5) for x in top.values],
                          "greedy": greedy[0, len(ids):].tolist()})
    with open(os.path.join(HERE, "smollm2-reference.json"), "w") as f:
        json.dump({"model": "smollm2-135m-instruct", "cases": cases}, f)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smollm2", help="the GGUF file of smollm2-135m-instruct")
    args = parser.parse_args()
    tiny_models()
    if args.smollm2:
        smollm2(args.smollm2)
