#!/usr/bin/env python3
"""Parity fixtures: what Hugging Face transformers computes for small random GLM-ASR models.

Run on the GPU machine (it has torch + transformers with GlmAsrForConditionalGeneration):

    python3 tools/make_parity_fixtures.py --out tests/fixtures/parity

For each case it writes
    <case>/model/{config.json, model.safetensors, tokenizer.json}   saved with save_pretrained, fp32:
        mini_nano*: renamed to the Hub's tensor names; awkward: save_pretrained's own names, as
        written; mini_nano_sharded: mini_nano's model in save_pretrained's shards + index
    <case>/clip.wav                                                  16 kHz mono PCM16
    <case>/expected.safetensors   features (slices), encoder output (slices), audio embeddings,
                                  logits of the first decode steps
    <case>/expected.json          input_ids, forced greedy token ids, generate() ids and text,
                                  versions, the smallest top-1 margin of the greedy logits
The C++ tests (driver/tests/test_parity.cpp) check that the cpu track reproduces all of it, and
the GPU tests check the baseline and reference tracks against the same files.

Everything runs in fp32 on the CPU with eager attention: the fixture is the mathematical
reference, free of TF32 or kernel-selection effects. Weights are re-drawn with scales that keep
activations O(1) so greedy logits are decisive (large top-1 margins), which makes token-exact
comparisons meaningful rather than a coin toss between near-ties.
"""
import argparse
import json
import math
import os
import shutil
import sys

import numpy as np
import torch
import transformers
from safetensors.torch import save_file
from transformers import (GlmAsrConfig, GlmAsrForConditionalGeneration, GlmAsrProcessor,
                          PreTrainedTokenizerFast, WhisperFeatureExtractor)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKENIZER = os.path.join(ROOT, "tests/fixtures/tokenizer/glm_style/tokenizer.json")
PROMPT = ("<|user|>\n<|begin_of_audio|><|pad|><|end_of_audio|><|user|>\n"
          "Please transcribe this audio into text<|assistant|>\n")
FORCED_STEPS = 24   # greedy steps recorded regardless of stop tokens
LOGIT_STEPS = 3     # steps whose full logits are stored
GENERATE_STEPS = 24 # max_new_tokens of the generate() call (stops at eos)


def model_config(name, vocab_size, ids):
    """Two random configs of GLM-ASR's architecture with different shapes."""
    text_common = dict(vocab_size=vocab_size, eos_token_id=[ids["<|endoftext|>"], ids["<|user|>"],
                                                            ids["<|observation|>"]],
                       rms_norm_eps=1e-5, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
                       max_position_embeddings=2048)
    if name == "mini_nano":
        # A miniature of Nano's structure: partial RoPE 0.5, MHA encoder with k_proj bias-free,
        # GQA 4/2 decoder, lm_head tied to the embeddings as in Nano's config.
        audio = dict(hidden_size=64, intermediate_size=256, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=4, head_dim=16, num_mel_bins=128,
                     max_position_embeddings=1500,
                     rope_parameters={"rope_theta": 10000.0, "rope_type": "default",
                                      "partial_rotary_factor": 0.5})
        text = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=16, **text_common)
        tie = True
    elif name == "awkward":
        # Awkward sizes: 3 encoder heads of 24 (rotary 12), GQA 5/1 with head_dim 16,
        # widths that are not multiples of 32, an untied lm_head.
        audio = dict(hidden_size=72, intermediate_size=288, num_hidden_layers=2,
                     num_attention_heads=3, num_key_value_heads=3, head_dim=24, num_mel_bins=128,
                     max_position_embeddings=1500,
                     rope_parameters={"rope_theta": 10000.0, "rope_type": "default",
                                      "partial_rotary_factor": 0.5})
        text = dict(hidden_size=80, intermediate_size=136, num_hidden_layers=2,
                    num_attention_heads=5, num_key_value_heads=1, head_dim=16, **text_common)
        tie = False
    else:
        raise ValueError(name)
    return GlmAsrConfig(audio_config=audio, text_config=text, audio_token_id=ids["<|pad|>"],
                        tie_word_embeddings=tie)


def redraw_weights(model, seed, embedding_std):
    """N(0, 1/fan_in) matrices, small biases, norm weights near 1 (the final one random),
    N(0, std²) embeddings."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("embed_tokens.weight") or name.endswith("lm_head.weight"):
                p.copy_(embedding_std * torch.randn(p.shape, generator=gen))
            elif p.dim() >= 2:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(fan_in))
            elif name.endswith("language_model.norm.weight"):
                # Random signs on the final norm: with tied embeddings, h·E would otherwise favour
                # the input token's own embedding, and greedy decoding would repeat one token.
                p.copy_(torch.randn(p.shape, generator=gen))
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def hub_name(name):
    """In-memory parameter name -> the name in the Hub checkpoint (docs/model.md §7.1)."""
    for prefix, hub in (("model.audio_tower.", "audio_tower."),
                        ("model.multi_modal_projector.", "multi_modal_projector."),
                        ("model.language_model.", "language_model.model."),
                        ("lm_head.", "language_model.lm_head.")):
        if name.startswith(prefix):
            return hub + name[len(prefix):]
    return name  # older transformers: already the Hub name


def rewrite_in_hub_layout(model, model_dir):
    """Rewrite model.safetensors with exactly the tensor names of GLM-ASR-Nano-2512 on the Hub,
    lm_head included (Nano stores it, bitwise equal to the embeddings when tied). save_pretrained
    of transformers 5.17 writes `language_model.model.model.*`, a layout no released checkpoint
    has; the reload check in make_case proves transformers reads the rewritten file identically."""
    tensors = {hub_name(k): v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    save_file(tensors, os.path.join(model_dir, "model.safetensors"), metadata={"format": "pt"})


def synth_clip(seconds, seed, rate=16000):
    """A deterministic speech-like signal: gliding harmonics with formant-ish weights, syllabic
    amplitude modulation and a little noise; quantised to PCM16 exactly as the WAV stores it."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    f0 = 120 + 30 * np.sin(2 * np.pi * 0.7 * t) + 10 * rng.standard_normal() 
    phase = 2 * np.pi * np.cumsum(f0) / rate
    signal = sum((0.6 / k) * np.sin(k * phase) * (1 + 0.5 * np.sin(2 * np.pi * (0.3 + 0.1 * k) * t))
                 for k in range(1, 12))
    envelope = 0.5 * (1 + np.sin(2 * np.pi * 4.0 * t)) ** 2
    signal = 0.25 * signal * envelope + 0.01 * rng.standard_normal(t.size)
    pcm16 = np.clip(np.round(signal * 32767), -32768, 32767).astype(np.int16)
    return pcm16, pcm16.astype(np.float32) / 32768.0  # libsndfile reads PCM16 as x / 32768


def write_wav(path, pcm16, rate=16000):
    import wave
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm16.tobytes())


def rows_slice(x, head, tail):
    """First `head` and last `tail` rows along dim 1 (keeps fixtures small)."""
    return torch.cat([x[:, :head], x[:, -tail:]], dim=1).contiguous()


def attempt_case(out_dir, case, model_name, seconds, seed, tokenizer, model_dir=None, layout="hub"):
    case_dir = os.path.join(out_dir, case)
    os.makedirs(case_dir, exist_ok=True)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in
           ["<|endoftext|>", "<|user|>", "<|observation|>", "<|pad|>", "<|assistant|>"]}

    if model_dir is None:
        torch.manual_seed(seed)
        config = model_config(model_name, len(tokenizer), ids)
        model = GlmAsrForConditionalGeneration(config).float().eval()
        redraw_weights(model, seed, embedding_std=1.0)
        if config.tie_word_embeddings:
            model.tie_weights()
        model_dir = os.path.join(case_dir, "model")
        model.save_pretrained(model_dir, safe_serialization=True)
        if layout == "hub":
            rewrite_in_hub_layout(model, model_dir)
            os.remove(os.path.join(model_dir, "generation_config.json"))  # not part of the Hub layout
        shutil.copy(TOKENIZER, os.path.join(model_dir, "tokenizer.json"))
        model_rel = "model"
        reloaded = GlmAsrForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32)
        for (name, a), (_, b) in zip(model.state_dict().items(), reloaded.state_dict().items()):
            assert torch.equal(a, b), f"{name} did not survive save/load"
    elif layout == "sharded":
        # The same weights as save_pretrained shards them: model-0000i-of-0000N.safetensors and
        # model.safetensors.index.json, exactly as written.
        source = GlmAsrForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32)
        model_dir = os.path.join(case_dir, "model")
        shutil.rmtree(model_dir, ignore_errors=True)
        source.save_pretrained(model_dir, safe_serialization=True, max_shard_size="400KB")
        assert os.path.exists(os.path.join(model_dir, "model.safetensors.index.json"))
        shutil.copy(TOKENIZER, os.path.join(model_dir, "tokenizer.json"))
        model_rel = "model"
    else:
        model_rel = os.path.relpath(model_dir, case_dir)
    model = GlmAsrForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32,
                                                           attn_implementation="eager").eval()

    pcm16, audio = synth_clip(seconds, seed)
    write_wav(os.path.join(case_dir, "clip.wav"), pcm16)

    feature_extractor = WhisperFeatureExtractor(feature_size=128, sampling_rate=16000,
                                                hop_length=160, chunk_length=30, n_fft=400,
                                                padding_value=0.0)
    processor = GlmAsrProcessor(feature_extractor=feature_extractor, tokenizer=tokenizer)
    # add_special_tokens=False as in apply_transcription_request (the chat template already holds
    # every special token): a tokenizer post-processor must not prepend anything.
    inputs = processor(text=PROMPT, audio=audio, sampling_rate=16000, add_special_tokens=False)
    input_ids = inputs["input_ids"]
    features = inputs["input_features"].float()
    mask = inputs["input_features_mask"]

    with torch.no_grad():
        tower = model.model.audio_tower if hasattr(model, "model") else model.audio_tower
        encoder_out = tower(features).last_hidden_state
        audio_embeds = model.get_audio_features(features, mask, return_dict=True).pooler_output

        # Forced greedy decoding with the KV cache: argmax every step, stop tokens ignored.
        out = model(input_ids=input_ids, input_features=features, input_features_mask=mask,
                    use_cache=True)
        logits_steps, tokens, margins = [], [], []
        cache = out.past_key_values
        logits = out.logits[0, -1]
        for step in range(FORCED_STEPS):
            if step < LOGIT_STEPS:
                logits_steps.append(logits.clone())
            top2 = torch.topk(logits, 2).values
            margins.append(float(top2[0] - top2[1]))
            token = int(torch.argmax(logits))
            tokens.append(token)
            if step + 1 == FORCED_STEPS:
                break
            out = model(input_ids=torch.tensor([[token]]), past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            logits = out.logits[0, -1]

        generated = model.generate(**inputs, do_sample=False, max_new_tokens=GENERATE_STEPS)
    generate_ids = generated[0, input_ids.shape[1]:].tolist()
    # No clean-up of spaces: raw tokenizers decoding, what the C++ tokenizer reproduces.
    text = tokenizer.decode(generate_ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    n_win = features.shape[0]
    valid = mask.sum(-1).tolist()
    tensors = {
        "features_head": features[:, :, :48].contiguous(),           # (n_win, 128, 48)
        "features_sum": features.double().sum(dim=(1, 2)).float(),   # (n_win,)
        "encoder_head_tail": rows_slice(encoder_out, 32, 16),        # (n_win, 48, De)
        "encoder_sum": encoder_out.double().sum(dim=(1, 2)).float(), # (n_win,)
        "audio_embeds": audio_embeds.float().contiguous(),           # (N, Dt)
        "logits": torch.stack(logits_steps).float().contiguous(),    # (LOGIT_STEPS, V)
    }
    # The last valid frames of each window, where padding starts: (n_win, 128, 16).
    tails = []
    for w in range(n_win):
        end = int(valid[w])
        start = max(0, min(end - 8, features.shape[2] - 16))
        tails.append(features[w, :, start:start + 16])
    tensors["features_edge"] = torch.stack(tails).contiguous()
    edge_starts = [max(0, min(int(v) - 8, features.shape[2] - 16)) for v in valid]
    save_file(tensors, os.path.join(case_dir, "expected.safetensors"))

    expected = {
        "model": model_rel,
        "clip": "clip.wav",
        "seconds": seconds,
        "windows": n_win,
        "valid_frames": [int(v) for v in valid],
        "features_edge_start": edge_starts,
        "audio_tokens": int(audio_embeds.shape[0]),
        "input_ids": input_ids[0].tolist(),
        "forced_tokens": tokens,
        "forced_steps": FORCED_STEPS,
        "logit_steps": LOGIT_STEPS,
        "min_top1_margin": min(margins),
        "generate_max_new_tokens": GENERATE_STEPS,
        "generate_tokens": generate_ids,
        "generate_text": text,
        "seed": seed,
        "made_with": {"transformers": transformers.__version__, "torch": torch.__version__,
                      "python": sys.version.split()[0], "device": "cpu", "dtype": "float32",
                      "attn_implementation": "eager"},
    }
    with open(os.path.join(case_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, ensure_ascii=False)
    print(f"{case}: {n_win} window(s), {audio_embeds.shape[0]} audio tokens, prompt "
          f"{input_ids.shape[1]} ids, forced tokens {tokens[:8]}..., min margin "
          f"{min(margins):.3f}, generate text {text!r}")
    return model_dir, min(margins), len(set(tokens))


MIN_MARGIN = 0.3     # smallest acceptable top-1 margin of any greedy step's logits
MIN_DISTINCT = 4     # the forced tokens must not be one token repeated


def make_cases(out_dir, cases, seed, tokenizer):
    """Draw model seeds from `seed` on until every case sharing the model is well conditioned:
    decisive greedy steps (a bf16 track must not flip a near-tie) and varied tokens (a real test
    of the KV cache). cases: [(case name, model name, clip seconds, layout)], the first one
    owns the model, the others reuse it. layout: "hub" (the Hub's tensor names, docs/model.md
    7.1), "as_saved" (save_pretrained's own names and files, untouched) or "sharded" (a later
    case: the model re-saved by save_pretrained in shards)."""
    for attempt in range(40):
        model_dir, ok = None, True
        for case, model_name, seconds, layout in cases:
            if model_dir is None:
                shutil.rmtree(os.path.join(out_dir, case, "model"), ignore_errors=True)
            made, margin, distinct = attempt_case(out_dir, case, model_name, seconds,
                                                  seed + attempt, tokenizer, model_dir, layout)
            model_dir = made
            if margin < MIN_MARGIN or distinct < MIN_DISTINCT:
                print(f"  seed {seed + attempt} rejected: {case} has margin {margin:.3f}, "
                      f"{distinct} distinct tokens")
                ok = False
                break
        if ok:
            return
    raise RuntimeError(f"{cases[0][0]}: no well-conditioned seed found")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "tests/fixtures/parity"))
    args = parser.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=TOKENIZER)
    tokenizer.pad_token = "<|endoftext|>"
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    make_cases(args.out, [("mini_nano", "mini_nano", 2.7, "hub"),
                          ("mini_nano_long", "mini_nano", 31.3, "hub"),
                          # the loader's shard path on mini_nano's clip: the same ids expected
                          ("mini_nano_sharded", "mini_nano", 2.7, "sharded")], 1234, tokenizer)
    make_cases(args.out, [("awkward", "awkward", 4.37, "as_saved")], 77, tokenizer)


if __name__ == "__main__":
    main()
