"""Peak memory of one long request, each path and length in a fresh process (VmHWM).

    .venv/bin/python -m tools.long_text_memory --bundle DIR [--chars 300 5000] \
        [--path synthesize stream server]

``synthesize`` and ``stream`` call the engine; ``server`` sends the text to a Wyoming server in
the same process as one ``synthesize`` event, the way Home Assistant's wyoming integration asks,
and reads the audio back. Prints a Markdown table (and ``--json`` lines). Runs under the venv
of the engine (.venv); never imports torch.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tools.bench import TEXTS
from tools.bench_worker import memory

PATHS = ("synthesize", "stream", "server")


def long_text(chars: int) -> str:
    """``chars`` characters of prose, cut at a sentence end where one is near."""
    prose = TEXTS["long"]  # the benchmark's long text: eight sentences, 209 characters
    text = (prose * (chars // len(prose) + 1))[:chars]
    end = text.rfind("。")
    return text[: end + 1] if end >= chars * 0.9 else text


def measure(bundle: Path, path: str, chars: int) -> dict[str, Any]:
    """One request in this process; peak and current RSS after it, in MB."""
    from yomiage_engine import Engine

    engine = Engine(bundle, device="cpu")
    engine.load_all()
    loaded = memory()["VmHWM"]
    text = long_text(chars)
    started = time.perf_counter()
    if path == "synthesize":
        audio_s = engine.synthesize(text).audio_s
    elif path == "stream":
        audio_s = sum(chunk.audio_s for chunk in engine.stream(text))
    else:
        audio_s = asyncio.run(_through_server(engine, text))
    seconds = time.perf_counter() - started
    after = memory()
    return {
        "path": path,
        "chars": len(text),
        "audio_s": round(audio_s, 1),
        "seconds": round(seconds, 1),
        "peak_after_load_mb": round(loaded / 1024),
        "peak_mb": round(after["VmHWM"] / 1024),
        "rss_after_mb": round(after["VmRSS"] / 1024),
    }


async def _through_server(engine: Any, text: str) -> float:
    from wyoming.audio import AudioChunk, AudioStop
    from wyoming.client import AsyncTcpClient
    from wyoming.error import Error
    from wyoming.tts import Synthesize

    from yomiage.wyoming_server import WyomingTtsServer

    server = WyomingTtsServer(engine)
    await server.start("tcp://127.0.0.1:0")
    try:
        host, _, port = server.address.removeprefix("tcp://").rpartition(":")
        samples = 0
        async with AsyncTcpClient(host, int(port)) as client:
            await client.write_event(Synthesize(text=text).event())
            while (event := await client.read_event()) is not None:
                if AudioChunk.is_type(event.type):
                    samples += len(AudioChunk.from_event(event).audio) // 2
                elif Error.is_type(event.type):
                    raise RuntimeError(Error.from_event(event).text)
                elif AudioStop.is_type(event.type):
                    break
        return samples / engine.sample_rate
    finally:
        await server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--chars", type=int, nargs="+", default=[300, 5000])
    parser.add_argument("--path", choices=PATHS, nargs="+", default=list(PATHS))
    parser.add_argument("--json", action="store_true", help="one JSON line per measurement")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.prepare:
        from yomiage_engine import Engine

        Engine(args.bundle, device="cpu").load_all()
        return 0
    if args.worker:  # one measurement in this fresh process
        print(json.dumps(measure(args.bundle, args.path[0], args.chars[0])))
        return 0
    # The first load of a bundle prepares its graphs for this machine (the graph cache): done
    # here once, so that every measurement sees the start-up users get from then on.
    prepare = [sys.executable, "-m", "tools.long_text_memory", "--worker", "--prepare"]
    subprocess.run([*prepare, "--bundle", str(args.bundle)], check=True, capture_output=True)
    rows = []
    for path in args.path:
        for chars in args.chars:
            command = [sys.executable, "-m", "tools.long_text_memory", "--worker"]
            command += ["--bundle", str(args.bundle), "--path", path, "--chars", str(chars)]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                return 1
            rows.append(json.loads(done.stdout.splitlines()[-1]))
            if args.json:
                print(done.stdout.splitlines()[-1], flush=True)
    print("| path | characters | audio s | seconds | peak RSS after load MB | peak RSS MB ", end="")
    print("| RSS after MB |\n|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['path']} | {row['chars']} | {row['audio_s']} | {row['seconds']} "
            f"| {row['peak_after_load_mb']} | {row['peak_mb']} | {row['rss_after_mb']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
