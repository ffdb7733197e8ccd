#!/usr/bin/env python3
# Writes a tiny llama-architecture GGUF with random weights, for running a real llama.cpp
# llama-server in front of which infermeter is measured (bench/llamacpp.ts, docs/real-engines.md).
# The text it generates is gibberish; the server's framing, usage, timings and scheduling are real.
# Needs numpy and llama.cpp's own gguf-py (from the llama.cpp source tree):
#   PYTHONPATH=/path/to/llama.cpp/gguf-py python3 bench/llamacpp/tiny-gguf.py /tmp/tiny.gguf
# Vocabulary: byte-level SPM (the 256 byte tokens, so any text tokenizes), plus <s>, </s> and
# ChatML's <|im_start|> / <|im_end|>; chat template: ChatML. Seeded: the same file every time.
# What it generates is printable ASCII only: every embedding carries a constant in dimension 0,
# which the residual stream keeps, and the output rows weigh that dimension up for the printable
# byte tokens and down for the rest. Uniformly random output (bytes that make no UTF-8, control
# tokens) makes the current llama-server answer HTTP 500 "Failed to parse input" or an in-stream
# error, where b4747 passed the bytes on.
import sys

import types as _types

import numpy as np

# gguf-py imports sentencepiece for its vocabulary converters, which this script does not use.
sys.modules.setdefault('sentencepiece', _types.SimpleNamespace(SentencePieceProcessor=None))  # type: ignore[arg-type]
import gguf  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else 'tiny.gguf'
n_embd, n_head, n_layer, n_ff, n_ctx = 512, 8, 4, 1536, 4096
rng = np.random.default_rng(19)

tokens: list[bytes] = [b'<unk>', b'<s>', b'</s>', b'<|im_start|>', b'<|im_end|>']
types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
for b in range(256):
    tokens.append(f'<0x{b:02X}>'.encode())
    types.append(gguf.TokenType.BYTE)
n_vocab = len(tokens)

w = gguf.GGUFWriter(out, 'llama')
w.add_name('infermeter tiny random llama')
w.add_context_length(n_ctx)
w.add_embedding_length(n_embd)
w.add_block_count(n_layer)
w.add_feed_forward_length(n_ff)
w.add_head_count(n_head)
w.add_head_count_kv(n_head)
w.add_rope_dimension_count(n_embd // n_head)
w.add_layer_norm_rms_eps(1e-5)
w.add_vocab_size(n_vocab)
w.add_file_type(gguf.LlamaFileType.ALL_F32)
w.add_tokenizer_model('llama')
w.add_token_list(tokens)
w.add_token_scores([0.0] * n_vocab)
w.add_token_types(types)
w.add_bos_token_id(1)
w.add_eos_token_id(4)
w.add_add_bos_token(False)
w.add_chat_template(
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def t(name: str, *shape: int) -> None:
    w.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float32))


embd = (rng.standard_normal((n_vocab, n_embd)) * 0.02).astype(np.float32)
embd[:, 0] = 4.0
w.add_tensor('token_embd.weight', embd)
w.add_tensor('output_norm.weight', np.ones(n_embd, dtype=np.float32))
output = (rng.standard_normal((n_vocab, n_embd)) * 0.02).astype(np.float32)
printable = [i for i, tok in enumerate(tokens) if tok.startswith(b'<0x') and 0x20 <= int(tok[3:5], 16) <= 0x7E]
output[:, 0] = -1.0
output[printable, 0] = 1.0
w.add_tensor('output.weight', output)
for i in range(n_layer):
    w.add_tensor(f'blk.{i}.attn_norm.weight', np.ones(n_embd, dtype=np.float32))
    w.add_tensor(f'blk.{i}.ffn_norm.weight', np.ones(n_embd, dtype=np.float32))
    for name in ('attn_q', 'attn_k', 'attn_v', 'attn_output'):
        t(f'blk.{i}.{name}.weight', n_embd, n_embd)
    t(f'blk.{i}.ffn_gate.weight', n_ff, n_embd)
    t(f'blk.{i}.ffn_up.weight', n_ff, n_embd)
    t(f'blk.{i}.ffn_down.weight', n_embd, n_ff)

w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(f'{out}: llama, {n_layer} layers, n_embd {n_embd}, vocab {n_vocab}, context {n_ctx}')
