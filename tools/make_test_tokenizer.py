#!/usr/bin/env python3
"""Tokenizer fixtures: two small byte-level BPE tokenizer.json files and what HF computes with them.

Run locally (no GPU, no network beyond `pip install tokenizers`):

    pip install tokenizers          # the fixtures in git were made with tokenizers 0.23.3
    python3 tools/make_test_tokenizer.py --out tests/fixtures/tokenizer

It writes
    glm_style/tokenizer.json   GLM-4 layout: Split(GLM-4 regex, Isolated) then ByteLevel(use_regex
                               false); merges as ["a", "b"] pairs; a GLM-4-like post_processor
    gpt2_style/tokenizer.json  GPT-2 layout: ByteLevel(use_regex true); merges as legacy "a b"
                               strings; ignore_merges true, with one vocab word ("Ġzebra") that
                               only that option can produce
    cases.json                 for each tokenizer and each test string: HF's encode ids
                               (add_special_tokens=False) and decode of those ids with
                               skip_special_tokens True and False; plus decode-only id lists
                               (ids that cut a UTF-8 character apart, special ids between them)

The real GLM-ASR tokenizer.json (59246 base tokens + 18 added special tokens) is not available
offline, so the fixtures copy its layout at a small scale (docs/model.md §8): a byte-level BPE
whose 256 single-byte tokens sit at id = byte value, trained merges after them, then GLM-ASR's 18
special tokens in GLM-4 order at ids base_vocab_size + 0..17. The lead's parity fixture models
(tools/make_parity_fixtures.py) use glm_style/tokenizer.json.

Every expected value comes from HF `tokenizers` reading the exact file written here, never from
this script's own logic. The training text is embedded below so the output does not depend on
the Python version or on files of the machine.
"""
import argparse
import json
import os

import tokenizers
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

TRAINED_VOCAB_SIZE = 800  # 256 byte tokens + 544 merges; keeps each file < 100 KB

# GLM-ASR's added special tokens in GLM-4 order (docs/model.md §6.2): ids base + 0..17.
SPECIAL_TOKENS = [
    "<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>",
    "<|assistant|>", "<|observation|>", "<|begin_of_image|>", "<|end_of_image|>",
    "<|begin_of_video|>", "<|end_of_video|>", "<|pad|>", "<|begin_of_audio|>", "<|end_of_audio|>",
    # Placeholder name: the real token at id 59263 is unknown (docs/model.md §6.2, NOT FOUND).
    "<|end_of_transcript|>",
]

# The GLM-4 (cl100k-style) pre-tokenizer regex: digits in groups of 1..3, a letter run may take
# one leading non-letter (e.g. a space), newlines kept apart from other whitespace.
GLM4_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
              r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

GLM_ASR_PROMPT = ("<|user|>\n<|begin_of_audio|><|pad|><|pad|><|pad|><|end_of_audio|><|user|>\n"
                  "Please transcribe this audio into text<|assistant|>\n")

TRAINING_TEXT = """\
Speech recognition turns the sound of a voice into written text. A recording is cut into short
windows, each window becomes a log-mel spectrogram, and an audio encoder reads the spectrogram.
The encoder is a stack of transformer layers: attention, a feed-forward network, and layer
normalization. A projector then maps the audio features into the space of the language model,
and the language model writes the transcript one token at a time. Please transcribe this audio
into text. Please transcribe this audio into text, and keep the punctuation as it was spoken.
The model reads the prompt, the audio tokens, and the question, then it answers with the words
it heard. It doesn't guess when the sound is clear; it's careful with names, numbers and dates.
We'll test it on numbers like 1, 12, 123, 1234, 2024, 3.14159, 100000 and 65536, on dates such as
2025-12-31, and on times like 10:45 or 23:59. They're reading the news; you're listening; I'm
writing it down; we've checked it twice; she'd say it again; he'll spell it out.
The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog again!
How many tokens does this sentence need? Fewer than you think, because common words merge into
single tokens while rare words are split into smaller pieces, down to single bytes if needed.
Every byte has its own token, so no input is ever unknown: letters, digits, spaces, tabs,
newlines, accents such as café, naïve, résumé, and façade, and characters from other scripts.
我还能再搞一个，就算是非常小的声音也能识别准确。语音识别把声音变成文字。我们测试中文识别。
Kernels are small programs that run on the graphics processor. A matrix multiplication kernel
loads tiles of the inputs into shared memory, multiplies them, and writes the output tile.
Attention kernels compute softmax over the scores of every query against every key, and the
fastest ones never write the full score matrix to memory. The decoder runs once per new token,
so its speed depends on how fast the weights can be read from memory.
Testing matters: every kernel is compared against a plain reference on the processor, with a
tolerance that depends on the precision and the length of the reduction. When the results
match, the kernel is timed, and the time is compared with what the hardware could achieve.
"""


def bytes_to_unicode():
    """GPT-2's byte -> printable character table (the same one HF's ByteLevel uses)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def train(style):
    """Train a byte-level BPE with HF and return its tokenizer.json as a dict."""
    tok = Tokenizer(models.BPE())
    if style == "glm_style":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(GLM4_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ])
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=TRAINED_VOCAB_SIZE, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    # Repeat the text so that enough pairs reach the trainer's frequency threshold.
    tok.train_from_iterator([TRAINING_TEXT] * 3, trainer=trainer)
    return json.loads(tok.to_str())


def glm_layout(spec, style):
    """Renumber the vocab as GLM's: byte b at id b, merged tokens after; then add the specials."""
    byte_char = bytes_to_unicode()
    old_vocab = spec["model"]["vocab"]
    assert all(byte_char[b] in old_vocab for b in range(256)), "trainer lost a byte token"
    vocab = {byte_char[b]: b for b in range(256)}
    for token, _ in sorted(old_vocab.items(), key=lambda kv: kv[1]):
        if token not in vocab:
            vocab[token] = len(vocab)
    if style == "gpt2_style":
        # A whole word no merge produces: with ignore_merges it still encodes as this one token.
        vocab["\u0120zebra"] = len(vocab)
    base = len(vocab)
    spec["model"]["vocab"] = vocab
    spec["model"]["dropout"] = None
    spec["model"]["byte_fallback"] = False
    if style == "gpt2_style":
        spec["model"]["merges"] = [f"{a} {b}" for a, b in spec["model"]["merges"]]  # legacy format
        spec["model"]["ignore_merges"] = True
    spec["added_tokens"] = [
        {"id": base + i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True} for i, t in enumerate(SPECIAL_TOKENS)]
    if style == "glm_style":
        # GLM-4 files prepend "[gMASK]<sop>" through the post_processor when add_special_tokens is
        # true; GLM-ASR's prompt does not use it, and the C++ tokenizer ignores post_processor.
        gmask, sop = base + SPECIAL_TOKENS.index("[gMASK]"), base + SPECIAL_TOKENS.index("<sop>")
        spec["post_processor"] = json.loads(processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="[gMASK] <sop> $A", pair="[gMASK] <sop> $A $B",
                                          special_tokens=[("[gMASK]", gmask), ("<sop>", sop)]),
        ]).__getstate__())
    return spec, base


ENCODE_CASES = [
    "",
    "Hello world",
    "Please transcribe this audio into text",
    GLM_ASR_PROMPT,
    "<|user|>\n<|begin_of_audio|><|pad|><|end_of_audio|><|user|>\nPlease transcribe this audio into text<|assistant|>\n",
    "The quick brown fox jumps over the lazy dog.",
    "Speech recognition turns sound into text; kernels run on the GPU!",
    "Hello, world! How are you? (fine) [ok] {yes} <no> \"quoted\" 'single'",
    "...!!!???,,,;;;:::---___***",
    "a-b_c.d/e\\f|g@h#i$j%k^l&m*n+o=p~q`r",
    "1",
    "12",
    "123",
    "1234",
    "1234567890123",
    "3.14159 and 2,718,281 and 1e-9",
    "Call 555-0123 at 10:45 on 2025-12-31.",
    "don't can't won't it's I'm you're we've they'd she'll",
    "I'LL DON'T IT'S WE'VE THEY'RE HE'D I'M",
    "'s 't 're 've 'm 'll 'd",
    "word   with    multiple     spaces",
    "tabs\there\t\tand\t\t\tthere",
    "line one\nline two\n\nline four\n\n\n",
    "windows\r\nline\r\nends\r\n",
    "   leading spaces",
    "trailing spaces   ",
    "  both  ",
    " ",
    "\n",
    " \n \n ",
    "a \n b",
    "café naïve résumé façade",
    "Ünïcödé àccénts ÀÉÎÕÜ",
    "我还能再搞一个，就算是非常小的声音也能识别准确",
    "中文 mixed with English 和数字 123",
    "emoji 😀 and 🎉🎉 and 👍🏽",
    "family 👨\u200d👩\u200d👧 flag 🇫🇷",
    "e\u0301 (combining accent, no normalizer)",
    "non\u00a0breaking\u3000ideographic space",
    "vertical\u000btab form\u000cfeed next\u0085line line\u2028separator \u2029 end",
    "superscript x² and roman Ⅻ and arabic ١٢٣",
    "aaaaaaaaaaaaaaaaaaaaaaaa",
    "a zebra, two zebras and zebra",
    "thethethethe the the the",
    "<|user|>",
    "<|pad|><|pad|><|pad|>",
    "text<|pad|>more text",
    "abc<|assistant|>def",
    " <|user|> spaced ",
    "<<|pad|>>",
    "<|user",
    "<|user|",
    "|>user<|",
    "<|endoftext|>[MASK][gMASK][sMASK]<sop><eop><|system|><|observation|>",
    "<|begin_of_image|><|end_of_image|><|begin_of_video|><|end_of_video|><|end_of_transcript|>",
    "[gMASK]<sop><|user|>\nhi",
    "Transcript:\n\tThe END.\n",
]


def decode_cases(byte_char, vocab, special_ids):
    """Id lists that no encode produces: UTF-8 cut apart, bytes that are never valid."""
    b = lambda *xs: [vocab[byte_char[x]] for x in xs]  # single-byte token ids
    text = lambda s: [vocab[byte_char[x]] for x in s.encode()]
    pad, user = special_ids["<|pad|>"], special_ids["<|user|>"]
    return [
        b(0xC3),                       # first byte of é alone
        text("caf") + b(0xC3),         # é cut at the end
        b(0xA9) + text("t"),           # continuation byte with no lead
        b(0xC3, 0xA9),                 # é whole, from single bytes
        b(0xE6, 0x88),                 # 我 missing its last byte
        b(0xE6, 0x88) + text("A"),     # ... followed by ASCII
        b(0xE6, 0x88, 0x91),           # 我 whole
        b(0xF0, 0x9F, 0x98) + text("!"),   # emoji missing its last byte
        b(0xF0, 0x9F, 0x98, 0x80),     # 😀 whole
        b(0xC3, 0xC3, 0xA9),           # a lead byte followed by a whole é
        b(0x80, 0x80),                 # two stray continuation bytes
        b(0xC0, 0x80),                 # overlong encoding of NUL
        b(0xE0, 0x80, 0x80),           # overlong 3-byte
        b(0xED, 0xA0, 0x80),           # UTF-16 surrogate encoded in UTF-8
        b(0xF4, 0x90, 0x80, 0x80),     # above U+10FFFF
        b(0xF5, 0xFF, 0xFE),           # bytes that never occur in UTF-8
        b(0xE6) + [pad] + b(0x88, 0x91),   # a special token inside a character
        [user] + b(0xE6, 0x88) + [user],
        b(0x00, 0x09, 0x0A, 0x20, 0x7F),   # control bytes and space
        list(range(256)),              # every byte token in order
    ]


def byte_level(add_prefix_space=False, use_regex=False):
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": False,
            "use_regex": use_regex}


def split(regex=None, string=None, behavior="Isolated", invert=False):
    return {"type": "Split", "pattern": {"Regex": regex} if regex is not None else {"String": string},
            "behavior": behavior, "invert": invert}


def sequence(*steps):
    return {"type": "Sequence", "pretokenizers": list(steps)}


# Variants of glm_style/tokenizer.json that exercise the rest of what the C++ tokenizer accepts:
# every Split behaviour, inverted and literal patterns, regexes with empty matches (how matches
# are enumerated then matters), line anchors, add_prefix_space, nested sequences, and added
# tokens that are normalized, not special and overlapping. The test patches the file the same way.
VARIANTS = {
    "split_removed": {"pre_tokenizer": sequence(split(r"\s+", behavior="Removed"), byte_level())},
    "split_merged_with_previous": {
        "pre_tokenizer": sequence(split(r"\s+", behavior="MergedWithPrevious"), byte_level())},
    "split_merged_with_next": {
        "pre_tokenizer": sequence(split(r"\s+", behavior="MergedWithNext"), byte_level())},
    "split_contiguous_inverted": {
        "pre_tokenizer": sequence(split(r"\p{L}", behavior="Contiguous", invert=True), byte_level())},
    "split_string_pattern": {"pre_tokenizer": sequence(split(string="."), byte_level())},
    "split_empty_lookahead": {"pre_tokenizer": sequence(split(r"(?=[A-Z])"), byte_level())},
    "split_empty_everywhere": {"pre_tokenizer": sequence(split(r"x*"), byte_level())},
    "split_line_anchor": {"pre_tokenizer": sequence(split(r"^ +", behavior="Removed"), byte_level())},
    "gpt2_prefix_space": {"pre_tokenizer": byte_level(add_prefix_space=True, use_regex=True)},
    "split_then_prefix_space": {
        "pre_tokenizer": sequence(split(GLM4_REGEX), byte_level(add_prefix_space=True))},
    "nested_sequence": {
        "pre_tokenizer": sequence(sequence(split(r"\d")), byte_level(use_regex=True))},
    "added_normalized_overlapping": {"extra_added_tokens": [
        {"content": " audio", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": True, "special": False},
        {"content": "audio into", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": False},
        {"content": "<|pad|><|pad|>", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}]},
}

VARIANT_TEXTS = [
    "",
    "Hello World  foo\tBar",
    "The QUICK brown Fox",
    "axxbxxxc x",
    "  lead and trail  ",
    "don't 1234567 a.b.c",
    "a<|pad|>B c",
    "line one\n  line two\n\tthree\n   ",
    "HelloWorldFoo",
    "this audio into text audio audio into <|pad|><|pad|><|pad|>",
    "我还能再搞一个，就算是",
]


def variant_spec(spec, base, patch):
    spec = json.loads(json.dumps(spec))
    if "pre_tokenizer" in patch:
        spec["pre_tokenizer"] = patch["pre_tokenizer"]
    for i, token in enumerate(patch.get("extra_added_tokens", [])):
        spec["added_tokens"].append({"id": base + len(SPECIAL_TOKENS) + i, **token})
    return spec


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="tests/fixtures/tokenizer")
    args = parser.parse_args()

    byte_char = bytes_to_unicode()
    cases = {"tokenizers_version": tokenizers.__version__, "tokenizers": {}, "variants": []}
    for style in ["glm_style", "gpt2_style"]:
        spec, base = glm_layout(train(style), style)
        path = os.path.join(args.out, style, "tokenizer.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(spec, f, ensure_ascii=False, indent=1)
            f.write("\n")
        assert os.path.getsize(path) < 100_000, f"{path} is too large"

        # From here on, everything is HF reading the file just written.
        tok = Tokenizer.from_file(path)
        special_ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}
        assert list(special_ids.values()) == list(range(base, base + len(SPECIAL_TOKENS)))
        assert tok.token_to_id("\u010a") == 10, "byte 0x0A ('\\n') should be id 10"

        def decoded(ids):
            return {"skip_special": tok.decode(ids, skip_special_tokens=True),
                    "keep_special": tok.decode(ids, skip_special_tokens=False)}

        encode = []
        for text in ENCODE_CASES:
            ids = tok.encode(text, add_special_tokens=False).ids
            encode.append({"text": text, "ids": ids, **decoded(ids)})
        decode = [{"ids": ids, **decoded(ids)}
                  for ids in decode_cases(byte_char, tok.get_vocab(), special_ids)]
        if style == "glm_style":
            for name, patch in VARIANTS.items():
                vtok = Tokenizer.from_str(json.dumps(variant_spec(spec, base, patch)))
                rows = []
                for text in VARIANT_TEXTS:
                    ids = vtok.encode(text, add_special_tokens=False).ids
                    rows.append({"text": text, "ids": ids,
                                 "skip_special": vtok.decode(ids, skip_special_tokens=True),
                                 "keep_special": vtok.decode(ids, skip_special_tokens=False)})
                cases["variants"].append({"name": name, **patch, "encode": rows})
        cases["tokenizers"][style] = {
            "base_vocab_size": base, "vocab_size": tok.get_vocab_size(with_added_tokens=True),
            "special_tokens": [[t, i] for t, i in special_ids.items()],  # a list keeps GLM order
            "encode": encode, "decode": decode}
        print(f"{path}: {os.path.getsize(path)} bytes, base vocab {base}, "
              f"{len(encode)} encode cases, {len(decode)} decode cases")

    # One case per line keeps the file readable and its diffs small.
    path = os.path.join(args.out, "cases.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write("{\n" + f' "tokenizers_version": {json.dumps(cases["tokenizers_version"])},\n')
        f.write(' "tokenizers": {\n')
        styles = list(cases["tokenizers"].items())
        for si, (style, c) in enumerate(styles):
            f.write(f'  {json.dumps(style)}: {{\n')
            for key in ["base_vocab_size", "vocab_size", "special_tokens"]:
                f.write(f'   {json.dumps(key)}: {json.dumps(c[key], ensure_ascii=False)},\n')
            for key in ["encode", "decode"]:
                rows = [json.dumps(row, ensure_ascii=False) for row in c[key]]
                f.write(f'   {json.dumps(key)}: [\n    ' + ",\n    ".join(rows) + "\n   ]")
                f.write(",\n" if key == "encode" else "\n")
            f.write("  }" + ("," if si + 1 < len(styles) else "") + "\n")
        f.write(" },\n")
        f.write(' "variants": [\n')
        for vi, v in enumerate(cases["variants"]):
            head = {k: val for k, val in v.items() if k != "encode"}
            f.write("  " + json.dumps(head, ensure_ascii=False)[:-1] + ', "encode": [\n    ')
            f.write(",\n    ".join(json.dumps(r, ensure_ascii=False) for r in v["encode"]))
            f.write("\n  ]}" + ("," if vi + 1 < len(cases["variants"]) else "") + "\n")
        f.write(" ]\n}\n")
    json.load(open(path, encoding="utf-8"))  # the hand-written layout must still be valid JSON
    print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
