"""Values shared by the Home Assistant tests."""

from pathlib import Path

SPEAKERS = Path("onnx/speakers")  # speaker folders inside a bundle
