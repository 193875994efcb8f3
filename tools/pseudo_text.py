"""Random Japanese-like model inputs, shaped exactly like the engine's, with known mora counts.

Used to calibrate random voices and to measure how fast they speak without a G2P in the tools
environment. The shape matters more than the words: the engine's sequences are SBV2's, i.e. a pad
phone "_" at both ends, blanks (phone, tone and language all 0) between phones, Japanese phones
with tones 6/7 and language 1, punctuation as phones; BERT features repeat one row per character.
A random voice's durations depend on these (blanks alone are half the sequence), not on meaning.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from yomiage_engine.text.symbols import JP_LANGUAGE_ID, JP_TONE_START, PAD_ID, SYMBOL_TO_ID

# Frequencies measured with the engine's front end on 88 everyday sentences (1,292 morae).
CONSONANTS = {
    "k": 0.138, "t": 0.118, "n": 0.11, "s": 0.085, "m": 0.082, "r": 0.08, "d": 0.065,
    "sh": 0.06, "g": 0.06, "w": 0.032, "y": 0.031, "h": 0.023, "ch": 0.021, "b": 0.018,
    "ts": 0.016, "j": 0.015, "z": 0.014, "p": 0.01, "ky": 0.007, "f": 0.007,
}  # fmt: skip
VOWELS = {"a": 0.291, "o": 0.239, "i": 0.213, "u": 0.136, "e": 0.121}
# Mora kinds: consonant + vowel, vowel, moraic nasal, geminate.
MORA_KINDS = {"cv": 0.728, "v": 0.197, "N": 0.048, "q": 0.027}
COMMA_EVERY = 48  # morae per comma
HIGH_TONE = 0.455  # share of high-pitch morae


@dataclass(frozen=True)
class PseudoSentence:
    phones: np.ndarray  # int64 [P], blanks interleaved
    tones: np.ndarray  # int64 [P]
    languages: np.ndarray  # int64 [P]
    char_slots: np.ndarray  # int64: phone slots per character (like word2ph), sums to P
    morae: int

    def model_inputs(
        self, bert_dim: int, style: np.ndarray, rng: np.random.Generator
    ) -> dict[str, torch.Tensor]:
        """Inputs of ``SynthesizerTrn.encode`` (batch of one), random BERT rows per character."""
        rows = rng.normal(0.0, 1.0, (len(self.char_slots), bert_dim)).astype(np.float32)
        bert = np.repeat(rows, self.char_slots, axis=0).T
        return {
            "x": torch.from_numpy(self.phones)[None],
            "x_lengths": torch.tensor([len(self.phones)]),
            "sid": torch.tensor([0]),
            "tone": torch.from_numpy(self.tones)[None],
            "language": torch.from_numpy(self.languages)[None],
            "bert": torch.from_numpy(np.ascontiguousarray(bert))[None],
            "style_vec": torch.from_numpy(np.asarray(style, np.float32))[None],
        }


def pseudo_sentence(rng: np.random.Generator, n_morae: int) -> PseudoSentence:
    """A random sentence of ``n_morae`` morae, commas inside, '.', '?' or '!' at the end."""
    characters: list[list[tuple[str, int]]] = [[("_", 0)]]  # (phone, tone 0/1) per character
    for index in range(n_morae):
        tone = int(rng.random() < HIGH_TONE)
        characters.append([(phone, tone) for phone in _mora(rng)])
        if 0 < index < n_morae - 3 and rng.random() < 1 / COMMA_EVERY:
            characters.append([(",", 0)])
    characters.append([(str(rng.choice([".", ".", ".", "?", "!"])), 0)])
    characters.append([("_", 0)])
    return _interleaved(characters, n_morae)


def _mora(rng: np.random.Generator) -> list[str]:
    kind = _draw(rng, MORA_KINDS)
    if kind == "cv":
        return [_draw(rng, CONSONANTS), _draw(rng, VOWELS)]
    if kind == "v":
        return [_draw(rng, VOWELS)]
    return [kind]


def _draw(rng: np.random.Generator, frequencies: dict[str, float]) -> str:
    weights = np.fromiter(frequencies.values(), dtype=np.float64)
    return list(frequencies)[int(rng.choice(len(weights), p=weights / weights.sum()))]


def _interleaved(characters: list[list[tuple[str, int]]], morae: int) -> PseudoSentence:
    """SBV2's add_blank: a blank before every phone and at the end; the first blank goes with
    the first character, each other blank with the phone before it."""
    phones, tones, languages, slots = [PAD_ID], [0], [0], []
    for character in characters:
        for phone, tone in character:
            phones += [SYMBOL_TO_ID[phone], PAD_ID]
            tones += [tone + JP_TONE_START, 0]
            languages += [JP_LANGUAGE_ID, 0]
        slots.append(2 * len(character))
    slots[0] += 1

    def array(values: list[int]) -> np.ndarray:
        return np.asarray(values, dtype=np.int64)

    return PseudoSentence(array(phones), array(tones), array(languages), array(slots), morae)
