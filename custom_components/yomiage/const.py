"""Names shared by the integration's modules (config keys, option defaults, folders)."""

from __future__ import annotations

from pathlib import Path
from typing import Final

DOMAIN: Final = "yomiage"

# Config entry data: where the bundle lives and how it got there.
CONF_SOURCE: Final = "source"  # one of SOURCE_*
CONF_PATH: Final = "path"  # bundle folder (absolute)
CONF_REPO_ID: Final = "repo_id"
CONF_REVISION: Final = "revision"  # Hub entries store the commit they were downloaded from
CONF_SPEAKERS: Final = "speakers"
CONF_TOKEN: Final = "token"
CONF_HOST: Final = "host"  # Wyoming server entries
CONF_PORT: Final = "port"
CONF_ADDON: Final = "addon"  # a server entry on the Yomiage add-on: its slug
CONF_MODELS: Final = "models"  # the AivisHub entry: the uuids of its models

SOURCE_OFFICIAL: Final = "official"
SOURCE_HUGGINGFACE: Final = "huggingface"
SOURCE_LOCAL: Final = "local"
SOURCE_WYOMING: Final = "wyoming"  # a Yomiage Wyoming server speaks; nothing runs here
SOURCE_ADDON: Final = "addon"  # the flow installs the Yomiage add-on, then a server entry on it
SOURCE_AIVISHUB: Final = "aivishub"  # models from AivisHub: one entry holds them all

DEFAULT_WYOMING_PORT: Final = 10200  # the add-on's and `yomiage serve`'s port

# Options (options flow) = engine synthesis options + how the engine runs.
CONF_VOICE: Final = "voice"
CONF_SPEED: Final = "speed"
CONF_STYLE_WEIGHT: Final = "style_weight"
CONF_SDP_RATIO: Final = "sdp_ratio"
CONF_NOISE: Final = "noise"
CONF_NOISE_W: Final = "noise_w"
CONF_PAUSE_SCALE: Final = "pause_scale"
CONF_PITCH: Final = "pitch"
CONF_INTONATION: Final = "intonation"
CONF_VOLUME: Final = "volume"
CONF_LEAD_SILENCE: Final = "lead_silence"
CONF_NORMALIZE: Final = "normalize"
CONF_SMOOTH_START: Final = "smooth_start"
CONF_THREADS: Final = "threads"
CONF_DEVICE: Final = "device"
CONF_USER_DICTIONARY: Final = "user_dictionary"  # text, one `surface,reading,accent` a line

# Numeric synthesis options, in the order the options form shows them. Their limits come from the
# engine (``engine.options.OPTION_LIMITS``), their defaults from ``SynthesisOptions``.
SYNTHESIS_NUMBERS: Final = (
    CONF_SPEED,
    CONF_STYLE_WEIGHT,
    CONF_SDP_RATIO,
    CONF_NOISE,
    CONF_NOISE_W,
    CONF_PAUSE_SCALE,
    CONF_PITCH,
    CONF_INTONATION,
    CONF_VOLUME,
    CONF_LEAD_SILENCE,
)
# Synthesis options that are on or off, in the order the options form shows them.
SYNTHESIS_SWITCHES: Final = (CONF_NORMALIZE, CONF_SMOOTH_START)
# Every synthesis option, on every entry (a server entry carries them to the server).
SUPPORTED_OPTIONS: Final = [CONF_VOICE, *SYNTHESIS_NUMBERS, *SYNTHESIS_SWITCHES]
# The tts option that carries the active user dictionary's fingerprint: it is in the entity's
# default options so that Home Assistant's cache key changes when the words do. It chooses
# nothing: the dictionary is set in the entry's options.
OPTION_DICTIONARY: Final = "dictionary"

DEVICES: Final = ("auto", "cpu", "cuda")
DEFAULT_DEVICE: Final = "auto"
DEFAULT_THREADS: Final = 0  # 0 = the engine picks (physical cores, within a CPU quota)
MAX_THREADS: Final = 64

# One entry: the pickers list every tag, and Home Assistant accepts only those listed (a second
# tag, ja-JP, showed "Japanese" twice). Nothing released has stored ja-JP in a pipeline.
LANGUAGES: Final = ["ja"]
DEFAULT_LANGUAGE: Final = "ja"

# HACS keeps this folder across updates (hacs.json "persistent_directory"): voices go here.
# Modules read it as ``const.MODELS_DIR`` at call time, so tests can point it elsewhere.
MODELS_DIRNAME: Final = "models"
MODELS_DIR: Final = Path(__file__).parent / MODELS_DIRNAME
# Graphs the engine prepared for this machine's CPU, a folder per bundle, beside the voices.
PREPARED_GRAPHS_DIRNAME: Final = "prepared-graphs"
# The AivisHub entry's .aivmx files, beside the official voices whose language model they share.
AIVISHUB_DIRNAME: Final = "aivishub"

# Download failures worth another try later (Home Assistant retries setup); others need the user.
TRANSIENT_DOWNLOAD_REASONS: Final = frozenset(
    {"offline", "interrupted", "hub_error", "hub_down", "busy", "verification"}
)

# Diagnostics keep this many recent synthesis timings.
RECENT_TIMINGS: Final = 20
