"""The embedded scripted model: realistic, deterministic runs with no network and no key.

The response is a pure function of the request: the last user message picks the scenario
(keywords such as "plain", "one tool", "forever") and seeds the wording, and the messages after
it tell which round of the scenario this is. Different prompts give different runs; the same
conversation always gives the same chunks.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import re
from collections.abc import AsyncIterator
from typing import Any

import anyio
import msgspec

from ...contracts.messages import Message
from ...contracts.parts import text_of
from .arithmetic import Arithmetic, find_arithmetic
from .types import (
    FinishChunk,
    ModelChunk,
    ModelRequest,
    ProviderError,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    UsageChunk,
)

DEMO_TOOL_NAMES = frozenset(
    {"clock", "calculate", "read_file", "sleep", "ask_user", "write_note", "lorem"}
)
# Checked in this order, so "one tool" wins over a "think" that happens to be in the prompt.
SCENARIOS = (
    "what did i say",
    "provider error",
    "fail tool",
    "slow tool",
    "write note",
    "one tool",
    "ask user",
    "client tool",
    "big result",
    "forever",
    "repeat call",
    "oscillate",
    "unicode",
    "think",
    "plain",
)
BIG_RESULT_CHARS = 1_000_000
RECALLED = 10  # "what did I say": the user's last messages it quotes
_args_encoder = msgspec.json.Encoder()


class _Plan(msgspec.Struct):
    chunks: list[ModelChunk]
    error: str | None = None  # raised as ProviderError after the chunks


class ScriptedProvider:
    """A ``ModelProvider`` that plays scripted scenarios; ``delay_s`` paces the chunks."""

    name = "scripted"

    def __init__(self, delay_s: float = 0.02, model: str = "loopgate-scripted") -> None:
        if delay_s < 0:
            raise ValueError("delay_s must not be negative")
        self.delay_s = delay_s
        self.model = model

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        return self._play(plan_response(request))

    async def _play(self, plan: _Plan) -> AsyncIterator[ModelChunk]:
        delay = self.delay_s
        for chunk in plan.chunks:
            if delay:
                await anyio.sleep(delay)
            yield chunk
        if plan.error is not None:
            raise ProviderError(plan.error, retryable=True)


def scenario_of(prompt: str) -> str:
    low = prompt.lower()
    for name in SCENARIOS:
        if name in low:
            return name
    return "default"


def plan_response(request: ModelRequest) -> _Plan:
    """The chunks for this request (pure: same request, same chunks)."""
    messages = request.messages
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    prompt = text_of(messages[last_user].content) if last_user >= 0 else ""
    after = messages[last_user + 1 :]
    rounds_done = sum(1 for m in after if m.role == "assistant")
    observations = [m for m in after if m.role == "tool"]
    seed = int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:8], "big")
    script = _Script(
        prompt=prompt,
        earlier=[text_of(m.content) for m in messages[: max(last_user, 0)] if m.role == "user"],
        seed=seed,
        rng=random.Random(seed * 31 + rounds_done),
        round=rounds_done,
        offered=[t.name for t in request.tools],
        observations=observations,
    )
    script.run(scenario_of(prompt))
    return script.plan(messages)


_ASKS_TIME = re.compile(r"\b(?:time|clock|date|today)\b", re.IGNORECASE)


class _Script:
    def __init__(
        self,
        *,
        prompt: str,
        earlier: list[str],
        seed: int,
        rng: random.Random,
        round: int,
        offered: list[str],
        observations: list[Message],
    ) -> None:
        self.prompt = prompt
        self.earlier = earlier  # the user's messages before this prompt, oldest first
        self.seed = seed
        self.rng = rng
        self.round = round
        self.offered = offered
        self.observations = observations
        self.chunks: list[ModelChunk] = []
        self.calls = 0
        self.out_chars = 0
        self.error: str | None = None
        words = re.findall(r"[\w'’-]+", prompt)
        self.topic = " ".join(words[:6]) or "your question"
        numbers = [int(n) for n in re.findall(r"\b\d{1,6}\b", prompt)]
        a = numbers[0] if numbers else 12 + seed % 88
        b = numbers[1] if len(numbers) > 1 else 3 + (seed >> 8) % 17
        self.a, self.b = a, b
        # The prompt's own arithmetic, read whole or not at all: what it cannot read, it says.
        self.arithmetic = find_arithmetic(prompt)
        self.expressions = [found.expression for found in self.arithmetic if found.expression]
        self.unreadable = [found for found in self.arithmetic if found.expression is None]
        self.asks_time = _ASKS_TIME.search(prompt) is not None
        # "one tool" with no arithmetic in the prompt: an example, and the answer says so.
        self.example = f"{a} * {b} + {len(words)}"

    # --- building blocks ----------------------------------------------------------------------

    def reason(self, text: str) -> None:
        self.out_chars += len(text)
        self.chunks.extend(ReasoningChunk(piece) for piece in self._pieces(text))

    def say(self, text: str) -> None:
        self.out_chars += len(text)
        self.chunks.extend(TextChunk(piece) for piece in self._pieces(text))

    def call(self, name: str, arguments: dict[str, Any]) -> bool:
        """Stream one tool call in a few argument fragments; False if the tool is not offered."""
        if name not in self.offered:
            return False
        index = self.calls
        self.calls += 1
        raw = _args_encoder.encode(arguments).decode()
        self.out_chars += len(raw)
        call_id = self._call_id(self.round, index)
        cut = [0, *sorted({self.rng.randint(1, max(1, len(raw) - 1)) for _ in range(2)}), len(raw)]
        first = True
        for lo, hi in itertools.pairwise(cut):
            if hi <= lo:
                continue
            if first:
                self.chunks.append(
                    ToolCallChunk(index=index, id=call_id, name=name, arguments=raw[lo:hi])
                )
                first = False
            else:
                self.chunks.append(ToolCallChunk(index=index, arguments=raw[lo:hi]))
        return True

    def _pieces(self, text: str) -> list[str]:
        """Split like a tokenizer would stream: a word or two, long words in parts."""
        tokens: list[str] = []
        for token in re.findall(r"\S+\s*|\s+", text):
            while len(token) > 10:
                cut = self.rng.randint(4, 8)
                tokens.append(token[:cut])
                token = token[cut:]
            tokens.append(token)
        pieces: list[str] = []
        i = 0
        while i < len(tokens):
            n = 2 if self.rng.random() < 0.35 else 1
            pieces.append("".join(tokens[i : i + n]))
            i += n
        return pieces

    def observation(self, index: int = 0, limit: int = 80) -> str:
        if not 0 <= index < len(self.observations):
            return "(no result)"
        return _brief(text_of(self.observations[index].content), limit)

    def plan(self, messages: list[Message]) -> _Plan:
        prompt_chars = sum(len(text_of(m.content)) + 16 for m in messages)
        prompt_tokens = prompt_chars // 4 + 1
        completion_tokens = self.out_chars // 4 + 1
        if self.error is None:
            self.chunks.append(FinishChunk("tool_calls" if self.calls else "stop"))
            self.chunks.append(
                UsageChunk(
                    prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens,
                    total_tokens=prompt_tokens + completion_tokens,
                )
            )
        return _Plan(self.chunks, self.error)

    # --- scenarios ----------------------------------------------------------------------------

    def run(self, scenario: str) -> None:
        if scenario == "think":
            self.thoughtful()
        elif scenario == "default":
            self.default()
        else:
            getattr(self, scenario.replace(" ", "_"))()

    def _opening(self) -> str:
        return self.rng.choice(
            [
                f"The user asks about “{self.topic}”.",
                f"Request: “{self.topic}”.",
                f"Let me think about “{self.topic}”.",
            ]
        )

    def default(self) -> None:
        """The time and the prompt's arithmetic, each looked up only when the prompt asks."""
        lookups: list[tuple[str, dict[str, Any], str]] = []
        if self.asks_time and "clock" in self.offered:
            lookups.append(("clock", {}, "check the clock"))
        if "calculate" in self.offered:
            lookups.extend(
                ("calculate", {"expression": e}, f"work out {e}") for e in self.expressions
            )
        if not lookups:
            if self.unreadable:
                self.say(f"{self._cannot_read()} {self._closing()}")
            else:
                self.introduce()
            return
        if self.round == 0:
            plans = [plan for _, _, plan in lookups]
            if len(lookups) == 1:
                self.reason(f"{self._opening()} I should {plans[0]}.")
                self.say("Let me look that up.")
            else:
                both = "both lookups are" if len(lookups) == 2 else "the lookups are all"
                plan = _listed(plans).replace("the clock", "the current time")
                self.reason(
                    f"{self._opening()} I should {plan} before answering; {both} independent, "
                    "so I can run them together."
                )
                self.say(f"Let me check {_COUNTS[len(lookups)]} things first.")
            for name, arguments, _ in lookups:
                self.call(name, arguments)
            return
        parts = []
        for index, (name, arguments, _) in enumerate(lookups):
            found = self.result_of(index)
            if name == "clock":
                parts.append(f"It is {found} (UTC) right now")
            else:
                parts.append(_calculated(arguments["expression"], found, "="))
        self.reason("The results are in; time to put the answer together.")
        unreadable = f" {self._cannot_read()}" if self.unreadable else ""
        self.say(f"{', and '.join(parts)}.{unreadable} {self._closing()}")

    def result_of(self, index: int) -> str:
        """The observation of the first round's call ``index``, found by its id."""
        call_id = self._call_id(0, index)
        for message in self.observations:
            if message.tool_call_id == call_id:
                return _brief(text_of(message.content))
        return self.observation(index)

    def _call_id(self, round: int, index: int) -> str:
        return f"call_{self.seed % 1_000_000:06d}_{round}_{index}"

    def _cannot_read(self) -> str:
        return " ".join(
            f"I cannot work out “{found.written}”: {found.problem}." for found in self.unreadable
        )

    def introduce(self) -> None:
        """An unmatched prompt: say what this model is instead of pretending to answer."""
        self.say(
            "I am loopgate's embedded scripted model: a demo with no language model behind it, "
            "so I only follow a few scripted prompts. Ask me the time or some arithmetic "
            "(“What time is it, and what is 25 * 16 + 2?” runs two tools at once), or include "
            "one of: think, one tool, slow tool, fail tool, write note, ask user, big result, "
            "unicode, forever, plain, what did I say. For real answers, run a model: --provider "
            "openai --openai-base-url URL --openai-model NAME (README: Use a real model)."
        )

    def _closing(self) -> str:
        return self.rng.choice(
            [
                "That should cover it — ask if you want more detail.",
                "Let me know if you need anything else.",
                "Happy to go deeper on any part of this.",
            ]
        )

    def what_did_i_say(self) -> None:
        """Recall: the user's earlier messages, read from the conversation the model is sent."""
        if not self.earlier:
            self.say("You have not said anything before this in our conversation.")
            return
        recent = self.earlier[-RECALLED:]
        said = "; ".join(f"“{' '.join(text.split())[:200]}”" for text in recent)
        more = len(self.earlier) - len(recent)
        self.say(f"Before this you said: {said}" + (f" (and {more} more before)." if more else "."))

    def plain(self) -> None:
        self.say(
            f"Sure — “{self.topic}” in one line: this answer comes straight from the scripted "
            f"model, no tools needed. {self._closing()}"
        )

    def one_tool(self) -> None:
        first: Arithmetic | None = self.arithmetic[0] if self.arithmetic else None
        if first is not None and first.expression is None:
            self.unreadable = [first]
            self.say(f"{self._cannot_read()} Write it with numbers and + - * / ^ ( ).")
            return
        expression = first.expression if first is not None else None
        if self.round > 0:
            found = self.observation(0)
            if expression is None:
                self.say(
                    "There is no arithmetic in your prompt, so I tried the calculator on an "
                    f"example: {_calculated(self.example, found, '=')}."
                )
            else:
                answer = _calculated(expression, found, "is", lead="The result of ")
                self.say(f"{answer[0].upper()}{answer[1:]}.")
            return
        if not self.call("calculate", {"expression": expression or self.example}):
            self.say("I would use the calculate tool for this, but it is not offered to me.")
        elif expression is None:
            self.reason_first(
                f"{self._opening()} There is no arithmetic in it; one calculation on an "
                f"example will do: {self.example}."
            )
        else:
            self.reason_first(f"{self._opening()} One calculation is enough: {expression}.")

    def reason_first(self, text: str) -> None:
        """Put reasoning before any chunks already queued (tool calls are built first)."""
        queued, self.chunks = self.chunks, []
        self.reason(text)
        self.chunks.extend(queued)

    def fail_tool(self) -> None:
        path = f"missing-{self.seed % 1000:03d}.txt"
        if self.round == 0 and self.call("read_file", {"path": path}):
            self.reason_first(f"I need the contents of {path}.")
            return
        self.say(f"I could not read the file: {self.observation(0)}.")

    def slow_tool(self) -> None:
        if self.round == 0 and self.call("sleep", {"seconds": 30}):
            self.reason_first("This needs a slow operation; I will wait for it.")
            return
        self.say(f"The slow operation did not help: {self.observation(0)}.")

    def write_note(self) -> None:
        # write_note needs approval: the scenario that exercises permission requests.
        name = f"note-{self.seed % 1000:03d}"
        text = f"# {self.topic}\n\nWritten by the scripted model.\n"
        if self.round == 0 and self.call("write_note", {"name": name, "text": text}):
            self.reason_first(f"I should save a note called {name}.")
            return
        self.say(f"Note result: {self.observation(0)}.")

    def forever(self) -> None:
        if self.call("calculate", {"expression": f"{self.round + 1} + {self.a}"}):
            self.reason_first(f"Round {self.round + 1}: one more calculation, then another.")
            return
        self.say(
            f"Stopping after {self.round} rounds of calculations; the last one gave "
            f"{self.observation(len(self.observations) - 1)}."
        )

    def repeat_call(self) -> None:
        """A stuck model: the same call every round, whatever it is told."""
        if self.call("clock", {}):
            self.reason_first("I should check the clock again.")
            return
        self.say(f"The clock said {self.observation(len(self.observations) - 1)}.")

    def oscillate(self) -> None:
        """A stuck model swinging between two calls: A, B, A, B …"""
        expression = "1 + 1" if self.round % 2 == 0 else "2 + 2"
        if self.call("calculate", {"expression": expression}):
            self.reason_first(f"Let me check {expression} once more.")
            return
        self.say("1 + 1 = 2 and 2 + 2 = 4.")

    def provider_error(self) -> None:
        self.say(f"Let me start on “{self.topic}” — first, the")
        self.error = "the scripted model lost its connection"

    def ask_user(self) -> None:
        question = f"Before I continue with “{self.topic}”: which option do you prefer, A or B?"
        if self.round == 0 and self.call("ask_user", {"question": question}):
            self.reason_first("The request is ambiguous; I should ask.")
            return
        self.say(f"Thanks — you said: {self.observation(0)}. Continuing with that.")

    def client_tool(self) -> None:
        client = [name for name in self.offered if name not in DEMO_TOOL_NAMES]
        if self.round == 0 and client:
            self.call(client[0], {"topic": self.topic})
            self.reason_first(f"The client can handle this with {client[0]}.")
            return
        if self.round == 0:
            self.ask_user()
            return
        self.say(f"The client answered: {self.observation(0)}.")

    def big_result(self) -> None:
        if self.round == 0 and self.call("lorem", {"size": BIG_RESULT_CHARS}):
            self.reason_first("I will fetch a large document.")
            return
        size = len(self.observations[0].content) if self.observations else 0
        self.say(f"The tool returned {size} characters, starting with: {self.observation(0, 40)}")

    def unicode(self) -> None:
        self.reason("Überlegung: 日本語のテキスト, Ελληνικά, שלום — und Emoji 🚀👩‍💻.\n")
        self.say(
            "Voilà — naïve café ☕, 日本語 (にほんご), Ελληνικά, שלום עולם.\n"
            "Emoji: 🚀 👩‍💻 🇺🇦 👍🏽\n\nCombining: e\u0301 vs é; math: ∑ x² ≤ ∞.\n"
        )

    def thoughtful(self) -> None:
        self.reason(
            f"{self._opening()} Let me reason step by step: first restate it, then weigh two "
            "readings of the question, then pick the more useful one."
        )
        self.say(
            f"After thinking it over: the useful reading of “{self.topic}” is the literal "
            f"one. {self._closing()}"
        )


_COUNTS = {2: "two", 3: "three", 4: "four"}


def _brief(text: str, limit: int = 80) -> str:
    """A tool result on one line, cut at ``limit`` characters."""
    text = text.strip().replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "…"


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _calculated(expression: str, observation: str, verb: str, lead: str = "") -> str:
    """``25 * 16 + 2 = 402``, or what the calculator said when it refused."""
    if observation.startswith("Error: "):
        why = observation.removeprefix("Error: ").removeprefix("calculate: ")
        return f"the calculator could not work out {expression}: {why}"
    return f"{lead}{expression} {verb} {observation}"
