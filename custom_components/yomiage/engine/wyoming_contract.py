"""What a Yomiage Wyoming server and its client (the integration's server entries) agree on.

wyoming 1.5.4 (the version Home Assistant 2025.4 pins) has no classes for streaming text input, so
their type names are written here; they are plain events on the wire (``synthesize-start``,
``synthesize-chunk`` with ``text``, ``synthesize-stop``, answered by ``synthesize-stopped``).

``synthesize`` and ``synthesize-start`` may carry ``yomiage_options``: a JSON object of synthesis
options by their ``SynthesisOptions`` names (speed, style_weight, sdp_ratio, noise, noise_w,
pause_scale, pitch, intonation, volume, lead_silence, normalize, smooth_start) over the server's
settings for that request. Other clients send none and get the server's settings. A stream whose
text comes in one chunk, then ``synthesize-stop`` at once, is spoken as a whole message (a smooth
start where the server's box is slower than real time), as Home Assistant sends whole messages.

AivisHub voices on a server (``yomiage serve --aivishub``, the add-on's ``aivishub_models``): each
voice of an AIVMX file names its model in its attribution's url (the model's AivisHub page,
``hub/aivishub.py``'s ``PAGE_ROOT`` + uuid) and gives its version. A client asks the server for a
model's newest version with ``AIVISHUB_UPDATE`` ``{"model": uuid}``; the server answers
``AIVISHUB_PROGRESS`` ``{"model", "fraction"}`` while it downloads, then ``AIVISHUB_UPDATED``
``{"model", "version"}`` once the new file speaks, or ``error`` whose code is the download
failure's translation key (``aivishub_<reason>``). A server older than this protocol gives no
version and no page: its voices get no updates.
"""

from __future__ import annotations

PROGRAM = "yomiage"  # the tts program a Yomiage server describes itself as
# The oldest server (its program's version: the yomiage package's) whose events this client's
# are; raise it with a change to the events above. An older one gets a repair issue.
MINIMUM_SERVER_VERSION = "0.1.0"
# How a Yomiage server announces itself on the network (zeroconf): a Wyoming service, as
# wyoming-piper's, with a TXT property that Home Assistant's own wyoming integration ignores and
# Yomiage's config flow matches (its value: the protocol's version below).
ZEROCONF_TYPE = "_wyoming._tcp.local."
ZEROCONF_MARK = "yomiage"
ZEROCONF_MARK_VERSION = "1"
LANGUAGE = "ja"
SYNTHESIZE = "synthesize"
SYNTHESIZE_START = "synthesize-start"
SYNTHESIZE_CHUNK = "synthesize-chunk"
SYNTHESIZE_STOP = "synthesize-stop"
SYNTHESIZE_STOPPED = "synthesize-stopped"
YOMIAGE_OPTIONS = "yomiage_options"
AIVISHUB_UPDATE = "yomiage-aivishub-update"
AIVISHUB_PROGRESS = "yomiage-aivishub-progress"
AIVISHUB_UPDATED = "yomiage-aivishub-updated"
