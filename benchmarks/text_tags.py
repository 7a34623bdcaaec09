"""The text tag parser's speed: ``<think>`` / ``<tool_call>`` in streamed content, in MB/s.

    .venv/bin/python -m benchmarks.text_tags [--mb 2] [--seconds 3] [--rounds 9]
        [--min-chars 4] [--max-chars 40] [--check]

One long mixed stream — replies of a local model: think blocks, prose answers (a quarter
with an HTML snippet, some comparisons with ``<``), single and parallel tool calls, unclosed
ones — cut into deltas of 4–40 characters, uniformly (the sizes OpenAI-compatible servers
stream: one token to a batch of several), then:

  parser        each reply's deltas through ``TextTagParser.feed`` (a new parser per reply,
                closed at its end): the work text tools add per delta
  provider on   each delta as the provider handles it, ``delta_chunks(delta, out, parser)``
  provider off  the same with the parser off, ``delta_chunks(delta, out)``: every delta one
                TextChunk — the anchor: what a stream costs without the feature
  re (whole)    one ``re.finditer`` over each whole reply's text, slicing the pieces between
                tags: the best simple alternative, which cannot stream (it needs the whole
                reply) — how far C-speed scanning is ahead

Every path runs in each of ``--rounds`` interleaved rounds (the order rotates); the table gives
the median and range of MB/s (UTF-8 bytes of content), the cost per delta, and ratios paired
within each round. Most of the cost is per delta, not per byte: smaller deltas mean fewer MB/s
at the same cost per delta (``--max-chars 4`` shows the token-per-delta extreme).
Target: the parser ≥ 50 MB/s — far above any model's output rate, so it never bounds a stream.
``--check`` exits 1 when the median misses it.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._common import fmt_range, interleaved_rounds, median_range, table  # noqa: E402
from benchmarks.agui_encode import paired  # noqa: E402
from loopgate.gateway.reference.openai_wire import Delta, delta_chunks  # noqa: E402
from loopgate.gateway.reference.text_tags import TextTagParser  # noqa: E402
from loopgate.gateway.reference.types import (  # noqa: E402
    ModelChunk,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
)

TARGET_MBS = 50.0

THINK = [
    "The user asks about {city}; I have a get_weather tool that needs a city and a unit. ",
    "Celsius is the sensible default unless they said otherwise, so I will ask for it. ",
    "If the temperature is < 10 I should suggest a coat, otherwise a light jacket will do. ",
    "Then I summarise the forecast in a sentence or two, without the raw numbers. ",
    "Wait, they might also care about rain; the tool reports that too, so one call is enough. ",
]
ANSWER = [
    "In {city} it is sunny and 22 °C this afternoon, with a light breeze from the west. ",
    "Tomorrow looks similar, though clouds may build up in the evening. ",
    "Take sunscreen if you go out at midday: the UV index is above 5. ",
    "Evenings are cool, so a light jacket is a good idea after sunset. ",
]
CODE = '\n```html\n<div class="weather">{city}: <b>22 °C</b></div>\n```\n'
# --dense: every sentence full of "<" that is not a tag (HTML, comparisons): the stress case.
DENSE_THINK = [
    "If temperature < 10 then a coat, else if 10 <= t < 20 a jacket; {city} is <= 30. ",
]
DENSE_ANSWER = [
    'In {city} use <b>sunscreen</b> if UV > 5; a < b && c > d: <div class="w">{city}</div> ',
]
CALL = (
    '<tool_call>\n{{"name": "get_weather", "arguments": {{"city": "{city}", '
    '"unit": "celsius"}}}}\n</tool_call>'
)
CITIES = ["Paris", "Oslo", "Lima", "Kyoto", "Cairo", "Quito", "Perth", "Dakar"]


def replies(total_bytes: int, rng: random.Random, dense: bool = False) -> list[str]:
    """Replies of the shapes local models write, until ``total_bytes`` of content."""
    think_pool, answer_pool = (DENSE_THINK, DENSE_ANSWER) if dense else (THINK, ANSWER)
    out: list[str] = []
    size = 0
    while size < total_bytes:
        city = rng.choice(CITIES)
        shape = rng.randrange(5)
        thought = "".join(rng.choice(think_pool) for _ in range(rng.randint(3, 25)))
        think = "<think>\n" + thought.format(city=city) + "\n</think>\n\n"
        answer = "".join(rng.choice(answer_pool) for _ in range(rng.randint(2, 20)))
        answer = answer.format(city=city)
        if rng.random() < 0.25:
            answer += CODE.format(city=city)
        if shape == 0:  # think, answer
            text = think + answer
        elif shape == 1:  # think, one call
            text = think + CALL.format(city=city)
        elif shape == 2:  # text, parallel calls
            text = "Checking.\n" + "\n".join(CALL.format(city=c) for c in rng.sample(CITIES, 3))
        elif shape == 3:  # a plain answer
            text = answer
        else:  # think, an unclosed call
            text = think + CALL.format(city=city).removesuffix("</tool_call>")
        out.append(text)
        size += len(text.encode())
    return out


def cut(text: str, rng: random.Random, low: int, high: int) -> list[str]:
    """Deltas of ``low``–``high`` characters, uniformly."""
    parts: list[str] = []
    at = 0
    while at < len(text):
        n = rng.randint(low, high)
        parts.append(text[at : at + n])
        at += n
    return parts


def parser_path(streams: list[list[str]], nbytes: int) -> Callable[[], int]:
    def run() -> int:
        for deltas in streams:
            parser = TextTagParser()
            feed = parser.feed
            out: list[ModelChunk] = []
            for delta in deltas:
                feed(delta, out)
            parser.close(out)
        return nbytes

    return run


def census(streams: list[list[str]]) -> dict[str, int]:
    """What the parser makes of the stream: characters of reasoning and text, tool calls —
    proof that the paths measured do the work (every call found, no tag left in the text)."""
    counts = {"reasoning": 0, "text": 0, "calls": 0, "tags in text": 0}
    for deltas in streams:
        parser = TextTagParser()
        out: list[ModelChunk] = []
        for delta in deltas:
            parser.feed(delta, out)
        parser.close(out)
        for chunk in out:
            if isinstance(chunk, ToolCallChunk):
                counts["calls"] += 1
            elif isinstance(chunk, ReasoningChunk):
                counts["reasoning"] += len(chunk.delta)
            elif isinstance(chunk, TextChunk):
                counts["text"] += len(chunk.delta)
                counts["tags in text"] += chunk.delta.count("<tool_call>")
    return counts


def provider_path(streams: list[list[str]], nbytes: int, *, on: bool) -> Callable[[], int]:
    wire = [[Delta(content=d) for d in deltas] for deltas in streams]

    def run() -> int:
        for deltas in wire:
            parser = TextTagParser() if on else None
            for delta in deltas:
                out: list[ModelChunk] = []
                delta_chunks(delta, out, parser)
            if parser is not None:
                parser.close([])
        return nbytes

    return run


TAGS = re.compile(r"<think>|</think>|<tool_call>|</tool_call>")


def regex_path(texts: list[str], nbytes: int) -> Callable[[], int]:
    def run() -> int:
        for text in texts:
            pieces: list[str] = []
            at = 0
            for match in TAGS.finditer(text):
                pieces.append(text[at : match.start()])
                at = match.end()
            pieces.append(text[at:])
        return nbytes

    return run


def measure(
    paths: dict[str, Callable[[], int]], seconds: float, rounds: int
) -> dict[str, list[float]]:
    """Bytes per CPU second of each path in every one of ``rounds`` interleaved rounds, timed
    in this process's CPU time: the work is pure CPU in one thread, and on a shared machine
    wall time would also count the other processes' turns on the cores."""
    return interleaved_rounds(paths, seconds, rounds, clock=time.process_time)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=2.0, help="MB of content in the stream")
    parser.add_argument("--seconds", type=float, default=3.0, help="time per path, all rounds")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds")
    parser.add_argument("--min-chars", type=int, default=4, help="shortest delta")
    parser.add_argument("--max-chars", type=int, default=40, help="longest delta")
    parser.add_argument(
        "--dense", action="store_true", help='the stress case: "<" in nearly every delta'
    )
    parser.add_argument("--check", action="store_true", help="exit 1 below the target")
    args = parser.parse_args(argv)

    rng = random.Random(20240519)
    texts = replies(int(args.mb * 1_000_000), rng, args.dense)
    streams = [cut(t, rng, args.min_chars, args.max_chars) for t in texts]
    nbytes = sum(len(t.encode()) for t in texts)
    deltas = sum(len(s) for s in streams)
    with_lt = sum("<" in d for s in streams for d in s)
    print(
        f"{len(texts)} replies, {nbytes / 1e6:.1f} MB of content in {deltas:,} deltas "
        f"(mean {nbytes / deltas:.1f} bytes, {with_lt / deltas:.0%} with a '<'), "
        f"python {sys.version.split()[0]}"
    )

    found = census(streams)
    expected = sum(t.count("<tool_call>") for t in texts)
    print(
        f"parsed: {found['reasoning']:,} characters of reasoning, {found['text']:,} of text, "
        f"{found['calls']:,} tool calls (of {expected:,} written), "
        f"{found['tags in text']} <tool_call> left in the text"
    )
    if found["calls"] != expected or found["tags in text"]:
        print("the parser missed tool calls: the figures below would measure the wrong work")
        return 1

    names = ("parser", "provider on", "provider off", "re (whole)")
    results = measure(
        {
            names[0]: parser_path(streams, nbytes),
            names[1]: provider_path(streams, nbytes, on=True),
            names[2]: provider_path(streams, nbytes, on=False),
            names[3]: regex_path(texts, nbytes),
        },
        args.seconds,
        args.rounds,
    )
    mbs = {name: [v / 1e6 for v in values] for name, values in results.items()}
    print(
        f"\n{args.rounds} interleaved rounds, CPU time: median (lowest … highest); "
        "ratios paired per round"
    )
    table(
        "content MB/s",
        ("path", "MB/s", "ns per delta", "vs provider off", "vs re (whole)"),
        [
            (
                name,
                fmt_range(mbs[name], ",.1f"),
                fmt_range([nbytes / v / deltas * 1e9 for v in results[name]], ",.0f"),
                fmt_range(paired(results, name, names[2]), ".2f") + "x",
                fmt_range(paired(results, name, names[3]), ".3f") + "x",
            )
            for name in names
        ],
    )
    median = median_range(mbs[names[0]])[0]
    met = median >= TARGET_MBS
    print(f"\nparser: {median:.1f} MB/s (target >= {TARGET_MBS:.0f}){'' if met else '  <- misses'}")
    return 0 if met or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
