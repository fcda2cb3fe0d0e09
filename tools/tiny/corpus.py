#!/usr/bin/env python3
"""Text corpus and tokenizer for the tiny GLM-ASR checkpoint (step 1 of tools/tiny/README.md).

Runs where apt works (not on the GPU machine), in seconds:

    apt-get install -y bible-kjv wamerican wordnet-base   # (+ fortunes fortunes-min for --fortunes)
    PYTHONPATH=/opt/torchenv python3 -m tools.tiny.corpus          # writes tools/tiny/data/

It writes into tools/tiny/data/ (git-ignored; the lead carries it to the GPU machine):
    train.txt       one utterance per line, "source<TAB>text": natural sentences plus random word
                    sequences; the only text the model and the tokenizer ever train on
    heldout.txt     the same format: sentences split off by a hash of their text (never trained
                    on), plus held-out random sequences and the fixed clip sentence(s) below
    tokenizer.json  byte-level BPE trained on train.txt, GLM-ASR's 18 special tokens after it
    corpus.json     counts per source, sizes, settings (for the model card)

Why the corpus looks like this: a training pilot on 20k fortune sentences memorised them
and then "transcribed" by hallucinating fluent fortune-like text. So: many distinct sentences
(public-domain King James Bible, WordNet glosses and usage examples), each used once, plus
random word sequences (a share of training) that no language-model prior can predict; the
decoder must listen to get them right. Fortune cookies (the pilot's text) are optional
(--fortunes): the package is BSD-licensed, but many entries quote copyrighted books, songs and
shows, so the shipped checkpoint leaves them out.

Text is normalised to what espeak-ng will actually say: lowercase words of [a-z'] separated by
single spaces. The synthesiser reads this normalised text, so transcript and audio agree by
construction; sentences whose normalised words espeak would not read as written (acronyms,
single letters, words without a vowel, symbols) are dropped rather than guessed at.
"""

import argparse
import collections
import glob
import hashlib
import itertools
import json
import os
import random
import re
import subprocess
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))

# Sentences that must never be trained on: the clip set speaks them (tools/tiny/clips.py).
FIXED_HELDOUT = {"concord.wav": "concord returned to its place amidst the tents"}

MIN_WORDS, MAX_WORDS = 3, 25
HELDOUT_PER_MILLE = 10  # 1% of the distinct natural sentences, chosen by text hash
RANDOM_SHARE = 0.25  # share of train.txt that is random word sequences
RANDOM_WORDS = (3, 15)  # length range of a random sequence
HELDOUT_RANDOM = 400  # random sequences generated for held-out evaluation only
BPE_VOCAB = 1000  # 256 byte tokens + 744 merges; specials follow at ids 1000..1017
SEED = 20261122

# Fortune files that are not English prose: pictures made of characters, and other languages.
FORTUNE_SKIP = {"ascii-art", "translate-me"}

ONES = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def number_words(n):
    """Cardinal number in words, 0 <= n < 10**9 ("one hundred and five" without "and")."""
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else " " + ONES[n % 10])
    if n < 1000:
        rest = n % 100
        return ONES[n // 100] + " hundred" + ("" if rest == 0 else " " + number_words(rest))
    for size, name in ((10**6, "million"), (10**3, "thousand")):
        if n >= size:
            rest = n % size
            return (
                number_words(n // size)
                + " "
                + name
                + ("" if rest == 0 else " " + number_words(rest))
            )
    raise ValueError(n)


# Characters that mark text espeak would read out in a way we cannot write down (code, URLs,
# prices, formulas): a sentence containing one is dropped, not repaired.
REJECT_CHARS = set("@/\\_=<>|#$*+~^{}`%[]")
WORD_RE = re.compile(r"[a-z]+(?:'[a-z]+)*")
VOWEL_RE = re.compile(r"[aeiouy]")
SINGLE_LETTER_OK = {"a", "i", "o"}


def to_ascii(text):
    """Fold accents (café -> cafe) and typographic quotes/dashes to ASCII."""
    text = (
        text.replace("\u2019", "'")
        .replace("\u2018", "'")
        .replace("\u2014", " ")
        .replace("\u2013", " ")
    )
    text = unicodedata.normalize("NFKD", text)
    return (
        "".join(c for c in text if not unicodedata.combining(c)).encode("ascii", "ignore").decode()
    )


def normalise(sentence, dictionary):
    """One raw sentence -> normalised words "a b c", or None if it cannot be said as written."""
    text = to_ascii(sentence)
    if any(c in REJECT_CHARS for c in text):
        return None
    # An all-capital word that is not a dictionary word is an acronym or a numeral (IBM, XIV):
    # espeak would spell it, the transcript would not.
    for word in re.findall(r"\b[A-Z]{2,}\b", text):
        if word.lower() not in dictionary:
            return None
    text = text.lower().replace("&", " and ")
    if re.search(r"\d[.,:]\d|\d[a-z]|[a-z]\d", text):
        return None  # decimals, times, ordinals and codes: several readings are possible
    text = re.sub(
        r"\d+",
        lambda m: " " + number_words(int(m.group())) + " " if len(m.group()) < 10 else " # ",
        text,
    )
    if "#" in text:
        return None
    text = re.sub(r"[-\s]+", " ", text)
    words = []
    for token in text.split(" "):
        token = token.strip(".,;:!?\"'()")
        if not token:
            continue
        if not WORD_RE.fullmatch(token):
            return None  # leftover punctuation inside a word: "e.g", "a.m", "o-o"
        if not VOWEL_RE.search(token) or (len(token) == 1 and token not in SINGLE_LETTER_OK):
            return None  # "mr", "st", "b": espeak spells or expands them
        words.append(token)
    if not MIN_WORDS <= len(words) <= MAX_WORDS:
        return None
    return " ".join(words)


# Sentence boundaries inside a passage: end punctuation, and ";" / ":" which in the KJV and in
# WordNet glosses separate complete clauses.
SPLIT_RE = re.compile(r"(?<=[.!?;:])\s+|\s+--\s+")


def split_sentences(passage):
    return [p for p in SPLIT_RE.split(passage) if p.strip()]


def kjv_sentences():
    """Every verse of the King James Bible (public domain) via the `bible` program of bible-kjv."""
    out = subprocess.run(
        ["bible", "-l100000", "gen1:1-rev22:21"], check=True, capture_output=True, text=True
    ).stdout
    for line in out.splitlines():
        m = re.match(r"^\s*\d+\s+(.*)$", line)
        if m:
            yield from split_sentences(m.group(1))


def fortune_sentences(folder="/usr/share/games/fortunes"):
    """Fortune cookies: entries separated by "%" lines; attribution lines ("-- Author") dropped."""
    for path in sorted(glob.glob(os.path.join(folder, "*"))):
        name = os.path.basename(path)
        if "." in name or name in FORTUNE_SKIP or os.path.isdir(path):
            continue
        with open(path, encoding="latin-1") as f:
            entries = f.read().split("\n%\n")
        for entry in entries:
            lines = [l for l in entry.splitlines() if not re.match(r"^\s*(--|~~)", l)]
            yield from split_sentences(" ".join(l.strip() for l in lines))


def wordnet_sentences(folder="/usr/share/wordnet"):
    """WordNet 3.0 glosses: each definition and each quoted usage example is one utterance."""
    for pos in ("noun", "verb", "adj", "adv"):
        with open(os.path.join(folder, "data." + pos), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  ") or " | " not in line:
                    continue  # licence header lines start with two spaces
                gloss = line.split(" | ", 1)[1].strip()
                for part in gloss.split(";"):
                    part = part.strip().strip('"').strip()
                    if part:
                        yield part


def dictionary_words(path="/usr/share/dict/american-english"):
    with open(path, encoding="utf-8") as f:
        return [w.strip() for w in f]


def text_hash(text):
    return int(hashlib.sha1(text.encode()).hexdigest()[:12], 16)


def random_sequences(count, word_pool, unigram, rng):
    """Word salad: each word from the word list (uniform) or the corpus unigram distribution
    (so function words appear too, in orders no language model expects)."""
    uni_words = sorted(unigram)
    cum = list(itertools.accumulate(unigram[w] for w in uni_words))
    out = []
    for _ in range(count):
        words = [
            rng.choice(word_pool)
            if rng.random() < 0.5
            else rng.choices(uni_words, cum_weights=cum)[0]
            for _ in range(rng.randint(*RANDOM_WORDS))
        ]
        out.append(" ".join(words))
    return out


def train_tokenizer(texts, out_path):
    """Byte-level BPE on the training text in GLM-ASR's layout (tests/fixtures/tokenizer/make_test_tokenizer.py):
    the GLM-4 split regex then ByteLevel, byte b at id b, merges after, then the 18 specials."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    from tests.fixtures.tokenizer import make_test_tokenizer as mtt

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(mtt.GLM4_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_VOCAB,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(texts, trainer=trainer)
    spec, base = mtt.glm_layout(json.loads(tok.to_str()), "glm_style")
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False)
    # Read it back with HF tokenizers: specials at base..base+17, and a round trip.
    check = Tokenizer.from_file(out_path)
    for i, t in enumerate(mtt.SPECIAL_TOKENS):
        assert check.token_to_id(t) == base + i, t
    sample = texts[0]
    assert check.decode(check.encode(sample).ids) == sample
    return base, check


def write_tsv(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for source, text in rows:
            f.write(f"{source}\t{text}\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(HERE, "data"))
    parser.add_argument(
        "--fortunes",
        action="store_true",
        help="add the fortune files (BSD-licensed package, but many entries quote "
        "copyrighted books, songs and shows; off by default)",
    )
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    dict_words = dictionary_words()
    dictionary = {w.lower() for w in dict_words}
    sources = [("kjv", kjv_sentences), ("wn", wordnet_sentences)]
    if args.fortunes:
        sources.append(("fortune", fortune_sentences))

    seen, natural, raw_counts = set(), [], collections.Counter()
    fixed = set(FIXED_HELDOUT.values())
    for name, producer in sources:
        for sentence in producer():
            raw_counts[name] += 1
            text = normalise(sentence, dictionary)
            if text is None or text in seen:
                continue
            seen.add(text)
            if text not in fixed:
                natural.append((name, text))
    heldout = [(s, t) for s, t in natural if text_hash(t) % 1000 < HELDOUT_PER_MILLE]
    train = [(s, t) for s, t in natural if text_hash(t) % 1000 >= HELDOUT_PER_MILLE]

    # Random sequences: word list entries that are plain lowercase words with a vowel, and the
    # training corpus's own word frequencies (held-out text does not leak into the weights).
    rng = random.Random(SEED)
    pool = sorted({w for w in dict_words if re.fullmatch(r"[a-z]{2,14}", w) and VOWEL_RE.search(w)})
    unigram = collections.Counter(w for _, t in train for w in t.split())
    n_random = int(len(train) * RANDOM_SHARE / (1 - RANDOM_SHARE))
    randoms = random_sequences(n_random + HELDOUT_RANDOM, pool, unigram, rng)
    randoms = list(dict.fromkeys(r for r in randoms if r not in seen))
    train += [("random", t) for t in randoms[HELDOUT_RANDOM:]]
    heldout += [("random", t) for t in randoms[:HELDOUT_RANDOM]]
    heldout += [("clip:" + f, t) for f, t in FIXED_HELDOUT.items()]

    rng.shuffle(train)
    rng.shuffle(heldout)
    train_path, heldout_path = (
        os.path.join(args.out, "train.txt"),
        os.path.join(args.out, "heldout.txt"),
    )
    write_tsv(train_path, train)
    write_tsv(heldout_path, heldout)
    assert not {t for _, t in train} & {t for _, t in heldout}, "held-out text leaked into train"

    base, tok = train_tokenizer([t for _, t in train], os.path.join(args.out, "tokenizer.json"))
    n_tokens = sum(len(tok.encode(t).ids) for _, t in train[:20000]) / min(20000, len(train))
    summary = {
        "raw_sentences": dict(raw_counts),
        "train": dict(collections.Counter(s for s, _ in train)),
        "heldout": dict(collections.Counter(s.split(":")[0] for s, _ in heldout)),
        "train_total": len(train),
        "heldout_total": len(heldout),
        "train_words_mean": sum(len(t.split()) for _, t in train) / len(train),
        "train_tokens_mean": n_tokens,
        "tokenizer_base_vocab": base,
        "tokenizer_vocab": base + 18,
        "bytes": {os.path.basename(p): os.path.getsize(p) for p in (train_path, heldout_path)},
        "settings": {
            "min_words": MIN_WORDS,
            "max_words": MAX_WORDS,
            "random_share": RANDOM_SHARE,
            "heldout_per_mille": HELDOUT_PER_MILLE,
            "seed": SEED,
            "fortunes": args.fortunes,
        },
    }
    with open(os.path.join(args.out, "corpus.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
