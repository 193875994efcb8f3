"""What a Yomiage Wyoming server and its client (the integration's server entries) agree on.

wyoming 1.5.4 (the version Home Assistant 2025.4 pins) has no classes for streaming text input, so
their type names are written here; they are plain events on the wire (``synthesize-start``,
``synthesize-chunk`` with ``text``, ``synthesize-stop``, answered by ``synthesize-stopped``).

``synthesize`` and ``synthesize-start`` may carry ``yomiage_options``: a JSON object of synthesis
options by their ``SynthesisOptions`` names (speed, style_weight, sdp_ratio, noise, noise_w,
pause_scale, volume, lead_silence, normalize) over the server's settings for that request. Other
clients send none and get the server's settings.
"""

from __future__ import annotations

PROGRAM = "yomiage"  # the tts program a Yomiage server describes itself as
LANGUAGE = "ja"
SYNTHESIZE = "synthesize"
SYNTHESIZE_START = "synthesize-start"
SYNTHESIZE_CHUNK = "synthesize-chunk"
SYNTHESIZE_STOP = "synthesize-stop"
SYNTHESIZE_STOPPED = "synthesize-stopped"
YOMIAGE_OPTIONS = "yomiage_options"
