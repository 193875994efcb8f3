"""The ``yomiage`` command: list voices, speak text into an audio file, show readings.

Exit status 0 on success, 2 with a one-line message on bad input (never a traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from yomiage_engine import AudioChunk, InvalidOptionError, YomiageError, sentence_reports

from .command_flags import add_engine_flags, add_synthesis_flags, engine_from, synthesis_options

EXIT_BAD_INPUT = 2

Handler = Callable[[argparse.Namespace], int]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except YomiageError as err:
        print(f"yomiage: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="yomiage", description="Japanese text-to-speech (SBV2 JP-Extra)."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    voices = commands.add_parser("voices", help="list the speakers and styles of a bundle")
    add_engine_flags(voices)
    voices.set_defaults(handler=_voices)

    say = commands.add_parser(
        "say", help="speak TEXT into a WAV, FLAC or Ogg Vorbis file (written as the audio comes)"
    )
    say.add_argument("text", help="Japanese text ('-' reads standard input)")
    say.add_argument(
        "-o", "--output", type=Path, required=True, help="file to write (.wav, .flac or .ogg)"
    )
    say.add_argument("--voice", help="speaker/style (default: the bundle's first)")
    add_synthesis_flags(say, "the speech")
    say.add_argument("--json", action="store_true", help="print a JSON summary")
    add_engine_flags(say)
    say.set_defaults(handler=_say)

    read = commands.add_parser("read", help="print the reading (katakana), one sentence a line")
    read.add_argument("text")
    read.add_argument("--user-dict", type=Path, help="CSV of surface,reading,accent to read with")
    read.add_argument(
        "--verbose", action="store_true", help="show the normalised text before each reading"
    )
    read.set_defaults(handler=_read)

    from .download_cli import add_subcommands as add_download_commands
    from .wyoming_server import add_serve_command

    add_download_commands(commands)
    add_serve_command(commands)
    return parser


# Output file extension -> libsndfile container and sample format (16-bit, as the engine makes).
AUDIO_FILE_FORMATS: dict[str, tuple[str, str]] = {
    ".wav": ("WAV", "PCM_16"),
    ".flac": ("FLAC", "PCM_16"),
    ".ogg": ("OGG", "VORBIS"),
}


def _voices(args: argparse.Namespace) -> int:
    engine = engine_from(args)
    engine.load_all()  # every graph checked, as the config flow and the server check them
    for speaker, styles in engine.voices.items():
        for style in styles:
            print(f"{speaker}/{style}")
    return 0


def _say(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.text == "-" else args.text
    options = synthesis_options(args, args.voice)
    file_format = _file_format(args.output)  # a name it cannot write fails before the model loads
    engine = engine_from(args)
    started = time.perf_counter()
    chunks = engine.stream(text, options)
    first_audio_s, written = _write_audio(
        args.output, file_format, engine.sample_rate, chunks, started
    )
    if args.json:
        print(
            json.dumps(
                _summary(written, first_audio_s, time.perf_counter() - started),
                ensure_ascii=False,
                indent=2,
            )
        )
    return 0


def _write_audio(
    path: Path, file_format: tuple[str, str], sample_rate: int, chunks: Any, started: float
) -> tuple[float | None, list[AudioChunk]]:
    """Write chunks as they come in ``file_format`` (libsndfile's container and sample format)
    to a hidden file beside ``path``, moved there whole at the end: a failed request leaves no
    partial file (an earlier file of that name stays as it was), and two runs at once do not
    share one. Returns the first-audio time and the chunks."""
    import soundfile  # only this command writes files

    container, subtype = file_format
    first_audio_s: float | None = None
    written: list[AudioChunk] = []
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    os.close(handle)
    partial = Path(name)
    try:
        with soundfile.SoundFile(
            partial, "w", samplerate=sample_rate, channels=1, format=container, subtype=subtype
        ) as out:
            for chunk in chunks:
                if first_audio_s is None:
                    first_audio_s = time.perf_counter() - started
                out.write(chunk.pcm)
                written.append(chunk)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return first_audio_s, written


def _file_format(path: Path) -> tuple[str, str]:
    """libsndfile's container and sample format for a file name's extension."""
    found = AUDIO_FILE_FORMATS.get(path.suffix.lower())
    if found is None:
        named = f"'{path.suffix}' files" if path.suffix else "a file without an extension"
        *others, last = AUDIO_FILE_FORMATS
        known = f"{', '.join(others)} or {last}"
        raise InvalidOptionError(
            f"cannot write {named}: the output file must end in {known}", "output"
        )
    return found


def _summary(
    chunks: list[AudioChunk], first_audio_s: float | None, total_s: float
) -> dict[str, Any]:
    audio_s = sum(c.audio_s for c in chunks)
    return {
        "sentences": [
            {
                "text": report.text,
                "pause_before_s": round(report.pause_before_s, 3),
                "audio_s": round(report.audio_s, 3),
                "compute_s": round(report.compute_s, 3),
            }
            for report in sentence_reports(chunks)
        ],
        "audio_s": round(audio_s, 3),
        "compute_s": round(total_s, 3),
        "first_audio_s": None if first_audio_s is None else round(first_audio_s, 3),
        "speed_factor": round(audio_s / total_s, 3) if total_s > 0 else None,
    }


def _read(args: argparse.Namespace) -> int:
    from yomiage_engine.text.frontend import Frontend, katakana

    if args.user_dict is not None:
        from yomiage_engine.text.readings.user_dict import UserDictionary

        UserDictionary.from_file(args.user_dict).apply()
    frontend = Frontend()
    for sentence in frontend.sentences(args.text):
        if args.verbose:
            print(f"{sentence.text}\t", end="")
        print(katakana(sentence.text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
