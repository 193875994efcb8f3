"""Inputs shared by the engine tests."""

from custom_components.yomiage.engine.synthesis.options import SynthesisOptions

# Noise off: the graphs become deterministic, so outputs can be compared exactly.
QUIET = SynthesisOptions(noise=0.0, noise_w=0.0)
THREE_SENTENCES = "今日はいい天気ですね。散歩に行きましょう！公園まで歩けますか？"
SAMPLE_RATE = 44100
